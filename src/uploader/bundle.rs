//! ZIP bundles: one CSV, an optional `pages.pdf` and an optional `res/` folder. The archive is
//! recognised by its content, checked as a whole from its central directory (names, links,
//! encryption, methods, entry count, total size, per-entry ratio) before a byte is written,
//! then extracted with every entry's size enforced while it is read. The `res/` files count
//! against the bytes one upload may store: past that cap nothing is extracted.

use super::UploadError;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use zip::{CompressionMethod, ZipArchive};

pub use crate::settings::ZipLimits;

/// Entries smaller than this are not held to the ratio limit (tiny text compresses well).
const RATIO_FLOOR: u64 = 1 << 20;

/// What a checked archive holds, by entry index.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    /// The CSV: entry index and name.
    pub csv: (usize, String),
    pub pdf: Option<usize>,
    /// `res/` files: entry index and path below `res/`.
    pub res: Vec<(usize, String)>,
    /// Uncompressed bytes of all entries.
    pub bytes: u64,
    /// Uncompressed bytes of the `res/` files (stored as they are).
    pub res_bytes: u64,
}

/// An extracted bundle.
#[derive(Debug, Clone)]
pub struct Extracted {
    pub csv: PathBuf,
    pub pdf: Option<PathBuf>,
    /// Path below `res/` and the extracted file.
    pub res: Vec<(String, PathBuf)>,
}

/// Whether the file at `path` is a ZIP archive (by its first bytes).
pub fn is_zip(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && is_zip_start(&magic)
}

/// Whether a file beginning with `first` is a ZIP archive (its first four bytes tell).
pub fn is_zip_start(first: &[u8]) -> bool {
    first.starts_with(b"PK\x03\x04") || first.starts_with(b"PK\x05\x06")
}

fn bad(msg: impl Into<String>) -> UploadError {
    UploadError::BadRequest(format!("the ZIP archive cannot be used: {}", msg.into()))
}

fn too_large(msg: impl Into<String>) -> UploadError {
    UploadError::TooLarge(format!("the ZIP archive is over a limit: {}", msg.into()))
}

/// Checks an archive's directory: every rule is applied before anything is extracted.
pub fn inspect<R: Read + Seek>(
    zip: &mut ZipArchive<R>,
    limits: &ZipLimits,
) -> Result<Listing, UploadError> {
    if zip.len() > limits.max_entries {
        return Err(too_large(format!(
            "{} entries; at most {} are accepted",
            zip.len(),
            limits.max_entries
        )));
    }
    let mut csv: Vec<(usize, String)> = Vec::new();
    let mut pdf = None;
    let mut res = Vec::new();
    let mut bytes = 0u64;
    let mut res_bytes = 0u64;
    let mut seen = std::collections::HashSet::new();
    for i in 0..zip.len() {
        let f = zip
            .by_index_raw(i)
            .map_err(|e| bad(format!("entry {}: {e}", i + 1)))?;
        let raw = f
            .name()
            .map_err(|_| bad(format!("entry {} has an unreadable name", i + 1)))?
            .to_string();
        let shown: String = raw.chars().take(200).collect();
        check_entry(&f, &raw, &shown)?;
        if !seen.insert(raw.to_ascii_lowercase()) {
            return Err(bad(format!("entry `{shown}` appears twice")));
        }
        let size = f.size();
        bytes = bytes.saturating_add(size);
        if bytes > limits.max_bytes {
            return Err(too_large(format!(
                "more than {} bytes uncompressed",
                limits.max_bytes
            )));
        }
        if size > RATIO_FLOOR && size / f.compressed_size().max(1) > limits.max_ratio {
            return Err(too_large(format!(
                "entry `{shown}` expands more than {}:1",
                limits.max_ratio
            )));
        }
        if f.is_dir() {
            if raw == "res/" || raw.starts_with("res/") {
                continue;
            }
            return Err(bad(format!(
                "unexpected folder `{shown}`; a bundle holds one CSV, pages.pdf and a res/ folder"
            )));
        }
        if let Some(rest) = raw.strip_prefix("res/") {
            res_bytes = res_bytes.saturating_add(size);
            res.push((i, rest.to_string()));
        } else if raw.contains('/') {
            return Err(bad(format!(
                "unexpected entry `{shown}`; a bundle holds one CSV, pages.pdf and a res/ folder"
            )));
        } else if raw.eq_ignore_ascii_case("pages.pdf") {
            pdf = Some(i);
        } else if raw.to_ascii_lowercase().ends_with(".csv") {
            csv.push((i, raw));
        } else {
            return Err(bad(format!(
                "unexpected entry `{shown}`; a bundle holds one CSV, pages.pdf and a res/ folder"
            )));
        }
    }
    res_tree_is_sound(&res).map_err(bad)?;
    match csv.len() {
        1 => Ok(Listing {
            csv: csv.remove(0),
            pdf,
            res,
            bytes,
            res_bytes,
        }),
        0 => Err(bad("it holds no CSV file")),
        n => Err(bad(format!(
            "it holds {n} CSV files; exactly one is accepted"
        ))),
    }
}

