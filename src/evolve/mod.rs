//! Changing entities safely. Every start, reload and `entiserve plan` compares the definitions
//! with what the database holds: its tables and columns, and the record of the definitions
//! last applied (kept in the database, [`crate::storage::definitions`]). The result is a list
//! of steps (create, add, rename, convert, check) and of refusals: a change that would hide or
//! lose stored data, or that some stored rows do not fit, named with the rows in the way. A
//! change applies only when nothing is refused, in one transaction with its checks, and is
//! recorded with the definitions it brought the tables to.

mod convert;
pub mod fleet;
mod inspect;
mod record;
pub mod report;

pub use record::{RecordedEntity, RecordedField};

use crate::schema::{Catalog, Entity};
use crate::storage::definitions::{self, ChangeRow, DefinitionRow};
use crate::storage::evolve as sql;
use crate::storage::{Dialect, PoolExec, Storage, StorageError, Tx, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

/// Rows named in a refusal.
const FIRST_ROWS: i64 = 3;

/// One step a change takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Create {
        entity: String,
    },
    RenameTable {
        from: String,
        to: String,
    },
    Add {
        entity: String,
        field: String,
    },
    RenameColumn {
        entity: String,
        from: String,
        to: String,
    },
    Convert {
        entity: String,
        field: String,
        from: String,
        to: String,
        rows: usize,
    },
    Check {
        entity: String,
        field: String,
        what: String,
        rows: i64,
    },
    GiveUp {
        entity: String,
        field: String,
        rows: i64,
    },
    /// A key added or changed, checked against the stored rows.
    Key {
        entity: String,
        key: String,
        rows: i64,
    },
    /// A field gains (`index: true`) or loses its index.
    Index {
        entity: String,
        field: String,
        create: bool,
    },
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Create { entity } => write!(f, "create table `{entity}`"),
            Step::RenameTable { from, to } => {
                write!(f, "rename table `{from}` to `{to}`, keeping its rows")
            }
            Step::Add { entity, field } => write!(f, "add column `{entity}.{field}`"),
            Step::RenameColumn { entity, from, to } => write!(
                f,
                "rename column `{entity}.{from}` to `{entity}.{to}`, keeping its values"
            ),
            Step::Convert {
                entity,
                field,
                from,
                to,
                rows,
            } => write!(
                f,
                "convert `{entity}.{field}` from {from} to {to}: {rows} stored value{} fit and {} converted",
                plural(*rows as i64),
                if *rows == 1 { "is" } else { "are" }
            ),
            Step::Check {
                entity,
                field,
                what,
                rows,
            } => {
                write!(f, "{what} on `{entity}.{field}`: all {rows} rows fit")
            }
            Step::Index {
                entity,
                field,
                create: true,
            } => write!(f, "create an index on `{entity}.{field}`"),
            Step::Index { entity, field, .. } => {
                write!(f, "drop the index on `{entity}.{field}`")
            }
            Step::GiveUp {
                entity,
                field,
                rows,
            } => write!(
                f,
                "stop serving `{entity}.{field}` (allow_destructive): {rows} stored value{} given up",
                plural(*rows)
            ),
            Step::Key { entity, key, rows } => write!(
                f,
                "key {key} on `{entity}`: no two of the {rows} row{} share it",
                plural(*rows)
            ),
        }
    }
}

fn plural(n: i64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A change that is refused, as `file:line: message`.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

/// What comparing the definitions with the database found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub steps: Vec<Step>,
    pub refusals: Vec<Refusal>,
}

/// A failure to read or change the database (not a refusal).
#[derive(Debug, thiserror::Error)]
#[error("cannot compare or change the tables: {0}")]
pub struct EvolveError(#[from] StorageError);

/// What to do with the steps.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Apply them (when nothing is refused) and record the definitions.
    Apply,
    /// Only say what they would be; change nothing.
    Plan,
}

/// One action of the apply phase.
pub(super) enum Action {
    Sql(String),
    Values {
        table: String,
        column: String,
        values: Vec<(i64, Value)>,
    },
}

