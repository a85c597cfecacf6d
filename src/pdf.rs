//! `pages.pdf`: split a PDF into one-page PDFs with lopdf. An uploaded PDF is untrusted, so
//! the server never parses it in its own process: [`split_contained`] runs the split in a
//! child process (`entiserve pdf-pages`) under memory, CPU-time and file-size limits and a
//! wall-clock timeout, so a crash, a stack overflow or a memory blow-up ends only the child
//! and the upload is refused with a 400.

use lopdf::{Dictionary, Document, Object, ObjectId};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// Why a PDF cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum PdfError {
    #[error("pages.pdf is not a readable PDF: {0}")]
    Unreadable(String),
    #[error("pages.pdf has {pages} pages; at most {max} are accepted")]
    TooManyPages { pages: usize, max: usize },
    #[error("pages.pdf could not be processed: {0}")]
    Failed(String),
    /// Its one-page PDFs would take more than the bytes allowed (`max` of [`ChildLimits`]).
    #[error("the pages of pages.pdf would take more than {max} bytes")]
    TooMuchOutput { max: u64 },
}

/// Keys inherited from the page tree that a lone page must carry itself.
const INHERITED: &[&[u8]] = &[b"Resources", b"MediaBox", b"CropBox", b"Rotate"];
/// Objects one page may pull in; beyond it the page is refused.
const MAX_OBJECTS_PER_PAGE: usize = 200_000;

/// Splits `bytes` into one PDF per page, in page order.
pub fn split(bytes: &[u8], max_pages: usize) -> Result<Vec<Vec<u8>>, PdfError> {
    let mut out = Vec::new();
    split_each(bytes, max_pages, |_, page| {
        out.push(page);
        Ok(())
    })?;
    Ok(out)
}

/// Splits `bytes` and hands each page's PDF (numbered from 1) to `sink`; returns the count.
pub fn split_each(
    bytes: &[u8],
    max_pages: usize,
    mut sink: impl FnMut(usize, Vec<u8>) -> Result<(), PdfError>,
) -> Result<usize, PdfError> {
    let head = &bytes[..bytes.len().min(1024)];
    if !head.windows(5).any(|w| w == b"%PDF-") {
        return Err(PdfError::Unreadable("it does not start like a PDF".into()));
    }
    let doc = Document::load_mem(bytes).map_err(|e| PdfError::Unreadable(e.to_string()))?;
    let pages = doc.get_pages();
    if pages.is_empty() {
        return Err(PdfError::Unreadable(
            "it has no page that can be read".into(),
        ));
    }
    if pages.len() > max_pages {
        return Err(PdfError::TooManyPages {
            pages: pages.len(),
            max: max_pages,
        });
    }
    for (n, id) in pages.values().enumerate() {
        sink(n + 1, one_page(&doc, *id)?)?;
    }
    Ok(pages.len())
}

/// A new document holding only page `page` of `src` and what it references.
fn one_page(src: &Document, page: ObjectId) -> Result<Vec<u8>, PdfError> {
    let bad = |e: lopdf::Error| PdfError::Unreadable(e.to_string());
    let mut dict = src.get_dictionary(page).map_err(bad)?.clone();
    inherit(src, &mut dict);
    // Links and beads point at other pages and would pull the whole document in.
    for k in [&b"Parent"[..], b"Annots", b"B", b"StructParents"] {
        dict.remove(k);
    }
    let mut out = Document::with_version(src.version.clone());
    let mut ids: HashMap<ObjectId, ObjectId> = HashMap::new();
    let mut todo: Vec<ObjectId> = Vec::new();
    let page_obj = translate(Object::Dictionary(dict), &mut out, &mut ids, &mut todo);
    let page_id = out.add_object(page_obj);
    while let Some(old) = todo.pop() {
        if ids.len() > MAX_OBJECTS_PER_PAGE {
            return Err(PdfError::Unreadable(
                "a page references too many objects".into(),
            ));
        }
        let new = ids[&old];
        let obj = match src.get_object(old) {
            Ok(o) => strip_tree_links(o.clone()),
            Err(_) => Object::Null,
        };
        let obj = translate(obj, &mut out, &mut ids, &mut todo);
        out.objects.insert(new, obj);
    }
    let pages_id = out.new_object_id();
    if let Ok(Object::Dictionary(d)) = out.get_object_mut(page_id) {
        d.set("Parent", Object::Reference(pages_id));
    }
    let mut pages = Dictionary::new();
    pages.set("Type", Object::Name(b"Pages".to_vec()));
    pages.set("Kids", Object::Array(vec![Object::Reference(page_id)]));
    pages.set("Count", Object::Integer(1));
    out.objects.insert(pages_id, Object::Dictionary(pages));
    let mut catalog = Dictionary::new();
    catalog.set("Type", Object::Name(b"Catalog".to_vec()));
    catalog.set("Pages", Object::Reference(pages_id));
    let catalog_id = out.add_object(catalog);
    out.trailer.set("Root", Object::Reference(catalog_id));
    let mut buf = Vec::new();
    out.save_to(&mut buf)
        .map_err(|e| PdfError::Failed(e.to_string()))?;
    Ok(buf)
}

