//! Sample PDFs for tests and benchmarks: `sample_pdf(n)` has n pages, page k showing the text
//! `Page k`, with the font and media box inherited from the page tree; `shared_image_pdf`
//! has pages that all show one large image.
#![allow(dead_code)]

use lopdf::{Document, Object, Stream, dictionary};

pub fn sample_pdf(pages: usize) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(
        dictionary! {"Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica"},
    );
    let resources = doc.add_object(dictionary! {"Font" => dictionary! {"F1" => font}});
    let mut kids = Vec::with_capacity(pages);
    for n in 1..=pages {
        let content = format!("BT /F1 24 Tf 72 720 Td (Page {n}) Tj ET");
        let c = doc.add_object(Stream::new(dictionary! {}, content.into_bytes()));
        let p =
            doc.add_object(dictionary! {"Type" => "Page", "Parent" => pages_id, "Contents" => c});
        kids.push(Object::Reference(p));
    }
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => pages as i64,
            "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let cat = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
    doc.trailer.set("Root", cat);
    let mut buf = Vec::new();
    doc.save_to(&mut buf).expect("a PDF in memory");
    buf
}

/// A PDF of `pages` pages that all draw one image XObject of `image_bytes` random bytes (a
/// raw 8-bit grey image): small to send, but every one-page PDF made of it carries the image.
pub fn shared_image_pdf(pages: usize, image_bytes: usize) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let side = (image_bytes as f64).sqrt() as i64;
    let pixels: Vec<u8> = (0..side * side).map(|_| rand::random::<u8>()).collect();
    let image = doc.add_object(Stream::new(
        dictionary! {
            "Type" => "XObject", "Subtype" => "Image", "Width" => side, "Height" => side,
            "ColorSpace" => "DeviceGray", "BitsPerComponent" => 8,
        },
        pixels,
    ));
    let resources = doc.add_object(dictionary! {"XObject" => dictionary! {"Im1" => image}});
    let mut kids = Vec::with_capacity(pages);
    for _ in 0..pages {
        let c = doc.add_object(Stream::new(
            dictionary! {},
            b"q 612 0 0 792 0 0 cm /Im1 Do Q".to_vec(),
        ));
        let p =
            doc.add_object(dictionary! {"Type" => "Page", "Parent" => pages_id, "Contents" => c});
        kids.push(Object::Reference(p));
    }
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => pages as i64,
            "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let cat = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
    doc.trailer.set("Root", cat);
    let mut buf = Vec::new();
    doc.save_to(&mut buf).expect("a PDF in memory");
    buf
}