/// Compares `catalog` with the database and, in [`Mode::Apply`], brings the tables to it.
/// `server` names this server in the history.
pub async fn run(
    storage: &dyn Storage,
    catalog: &Catalog,
    mode: Mode,
    server: &str,
) -> Result<Outcome, EvolveError> {
    let d = storage.dialect();
    // On PostgreSQL the lock is taken before anything is read: servers started together on one
    // database would otherwise each read the same tables and each plan the same changes, and
    // all but the first would fail applying them ("column ... already exists"). With the lock
    // held, the reads below (on other connections) see what the server before this one
    // committed. On SQLite the transaction holds the only writer connection, which the reads
    // need, so they come before it (and one SQLite file has one server).
    let mut locked = None;
    if d == Dialect::Postgres {
        let mut tx = storage.begin().await?;
        sql::lock_changes(tx.as_mut(), d).await?;
        locked = Some(tx);
    }
    let (columns, recorded) = read_tables(storage, catalog, mode).await?;
    let mut tx = match locked {
        Some(tx) => tx,
        None => {
            let mut tx = storage.begin().await?;
            sql::lock_changes(tx.as_mut(), d).await?;
            tx
        }
    };
    let mut out = Outcome::default();
    let mut actions: Vec<Action> = crate::storage::counts::setup(d)
        .into_iter()
        .map(Action::Sql)
        .collect();
    let mut inspect = inspect::Inspect {
        d,
        ex: tx.as_mut(),
        columns: &columns,
        recorded: &recorded,
        out: &mut out,
        actions: &mut actions,
    };
    let result = inspect.all(catalog).await;
    if let Err(e) = result {
        let _ = tx.rollback().await;
        return Err(e.into());
    }
    if mode == Mode::Plan || !out.refusals.is_empty() {
        tx.rollback().await?;
        return Ok(out);
    }
    let applied = apply(tx.as_mut(), d, actions, catalog, &recorded, &out, server).await;
    match applied {
        Ok(()) => tx.commit().await?,
        Err(e) => {
            let _ = tx.rollback().await;
            return Err(e.into());
        }
    }
    storage.schema_changed();
    Ok(out)
}

/// The columns of every table the catalog, its renames and the record name, and the record
/// (none yet, for `plan`, on a database never started by this version).
async fn read_tables(
    storage: &dyn Storage,
    catalog: &Catalog,
    mode: Mode,
) -> Result<
    (
        BTreeMap<String, Vec<String>>,
        BTreeMap<String, RecordedEntity>,
    ),
    EvolveError,
> {
    let mut columns: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut wanted: BTreeSet<String> = catalog.entities.keys().cloned().collect();
    wanted.extend(
        catalog
            .entities
            .values()
            .filter_map(|e| e.renamed_from.clone()),
    );
    // A database never started by this version has no record yet (`plan` does not create it).
    let recorded = match record::load(&mut PoolExec(storage)).await {
        Ok(r) => r,
        Err(_) if mode == Mode::Plan => BTreeMap::new(),
        Err(e) => return Err(e.into()),
    };
    wanted.extend(recorded.keys().cloned());
    for t in &wanted {
        columns.insert(t.clone(), storage.table_columns(t).await?);
    }
    Ok((columns, recorded))
}

/// The apply phase inside `tx`: the planned actions, then the definitions recorded and the
/// change logged when they differ from `recorded` or a step was taken.
async fn apply(
    tx: &mut dyn Tx,
    d: Dialect,
    actions: Vec<Action>,
    catalog: &Catalog,
    recorded: &BTreeMap<String, RecordedEntity>,
    out: &Outcome,
    server: &str,
) -> Result<(), StorageError> {
    for a in actions {
        match a {
            Action::Sql(s) => {
                tx.execute(&s, &[]).await?;
            }
            Action::Values {
                table,
                column,
                values,
            } => sql::set_values(tx, d, &table, &column, &values).await?,
        }
    }
    let rows = record::rows(catalog);
    let digest = record::digest(&rows);
    let before = record::digest(&record::rows_of(recorded));
    if digest != before || !out.steps.is_empty() {
        let now = crate::time::now();
        definitions::replace(tx, d, &rows, &now).await?;
        let steps: Vec<String> = out.steps.iter().map(|s| s.to_string()).collect();
        definitions::log_change(
            tx,
            d,
            &ChangeRow {
                applied_dt: now,
                server: server.to_string(),
                digest,
                steps: serde_json::to_string(&steps).unwrap_or_default(),
            },
        )
        .await?;
    }
    Ok(())
}

/// The entities' record as last applied, by name.
pub async fn recorded(
    storage: &dyn Storage,
) -> Result<BTreeMap<String, RecordedEntity>, EvolveError> {
    Ok(record::load(&mut PoolExec(storage)).await?)
}

/// The last change applied to the tables, as recorded.
pub async fn last_change(storage: &dyn Storage) -> Result<Option<ChangeRow>, EvolveError> {
    Ok(definitions::last_change(&mut PoolExec(storage)).await?)
}

/// The digest of one entity's definition, as the record keeps it.
pub fn entity_digest(e: &Entity) -> String {
    record::entity_row(e).digest
}

/// The record's rows of `recorded`, for comparing digests.
pub fn digests(recorded: &BTreeMap<String, RecordedEntity>) -> BTreeMap<String, String> {
    record::rows_of(recorded)
        .into_iter()
        .map(|r: DefinitionRow| (r.name, r.digest))
        .collect()
}
