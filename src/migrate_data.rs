//! `entiserve migrate-data --from URL --to URL`: copies every row of an installation's database
//! into another, empty database (typically its SQLite file into PostgreSQL), so that a server
//! started on the copy serves the same objects under the same ids, signs in the same users with
//! the same passwords and tokens, and answers for the same background requests.
//!
//! The source is read in one snapshot (SQLite: one read transaction, which never blocks the
//! writer of a live server; PostgreSQL: `REPEATABLE READ`), so the copy is the database as it
//! was at one instant even while a server goes on writing to it. The target is first brought
//! to what a server on the same entity definitions makes of a new database (fixed tables,
//! entity tables, indexes, row-count bookkeeping); then each table is copied in key order, in
//! pages of multi-row inserts, in one transaction per table, entity tables references first;
//! identity sequences are moved past the copied ids and the row counts are taken afresh.
//! Stored files (the data directory's `media/` and the working copies of uploads) are copied
//! by [`copy_files`] into an object store when one is named (`--storage-url`).

use crate::schema::{Catalog, ColType};
use crate::storage::copy::{self, Table};
use crate::storage::{self, Dialect, PoolExec, Storage, StorageError, Tx};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::io::IsTerminal;

/// Why a copy did not happen or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("cannot open {url}: {message}")]
    Open { url: String, message: String },
    #[error("the source database {0} does not exist")]
    NoSource(String),
    #[error(
        "the source database's tables are at version {have} and this entiserve's are at \
         {want}: start a server of this version on it once (which brings them up to date), \
         then copy"
    )]
    SourceVersion { have: i64, want: i64 },
    #[error(
        "the entity definitions are not those the source database was last brought to \
         (differing: {0}): name the entities directory its server runs on with --entities, \
         or start its server on these definitions first"
    )]
    Definitions(String),
    #[error(
        "the target database is not empty: table `{0}` holds rows. migrate-data copies only \
         into an empty database; nothing was written"
    )]
    NotEmpty(String),
    #[error("cannot prepare the target's tables: {0}")]
    Prepare(String),
    #[error("table `{table}` has no column `{column}` in the {side}")]
    MissingColumn {
        table: String,
        column: String,
        side: &'static str,
    },
    #[error(
        "copying `{table}` failed: {source}. The tables copied before it stay in the target: \
         drop the target database and create it again before the next run"
    )]
    Copy {
        table: String,
        #[source]
        source: StorageError,
    },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// What was copied of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub table: String,
    pub rows: u64,
    /// Columns of the source's table that no definition names any more (left behind by a
    /// removed field): not copied.
    pub left_out: Vec<String>,
}