/// Copies inherited attributes from the page's ancestors into `dict`.
fn inherit(src: &Document, dict: &mut Dictionary) {
    let mut parent = dict.get(b"Parent").and_then(Object::as_reference).ok();
    for _ in 0..64 {
        let Some(pid) = parent else { break };
        let Ok(p) = src.get_dictionary(pid) else {
            break;
        };
        for key in INHERITED {
            if !dict.has(key)
                && let Ok(v) = p.get(key)
            {
                dict.set(key.to_vec(), v.clone());
            }
        }
        parent = p.get(b"Parent").and_then(Object::as_reference).ok();
    }
}

/// Page-tree nodes reached indirectly lose their links into the tree.
fn strip_tree_links(obj: Object) -> Object {
    match obj {
        Object::Dictionary(mut d) => {
            let is_tree = d
                .get(b"Type")
                .and_then(Object::as_name)
                .is_ok_and(|n| n == b"Page" || n == b"Pages");
            if is_tree {
                d.remove(b"Parent");
                d.remove(b"Kids");
                d.remove(b"Annots");
            }
            Object::Dictionary(d)
        }
        o => o,
    }
}

/// Rewrites references of `obj` to ids of `out`, queueing objects not copied yet.
fn translate(
    obj: Object,
    out: &mut Document,
    ids: &mut HashMap<ObjectId, ObjectId>,
    todo: &mut Vec<ObjectId>,
) -> Object {
    match obj {
        Object::Reference(old) => {
            let new = *ids.entry(old).or_insert_with(|| {
                todo.push(old);
                out.new_object_id()
            });
            Object::Reference(new)
        }
        Object::Array(items) => Object::Array(
            items
                .into_iter()
                .map(|o| translate(o, out, ids, todo))
                .collect(),
        ),
        Object::Dictionary(d) => Object::Dictionary(translate_dict(d, out, ids, todo)),
        Object::Stream(mut s) => {
            s.dict = translate_dict(s.dict, out, ids, todo);
            Object::Stream(s)
        }
        o => o,
    }
}

fn translate_dict(
    d: Dictionary,
    out: &mut Document,
    ids: &mut HashMap<ObjectId, ObjectId>,
    todo: &mut Vec<ObjectId>,
) -> Dictionary {
    let mut nd = Dictionary::new();
    for (k, v) in d.into_iter() {
        nd.set(k, translate(v, out, ids, todo));
    }
    nd
}

/// The file name of page `n` in a split directory.
pub fn page_file(n: usize) -> String {
    format!("page-{n:06}.pdf")
}