/// One entry's own rules: a relative path that stays inside, no link, no encryption, stored
/// or deflated. `shown` is its name as messages quote it.
fn check_entry<R: Read + ?Sized>(
    f: &zip::read::ZipFile<'_, R>,
    raw: &str,
    shown: &str,
) -> Result<(), UploadError> {
    if raw.starts_with('/')
        || raw.contains('\\')
        || raw.contains('\0')
        || raw.split('/').any(|s| s == ".." || s == ".")
        || f.enclosed_name().is_none()
    {
        return Err(bad(format!(
            "entry `{shown}` has an absolute or escaping path"
        )));
    }
    if f.is_symlink() {
        return Err(bad(format!("entry `{shown}` is a link")));
    }
    if f.encrypted() {
        return Err(bad(format!(
            "entry `{shown}` is encrypted; encrypted archives are not accepted"
        )));
    }
    if !matches!(
        f.compression(),
        CompressionMethod::Stored | CompressionMethod::Deflated
    ) {
        return Err(bad(format!(
            "entry `{shown}` uses an unsupported compression method ({}); use deflate",
            f.compression()
        )));
    }
    Ok(())
}

impl From<crate::files::OverBudget> for UploadError {
    fn from(e: crate::files::OverBudget) -> Self {
        UploadError::TooLarge(e.to_string())
    }
}

/// Checks the archive at `path` and extracts it into `dest` (created). `store_cap` is the
/// bytes the upload may store: a `res/` folder larger than that is refused before anything
/// is written.
pub fn extract(
    path: &Path,
    dest: &Path,
    limits: &ZipLimits,
    store_cap: u64,
) -> Result<Extracted, UploadError> {
    let file = std::fs::File::open(path).map_err(UploadError::from)?;
    let mut zip = ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| bad(e.to_string()))?;
    let listing = inspect(&mut zip, limits)?;
    crate::files::StoreBudget::new(store_cap).take(listing.res_bytes)?;
    std::fs::create_dir_all(dest).map_err(UploadError::from)?;
    let csv = dest.join("bundle.csv");
    extract_entry(&mut zip, listing.csv.0, &csv)?;
    let pdf = match listing.pdf {
        Some(i) => {
            let p = dest.join("pages.pdf");
            extract_entry(&mut zip, i, &p)?;
            Some(p)
        }
        None => None,
    };
    let mut res = Vec::with_capacity(listing.res.len());
    for (n, (i, rel)) in listing.res.iter().enumerate() {
        let p = dest.join(format!("res-{n:06}"));
        extract_entry(&mut zip, *i, &p)?;
        res.push((rel.clone(), p));
    }
    Ok(Extracted { csv, pdf, res })
}

/// Decompresses entry `i` into `to`, refusing data beyond the size its header declares.
fn copy_entry<R: Read + Seek>(
    zip: &mut ZipArchive<R>,
    i: usize,
    to: &mut impl std::io::Write,
) -> Result<(), UploadError> {
    let mut f = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
    let declared = f.size();
    let name: String = f
        .name()
        .map(|n| n.chars().take(200).collect())
        .unwrap_or_default();
    let n = std::io::copy(&mut (&mut f).take(declared + 1), to)
        .map_err(|e| bad(format!("entry `{name}`: {e}")))?;
    if n != declared {
        return Err(bad(format!(
            "entry `{name}` does not hold the {declared} bytes its header declares"
        )));
    }
    Ok(())
}

/// Decompresses entry `i` into a new file `to`.
fn extract_entry<R: Read + Seek>(
    zip: &mut ZipArchive<R>,
    i: usize,
    to: &Path,
) -> Result<(), UploadError> {
    let mut out = std::fs::File::create(to).map_err(UploadError::from)?;
    copy_entry(zip, i, &mut out)
}

/// Checks and lists an archive held in memory, decompressing every kept entry (for the fuzz
/// target and tests).
pub fn inspect_bytes(bytes: &[u8], limits: &ZipLimits) -> Result<Listing, UploadError> {
    let mut zip = ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| bad(e.to_string()))?;
    let listing = inspect(&mut zip, limits)?;
    for i in std::iter::once(listing.csv.0)
        .chain(listing.pdf)
        .chain(listing.res.iter().map(|r| r.0))
    {
        copy_entry(&mut zip, i, &mut std::io::sink())?;
    }
    Ok(listing)
}

/// `res/` can be stored as a tree: no path twice, and no path that is both a file and a folder
/// (`res/a` beside `res/a/b`).
fn res_tree_is_sound(res: &[(usize, String)]) -> Result<(), String> {
    let mut files = std::collections::HashSet::with_capacity(res.len());
    for (_, p) in res {
        if !files.insert(p.as_str()) {
            return Err(format!("`res/{p}` appears twice"));
        }
    }
    for (_, p) in res {
        for (at, _) in p.match_indices('/') {
            if files.contains(&p[..at]) {
                return Err(format!(
                    "`res/{}` is both a file and a folder (`res/{p}`)",
                    &p[..at]
                ));
            }
        }
    }
    Ok(())
}

/// Offers an extracted bundle to the plugins `e` uses, in the order its file lists them,
/// until one refuses it.
pub async fn offer(
    plugins: &crate::plugins::Registry,
    e: &crate::schema::Entity,
    archive: &mut crate::plugins::Archive<'_>,
) -> Result<(), UploadError> {
    for (p, settings) in plugins.of(e) {
        p.on_archive(settings, archive).await?;
    }
    Ok(())
}