impl std::fmt::Display for Copied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} row{} copied",
            self.table,
            self.rows,
            if self.rows == 1 { "" } else { "s" }
        )?;
        if !self.left_out.is_empty() {
            write!(
                f,
                " (not copied: column{} {}, which no field defines)",
                if self.left_out.len() == 1 { "" } else { "s" },
                self.left_out.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Copies every row of the database at `from` into the empty database at `to`, whose tables
/// are made for `catalog` (which must be the definitions the source was last brought to).
/// Prints one line per table as it is done, with a progress bar meanwhile when stderr is a
/// terminal.
pub async fn run(from: &str, to: &str, catalog: &Catalog) -> Result<Vec<Copied>, MigrateError> {
    if let Some(path) = storage::sqlite_path(from)
        && !path.is_file()
    {
        return Err(MigrateError::NoSource(path.display().to_string()));
    }
    let open = |url: &str| {
        let url = url.to_string();
        async move {
            storage::open(&url).await.map_err(|e| MigrateError::Open {
                url: storage::redact(&url),
                message: format!("{e:#}"),
            })
        }
    };
    let source = open(from).await?;
    let target = open(to).await?;
    let mut snap = source.begin_snapshot().await?;
    let result = copy_all(snap.as_mut(), source.dialect(), target.as_ref(), catalog).await;
    let _ = snap.rollback().await;
    target.close().await;
    result
}

async fn copy_all(
    snap: &mut dyn Tx,
    ds: Dialect,
    target: &dyn Storage,
    catalog: &Catalog,
) -> Result<Vec<Copied>, MigrateError> {
    let want = copy::latest_schema_version();
    let have = copy::schema_version(snap, ds).await?;
    if have != want {
        return Err(MigrateError::SourceVersion { have, want });
    }
    check_definitions(snap, catalog).await?;
    let tables = copy::tables(catalog);
    let dt = target.dialect();
    for t in &tables {
        let mut ex = PoolExec(target);
        if !copy::columns(&mut ex, dt, &t.name).await?.is_empty()
            && copy::has_rows(&mut ex, dt, &t.name).await?
        {
            return Err(MigrateError::NotEmpty(t.name.clone()));
        }
    }
    copy::prepare(target, catalog)
        .await
        .map_err(|e| MigrateError::Prepare(format!("{e:#}")))?;
    let draw = std::io::stderr().is_terminal();
    let mut out = Vec::new();
    for t in &tables {
        let copied = copy_table(snap, ds, target, t, draw).await?;
        println!("{copied}");
        out.push(copied);
    }
    let mut tx = target.begin().await?;
    for name in catalog.entities.keys() {
        copy::recount(tx.as_mut(), dt, name).await?;
    }
    tx.commit().await?;
    Ok(out)
}

/// Refuses definitions other than those the source was last brought to: the target's tables
/// are made from them, and a server on the copy is started with them.
async fn check_definitions(snap: &mut dyn Tx, catalog: &Catalog) -> Result<(), MigrateError> {
    let recorded: BTreeMap<String, String> = storage::definitions::load(snap)
        .await?
        .into_iter()
        .map(|r| (r.name, r.digest))
        .collect();
    let given: BTreeMap<String, String> = catalog
        .entities
        .values()
        .map(|e| (e.name.clone(), crate::evolve::entity_digest(e)))
        .collect();
    let mut differing: Vec<String> = given
        .iter()
        .filter(|(n, d)| recorded.get(*n) != Some(*d))
        .map(|(n, _)| format!("`{n}`"))
        .collect();
    differing.extend(
        recorded
            .keys()
            .filter(|n| !given.contains_key(*n))
            .map(|n| format!("`{n}`")),
    );
    if differing.is_empty() {
        Ok(())
    } else {
        Err(MigrateError::Definitions(differing.join(", ")))
    }
}

/// Copies one table in one transaction of the target.
async fn copy_table(
    snap: &mut dyn Tx,
    ds: Dialect,
    target: &dyn Storage,
    t: &Table,
    draw: bool,
) -> Result<Copied, MigrateError> {
    let dt = target.dialect();
    let src = copy::columns(snap, ds, &t.name).await?;
    let dst = copy::columns(&mut PoolExec(target), dt, &t.name).await?;
    let src_types: BTreeMap<&str, ColType> = src.iter().map(|(c, ty)| (c.as_str(), *ty)).collect();
    // Columns both have, with the type they are read and written as: a boolean on either side
    // is a boolean (SQLite declares them INTEGER), a decimal on either side a decimal (SQLite
    // keeps them as text), else the target's type.
    let columns: Vec<(String, ColType)> = dst
        .iter()
        .filter_map(|(c, ty)| {
            let from = src_types.get(c.as_str())?;
            let ty = if *ty == ColType::Bool || *from == ColType::Bool {
                ColType::Bool
            } else if *ty == ColType::Decimal || *from == ColType::Decimal {
                ColType::Decimal
            } else {
                *ty
            };
            Some((c.clone(), ty))
        })
        .collect();
    for k in &t.key {
        for (side, cols) in [("source", &src), ("target", &dst)] {
            if !cols.iter().any(|(c, _)| c == k) {
                return Err(MigrateError::MissingColumn {
                    table: t.name.clone(),
                    column: k.to_string(),
                    side,
                });
            }
        }
    }
    let left_out = src
        .iter()
        .filter(|(c, _)| !dst.iter().any(|(d, _)| d == c))
        .map(|(c, _)| c.clone())
        .collect();
    let total = copy::count(snap, ds, &t.name).await?;
    let bar = progress(&t.name, total.max(0) as u64, draw);
    let failed = |source: StorageError| MigrateError::Copy {
        table: t.name.clone(),
        source,
    };
    let mut tx = target.begin().await.map_err(failed)?;
    let rows = fill(snap, ds, tx.as_mut(), dt, t, &columns, &bar)
        .await
        .map_err(failed)?;
    tx.commit().await.map_err(failed)?;
    bar.finish_and_clear();
    Ok(Copied {
        table: t.name.clone(),
        rows,
        left_out,
    })
}

/// Reads the rows of `t` page by page and inserts each page, then moves the identity sequence
/// past the source's.
async fn fill(
    snap: &mut dyn Tx,
    ds: Dialect,
    tx: &mut dyn Tx,
    dt: Dialect,
    t: &Table,
    columns: &[(String, ColType)],
    bar: &ProgressBar,
) -> Result<u64, StorageError> {
    let refs = if t.self_referencing || dt == Dialect::Sqlite {
        copy::defer_references(tx, dt, &t.name).await?
    } else {
        Vec::new()
    };
    let mut pages = copy::Pages::new(ds, t, columns, copy::rows_per_insert(columns.len()));
    let mut rows = 0;
    loop {
        let page = pages.next(snap).await?;
        if page.is_empty() {
            break;
        }
        let n = page.len() as u64;
        copy::insert(tx, dt, &t.name, columns, page).await?;
        rows += n;
        bar.inc(n);
    }
    copy::restore_references(tx, dt, &t.name, &refs).await?;
    if let Some(col) = t.serial {
        let high = copy::high_water(snap, ds, &t.name, col).await?;
        copy::advance(tx, dt, &t.name, col, high).await?;
    }
    Ok(rows)
}

fn progress(table: &str, total: u64, draw: bool) -> ProgressBar {
    let target = if draw {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>20} [{bar:30}] {human_pos}/{human_len}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(table.to_string());
    bar
}

/// Copies every file a server keeps in `data_dir` (bundle files, result files, working copies of
/// uploads) into `store` under the same keys, so that servers on the copied database and that
/// store find them; returns how many files and bytes went.
pub async fn copy_files(
    data_dir: &std::path::Path,
    store: &crate::files::Files,
) -> anyhow::Result<(usize, u64)> {
    let mut found = Vec::new();
    for folder in crate::files::KEPT {
        let dir = data_dir.join(folder);
        for rel in crate::files::walk(&dir, &[]) {
            let key = format!("{folder}/{}", crate::files::slashed(&rel));
            found.push((key, dir.join(rel)));
        }
    }
    let bar = progress("files", found.len() as u64, std::io::stderr().is_terminal());
    let (mut files, mut bytes) = (0usize, 0u64);
    for (key, path) in found {
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        store
            .put_copy(&key, &path)
            .await
            .map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
        files += 1;
        bytes += len;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok((files, bytes))
}