/// Entry point of the `entiserve pdf-pages` child: splits `input` into `out_dir`, prints
/// the page count; on failure prints the reason on stderr and exits 3. The split stops before
/// writing the page that would take the pages written past `max_bytes`.
pub fn child_main(
    input: &Path,
    out_dir: &Path,
    max_pages: usize,
    max_bytes: u64,
) -> std::process::ExitCode {
    let run = || -> Result<usize, PdfError> {
        let bytes = std::fs::read(input).map_err(|e| PdfError::Failed(e.to_string()))?;
        std::fs::create_dir_all(out_dir).map_err(|e| PdfError::Failed(e.to_string()))?;
        let mut written = 0u64;
        split_each(&bytes, max_pages, |n, page| {
            written = written.saturating_add(page.len() as u64);
            if written > max_bytes {
                return Err(PdfError::TooMuchOutput { max: max_bytes });
            }
            std::fs::write(out_dir.join(page_file(n)), page)
                .map_err(|e| PdfError::Failed(e.to_string()))
        })
    };
    match run() {
        Ok(n) => {
            println!("{n}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            // The last stderr line is the error, for the parent to read back.
            eprintln!("{}", serde_json::to_string(&e).unwrap_or_default());
            std::process::ExitCode::from(3)
        }
    }
}

/// Limits of the split child.
#[derive(Debug, Clone)]
pub struct ChildLimits {
    /// Address space, bytes.
    pub memory: u64,
    /// CPU seconds.
    pub cpu_secs: u64,
    /// Wall-clock time before the child is killed.
    pub wall: Duration,
    /// Bytes of one-page PDFs the child may write, all pages together.
    pub output: u64,
}

impl Default for ChildLimits {
    fn default() -> Self {
        ChildLimits {
            memory: 4 << 30,
            cpu_secs: 120,
            wall: Duration::from_secs(180),
            output: u64::MAX,
        }
    }
}

/// Splits `input` into `out_dir` (files named by [`page_file`]) in a contained child process
/// of `exe`; returns the page count.
pub async fn split_contained(
    exe: &Path,
    input: &Path,
    out_dir: &Path,
    max_pages: usize,
    limits: &ChildLimits,
) -> Result<usize, PdfError> {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("pdf-pages")
        .arg("--max-pages")
        .arg(max_pages.to_string())
        .arg("--max-bytes")
        .arg(limits.output.to_string())
        .arg(input)
        .arg(out_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let (memory, cpu) = (limits.memory, limits.cpu_secs);
    let file_size = std::fs::metadata(input)
        .map(|m| m.len())
        .unwrap_or(0)
        .saturating_mul(4)
        .saturating_add(64 << 20)
        .min(limits.output.saturating_add(1));
    // SAFETY: only async-signal-safe calls (setrlimit) run between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let set = |res, v: u64| {
                let lim = libc::rlimit {
                    rlim_cur: v as libc::rlim_t,
                    rlim_max: v as libc::rlim_t,
                };
                if libc::setrlimit(res, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            };
            set(libc::RLIMIT_AS, memory)?;
            set(libc::RLIMIT_CPU, cpu)?;
            set(libc::RLIMIT_CORE, 0)?;
            set(libc::RLIMIT_FSIZE, file_size)?;
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| PdfError::Failed(format!("cannot start the PDF reader: {e}")))?;
    let out = match tokio::time::timeout(limits.wall, child.wait_with_output()).await {
        Ok(r) => r.map_err(|e| PdfError::Failed(e.to_string()))?,
        Err(_) => {
            return Err(PdfError::Unreadable(
                "reading it took longer than allowed".into(),
            ));
        }
    };
    if out.status.success() {
        return String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| PdfError::Failed("the PDF reader gave no page count".into()));
    }
    if out.status.code() == Some(3) {
        let text = String::from_utf8_lossy(&out.stderr);
        return Err(text
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| PdfError::Unreadable("it cannot be parsed".into())));
    }
    tracing::warn!(status = %out.status, "the PDF reader stopped abnormally");
    Err(PdfError::Unreadable(
        "reading it exceeded the limits or failed".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lopdf::{Stream, dictionary};

    pub fn sample(pages: usize) -> Vec<u8> {
        let mut doc = Document::with_version("1.5");
        let pages_id = doc.new_object_id();
        let font = doc.add_object(
            dictionary! {"Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica"},
        );
        let resources = doc.add_object(dictionary! {"Font" => dictionary! {"F1" => font}});
        let mut kids = Vec::new();
        for n in 1..=pages {
            let content = format!("BT /F1 24 Tf 72 720 Td (Page {n}) Tj ET");
            let c = doc.add_object(Stream::new(dictionary! {}, content.into_bytes()));
            let p = doc
                .add_object(dictionary! {"Type" => "Page", "Parent" => pages_id, "Contents" => c});
            kids.push(Object::Reference(p));
        }
        doc.objects.insert(
            pages_id,
            Object::Dictionary(dictionary! {
                "Type" => "Pages", "Kids" => kids, "Count" => pages as i64,
                "Resources" => resources, "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
            }),
        );
        let cat = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
        doc.trailer.set("Root", cat);
        let mut buf = Vec::new();
        doc.save_to(&mut buf).unwrap();
        buf
    }

    #[test]
    fn splits_into_single_pages_that_keep_their_content() {
        let parts = split(&sample(3), 10).unwrap();
        assert_eq!(parts.len(), 3);
        for (i, p) in parts.iter().enumerate() {
            let d = Document::load_mem(p).unwrap();
            let pages = d.get_pages();
            assert_eq!(pages.len(), 1);
            let content = d.get_page_content(pages[&1]);
            assert!(String::from_utf8_lossy(&content).contains(&format!("Page {}", i + 1)));
            let page = d.get_dictionary(pages[&1]).unwrap();
            assert!(page.has(b"MediaBox") && page.has(b"Resources"));
        }
    }

    #[test]
    fn refuses_what_is_not_a_pdf_or_too_long() {
        assert!(matches!(split(b"hello", 10), Err(PdfError::Unreadable(_))));
        assert!(matches!(
            split(b"%PDF-1.4\n garbage", 10),
            Err(PdfError::Unreadable(_))
        ));
        assert_eq!(
            split(&sample(3), 2),
            Err(PdfError::TooManyPages { pages: 3, max: 2 })
        );
    }
}
