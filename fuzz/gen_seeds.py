#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (Python 3 standard library only).

    python3 fuzz/gen_seeds.py            # into fuzz/seeds/{zip_intake,pdf_pages}/

The seeds are small valid inputs that reach deep into the code under test, plus a few
refused bundles whose refusal paths are worth mutating from:

- pdf_pages: classic xref tables, inherited page attributes on a nested page tree, Flate
  content streams, annotations pointing at other pages, an image XObject, a PDF 1.5 file with
  an object stream and a cross-reference stream, and an incremental update (`/Prev`);
- zip_intake: bundles as the uploader expects them (one CSV, pages.pdf, a res/ folder),
  stored and deflated, with data descriptors, forced ZIP64, an archive comment; and bundles
  that are refused (two CSVs, an escaping path, a link, an unexpected folder).

scripts/fuzz.sh copies them into fuzz/corpus/<target>/ (the fuzzer's working corpus, not
committed) before each run. Output is deterministic: fixed timestamps, no randomness.
"""

import io
import os
import struct
import sys
import zipfile
import zlib

ROOT = os.path.dirname(os.path.abspath(__file__))


# --------------------------------------------------------------------------------------------
# PDF
# --------------------------------------------------------------------------------------------


def stream(dict_body: bytes, data: bytes, flate: bool = False) -> bytes:
    if flate:
        data = zlib.compress(data, 9)
        dict_body += b" /Filter /FlateDecode"
    return b"<< %s /Length %d >>\nstream\n%s\nendstream" % (dict_body, len(data), data)


def pdf(objects: dict, root: int, version: bytes = b"1.4", info: int | None = None) -> bytes:
    """A PDF with a classic xref table; `objects` maps object numbers to their bodies."""
    out = bytearray(b"%PDF-" + version + b"\n%\xe2\xe3\xcf\xd3\n")
    size = max(objects) + 1
    offsets = {}
    for num in sorted(objects):
        offsets[num] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (num, objects[num])
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for num in range(1, size):
        if num in offsets:
            out += b"%010d 00000 n \n" % offsets[num]
        else:
            out += b"0000000000 65535 f \n"
    trailer = b"/Size %d /Root %d 0 R" % (size, root)
    if info:
        trailer += b" /Info %d 0 R" % info
    out += b"trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n" % (trailer, xref)
    return bytes(out)


def content(n: int) -> bytes:
    return b"BT /F1 24 Tf 72 720 Td (Page %d) Tj ET" % n


def simple(pages: int) -> bytes:
    """Like `sample()` in src/pdf.rs: resources and media box inherited from /Pages."""
    objs = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        4: b"<< /Font << /F1 3 0 R >> >>",
    }
    kids = []
    for n in range(1, pages + 1):
        c, p = 3 + 2 * n, 4 + 2 * n
        objs[c] = stream(b"", content(n))
        objs[p] = b"<< /Type /Page /Parent 2 0 R /Contents %d 0 R >>" % c
        kids.append(b"%d 0 R" % p)
    objs[2] = b"<< /Type /Pages /Kids [%s] /Count %d /Resources 4 0 R /MediaBox [0 0 612 792] >>" % (
        b" ".join(kids),
        pages,
    )
    return pdf(objs, 1)


def nested() -> bytes:
    """A two-level page tree, Rotate and CropBox inherited, Flate contents, links between
    pages, an image XObject shared by two pages, an /Info dictionary."""
    img = bytes(range(48))  # 4x4 RGB
    objs = {
        1: b"<< /Type /Catalog /Pages 2 0 R /Outlines 20 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 4 /MediaBox [0 0 595 842] /Rotate 90 >>",
        3: b"<< /Type /Pages /Parent 2 0 R /Kids [10 0 R 11 0 R] /Count 2 /Resources 5 0 R >>",
        4: b"<< /Type /Pages /Parent 2 0 R /Kids [12 0 R 13 0 R] /Count 2 /Resources 5 0 R /CropBox [10 10 585 832] >>",
        5: b"<< /Font << /F1 6 0 R >> /XObject << /Im1 7 0 R >> /ProcSet [/PDF /Text /ImageC] >>",
        6: b"<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /Encoding /WinAnsiEncoding >>",
        7: stream(
            b"/Type /XObject /Subtype /Image /Width 4 /Height 4 /ColorSpace /DeviceRGB /BitsPerComponent 8",
            img,
            flate=True,
        ),
        8: b"<< /Title (nested seed) /Producer (gen_seeds.py) /CreationDate (D:20250101000000Z) >>",
        20: b"<< /Type /Outlines /Count 0 >>",
    }
    for i, num in enumerate([10, 11, 12, 13]):
        parent = 3 if i < 2 else 4
        c = 30 + i
        a = 40 + i
        other = [10, 11, 12, 13][(i + 1) % 4]
        draw = content(i + 1) + b" q 40 0 0 40 72 600 cm /Im1 Do Q"
        objs[c] = stream(b"", draw, flate=True)
        objs[a] = b"<< /Type /Annot /Subtype /Link /Rect [0 0 100 100] /Dest [%d 0 R /Fit] >>" % other
        objs[num] = b"<< /Type /Page /Parent %d 0 R /Contents [%d 0 R] /Annots [%d 0 R] /StructParents %d >>" % (
            parent,
            c,
            a,
            i,
        )
    return pdf(objs, 1, version=b"1.6", info=8)


def object_streams() -> bytes:
    """PDF 1.5: the page objects in an object stream, a cross-reference stream instead of a
    table (W [1 4 2], Flate-compressed)."""
    compressed = {
        2: b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 /MediaBox [0 0 300 300] /Resources << /Font << /F1 5 0 R >> >> >>",
        3: b"<< /Type /Page /Parent 2 0 R /Contents 6 0 R >>",
        4: b"<< /Type /Page /Parent 2 0 R /Contents 7 0 R >>",
        5: b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>",
    }
    header, body = [], b""
    for num, obj in compressed.items():
        header.append(b"%d %d" % (num, len(body)))
        body += obj + b"\n"
    head = b" ".join(header) + b"\n"
    objstm_num, xref_num = 8, 9
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    plain = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        6: stream(b"", content(1), flate=True),
        7: stream(b"", content(2), flate=True),
        objstm_num: stream(
            b"/Type /ObjStm /N %d /First %d" % (len(compressed), len(head)), head + body, flate=True
        ),
    }
    for num in sorted(plain):
        offsets[num] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (num, plain[num])
    offsets[xref_num] = len(out)
    rows = [struct.pack(">BIH", 0, 0, 65535)]
    index_in_stream = {num: i for i, num in enumerate(compressed)}
    for num in range(1, xref_num + 1):
        if num in compressed:
            rows.append(struct.pack(">BIH", 2, objstm_num, index_in_stream[num]))
        else:
            rows.append(struct.pack(">BIH", 1, offsets[num], 0))
    xref = stream(
        b"/Type /XRef /Size %d /W [1 4 2] /Root 1 0 R" % (xref_num + 1), b"".join(rows), flate=True
    )
    out += b"%d 0 obj\n%s\nendobj\n" % (xref_num, xref)
    out += b"startxref\n%d\n%%%%EOF\n" % offsets[xref_num]
    return bytes(out)


def incremental() -> bytes:
    """A one-page file plus an update that adds a second page (`/Prev` chain)."""
    base = simple(1)
    prev = int(base.rsplit(b"startxref\n", 1)[1].split(b"\n", 1)[0])
    out = bytearray(base)
    upd = {
        7: stream(b"", content(2)),
        8: b"<< /Type /Page /Parent 2 0 R /Contents 7 0 R >>",
        2: b"<< /Type /Pages /Kids [6 0 R 8 0 R] /Count 2 /Resources 4 0 R /MediaBox [0 0 612 792] >>",
    }
    offsets = {}
    for num in sorted(upd):
        offsets[num] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (num, upd[num])
    xref = len(out)
    out += b"xref\n2 1\n%010d 00000 n \n7 2\n" % offsets[2]
    out += b"%010d 00000 n \n%010d 00000 n \n" % (offsets[7], offsets[8])
    out += b"trailer\n<< /Size 9 /Root 1 0 R /Prev %d >>\nstartxref\n%d\n%%%%EOF\n" % (prev, xref)
    return bytes(out)


# --------------------------------------------------------------------------------------------
# ZIP
# --------------------------------------------------------------------------------------------

# A 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da636460f85f0f0002870180eb47ba920000000049454e44ae426082"
)
DATE = (2025, 1, 1, 0, 0, 0)


def csv_rows(n: int) -> bytes:
    lines = [b"op;name;marker_id;url;type"]
    lines += [b"c;asset %d;%d;res/img/%d.png;image" % (i, i, i) for i in range(1, n + 1)]
    return b"\n".join(lines) + b"\n"


class Unseekable(io.RawIOBase):
    """A write-only stream: zipfile then writes data descriptors (flag bit 3)."""

    def __init__(self):
        self.buf = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.buf += b
        return len(b)


def archive(entries, method=zipfile.ZIP_DEFLATED, comment=b"", zip64=False, unseekable=False):
    """entries: (name, bytes | None for a folder, unix mode or None)."""
    sink = Unseekable() if unseekable else io.BytesIO()
    with zipfile.ZipFile(sink, "w", compression=method) as z:
        z.comment = comment
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=DATE)
            info.compress_type = method
            if data is None:
                info.external_attr = (0o40755 << 16) | 0x10
                z.writestr(info, b"")
                continue
            if mode is not None:
                info.external_attr = mode << 16
            if zip64:
                with z.open(info, "w", force_zip64=True) as f:
                    f.write(data)
            else:
                z.writestr(info, data)
    return bytes(sink.buf if unseekable else sink.getvalue())


def bundle(pages_pdf: bytes, n: int = 3, **kw) -> bytes:
    entries = [("assets.csv", csv_rows(n), None), ("pages.pdf", pages_pdf, None), ("res/", None, None)]
    entries += [("res/img/%d.png" % i, PNG, None) for i in range(1, n + 1)]
    return archive(entries, **kw)


def main() -> None:
    pdfs = {
        "simple-1.pdf": simple(1),
        "simple-3.pdf": simple(3),
        "nested-tree.pdf": nested(),
        "object-streams.pdf": object_streams(),
        "incremental.pdf": incremental(),
    }
    small = pdfs["simple-3.pdf"]
    zips = {
        "bundle-deflated.zip": bundle(small),
        "bundle-stored.zip": bundle(small, method=zipfile.ZIP_STORED),
        "bundle-descriptors.zip": bundle(small, unseekable=True),
        "bundle-zip64.zip": bundle(simple(1), n=1, zip64=True),
        "bundle-comment.zip": bundle(simple(1), n=1, comment=b"entiserve seed"),
        "csv-only.zip": archive([("campaigns.csv", b"op,name\nc,seed campaign\n", None)]),
        "refused-two-csv.zip": archive([("a.csv", b"op,name\n", None), ("b.csv", b"op,name\n", None)]),
        "refused-escaping.zip": archive([("a.csv", b"op,name\n", None), ("res/../../x", b"x", None)]),
        "refused-link.zip": archive([("a.csv", b"op,name\n", None), ("res/l", b"/etc/passwd", 0o120777)]),
        "refused-folder.zip": archive([("a.csv", b"op,name\n", None), ("other/x.txt", b"x", None)]),
    }
    for target, files in (("pdf_pages", pdfs), ("zip_intake", zips)):
        d = os.path.join(ROOT, "seeds", target)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            print(f"{target}/{name}: {len(data)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
