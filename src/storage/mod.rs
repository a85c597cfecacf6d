//! Storage: one [`Storage`] trait with a SQLite and a PostgreSQL implementation chosen from the
//! database URL, the fixed tables' migrations, entity SQL built from the catalog only, the
//! additive DDL plan, and stored files. It executes; it does not decide (that is the engine's).

pub mod auth;
pub mod blocks;
pub mod changes;
mod checkpoint;
pub mod contention;
pub mod copy;
pub mod counts;
pub mod ddl;
pub mod definitions;
pub mod entity;
pub mod evolve;
pub mod idempotency;
pub mod inserts;
mod lanes;
pub mod live;
pub mod lock;
mod migrate;
mod near;
mod pg_conns;
mod pg_live;
mod pg_nodelay;
mod pg_stream;
mod pg_triggers;
pub mod points;
mod postgres;
pub mod request_log;
pub mod requests;
pub mod rules;
pub mod snapshot;
mod sql;
mod sqlite;

pub use sql::Dialect;

use crate::schema::ColType;
use async_trait::async_trait;
use std::sync::Arc;

/// A stored value, typed even when null (PostgreSQL needs the type of a bound null).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(Option<i64>),
    Float(Option<f64>),
    /// An exact decimal ([`crate::decimal`]), kept normalized.
    Decimal(Option<crate::decimal::Decimal>),
    Bool(Option<bool>),
    Text(Option<String>),
}

impl Value {
    pub fn null(t: ColType) -> Value {
        match t {
            ColType::Int => Value::Int(None),
            ColType::Float => Value::Float(None),
            ColType::Decimal => Value::Decimal(None),
            ColType::Bool => Value::Bool(None),
            ColType::Text => Value::Text(None),
        }
    }

    pub fn text(s: impl Into<String>) -> Value {
        Value::Text(Some(s.into()))
    }

    pub fn int(i: i64) -> Value {
        Value::Int(Some(i))
    }

    /// Whether the value is a (typed) null.
    pub fn is_null(&self) -> bool {
        matches!(
            self,
            Value::Int(None)
                | Value::Float(None)
                | Value::Decimal(None)
                | Value::Bool(None)
                | Value::Text(None)
        )
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => *v,
            Value::Float(f) => f.map(|f| f as i64),
            Value::Decimal(d) => d.and_then(|d| {
                use rust_decimal::prelude::ToPrimitive;
                d.to_i64()
            }),
            Value::Bool(b) => b.map(i64::from),
            Value::Text(t) => t.as_deref().and_then(|t| t.parse().ok()),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(t) => t.as_deref(),
            _ => None,
        }
    }

    pub fn into_string(self) -> Option<String> {
        match self {
            Value::Text(t) => t,
            Value::Int(i) => i.map(|i| i.to_string()),
            Value::Float(f) => f.map(|f| f.to_string()),
            Value::Decimal(d) => d.map(|d| d.to_string()),
            Value::Bool(b) => b.map(|b| b.to_string()),
        }
    }

    /// The value of a JSON scalar stored in a column of type `t`. The engine has validated the
    /// JSON against the field, so a mismatch only yields null.
    pub fn from_json(t: ColType, j: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match (t, j) {
            (ColType::Int, J::Number(n)) => Value::Int(n.as_i64()),
            (ColType::Float, J::Number(n)) => Value::Float(n.as_f64()),
            (ColType::Decimal, J::Number(n)) => {
                Value::Decimal(crate::decimal::from_json_number(n).ok())
            }
            (ColType::Decimal, J::String(s)) => Value::Decimal(crate::decimal::parse(s).ok()),
            (ColType::Bool, J::Bool(b)) => Value::Bool(Some(*b)),
            (ColType::Text, J::String(s)) => Value::Text(Some(s.clone())),
            (ColType::Text, J::Number(n)) => Value::Text(Some(n.to_string())),
            (t, _) => Value::null(t),
        }
    }

    /// [`Value::from_json`] without copying strings.
    pub fn from_json_owned(t: ColType, j: serde_json::Value) -> Value {
        match (t, j) {
            (ColType::Text, serde_json::Value::String(s)) => Value::Text(Some(s)),
            (t, j) => Value::from_json(t, &j),
        }
    }

    /// JSON form of a stored value.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Int(Some(i)) => J::from(*i),
            Value::Float(Some(f)) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::Decimal(Some(d)) => J::Number(crate::decimal::to_json_number(d)),
            Value::Bool(Some(b)) => J::Bool(*b),
            Value::Text(Some(s)) => J::String(s.clone()),
            _ => J::Null,
        }
    }
}

/// One row, its values in the order of the statement's columns.
pub type Row = Vec<Value>;

/// A row read by its id on the point-read lane ([`Storage::fetch_point`]), shared by the reads
/// that find it remembered (on SQLite, each thread's snapshot keeps the rows it read), with the
/// object's JSON once it has been written for the row.
pub struct PointRow {
    pub row: Row,
    /// The object's JSON, and the version of the entity it was written for.
    json: std::sync::OnceLock<(Arc<crate::schema::Entity>, bytes::Bytes)>,
}

impl PointRow {
    pub fn new(row: Row) -> PointRow {
        PointRow {
            row,
            json: std::sync::OnceLock::new(),
        }
    }

    /// The object's JSON for `e`: the one written for this row before, when it was written for
    /// the same version of the entity, else what `write` makes of it (kept when it is the
    /// first).
    pub fn json<E>(
        &self,
        e: &Arc<crate::schema::Entity>,
        write: impl FnOnce() -> std::result::Result<Vec<u8>, E>,
    ) -> std::result::Result<bytes::Bytes, E> {
        if let Some((written_for, json)) = self.json.get()
            && Arc::ptr_eq(written_for, e)
        {
            return Ok(json.clone());
        }
        let json = bytes::Bytes::from(write()?);
        let _ = self.json.set((e.clone(), json.clone()));
        Ok(json)
    }
}

/// What can go wrong in storage. Database details are logged, never shown to clients.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("unique constraint violated on {column:?}")]
    Unique { column: Option<String> },
    #[error("foreign key constraint violated")]
    ForeignKey,
    #[error("not-null constraint violated on {column:?}")]
    NotNull { column: Option<String> },
    /// Another writer was in the way (deadlock, serialization failure, busy database): the
    /// transaction is lost, and running it again is expected to succeed.
    #[error("contention ({class}): {message}")]
    Contention {
        class: contention::Class,
        message: String,
    },
    #[error("database error: {0}")]
    Database(String),
    /// The disk or the store is full: nothing of the failed statement was applied.
    #[error("out of space: {0}")]
    Full(String),
}

/// Whether an I/O error means the disk (or the user's quota on it) is full.
pub fn is_out_of_space(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl StorageError {
    /// An I/O failure of `what`: [`StorageError::Full`] when the disk is full.
    pub fn io(what: &str, e: &std::io::Error) -> StorageError {
        if is_out_of_space(e) {
            StorageError::Full(format!("{what}: {e}"))
        } else {
            StorageError::Database(format!("{what}: {e}"))
        }
    }
}

impl StorageError {
    /// The contention class, when this failure means "try again".
    pub fn contention(&self) -> Option<contention::Class> {
        match self {
            StorageError::Contention { class, .. } => Some(*class),
            _ => None,
        }
    }
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// A parameter of a query run by [`Exec::fetch_columns`].
#[derive(Debug, Clone)]
pub enum Column<'a> {
    /// Every row's value of one column (all of one kind), bound as an array.
    Each(Vec<&'a Value>),
    /// The one value every row has in a column, bound once.
    Same(&'a Value),
}

/// How a query run by [`Exec::fetch_columns`] returns its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returned {
    /// A row per row.
    Rows,
    /// Gathered into one row of arrays, one array per column of the types
    /// (`SELECT array_agg(a), array_agg(b) FROM ...`), none of them [`ColType::Decimal`]: a few
    /// values to decode instead of a row each.
    Gathered,
}

/// Runs statements: a pool (each statement on its own) or an open transaction.
#[async_trait]
pub trait Exec: Send {
    /// Runs a statement and returns the number of affected rows.
    async fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64>;
    /// Runs a query and decodes every row's columns with `types`.
    async fn fetch(&mut self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>>;
    /// Whether [`Exec::fetch_columns`] can run here (a PostgreSQL transaction).
    fn binds_arrays(&self) -> bool {
        false
    }
    /// Runs a query whose parameter `i` is `columns[i]`: an array of every row's value of a
    /// column, or the one value they share, and decodes the rows it returns, as `returned`
    /// says, with `types`. Only where [`Exec::binds_arrays`].
    async fn fetch_columns(
        &mut self,
        _sql: &str,
        _columns: &[Column<'_>],
        _types: &[ColType],
        _returned: Returned,
    ) -> Result<Vec<Row>> {
        Err(StorageError::Database(
            "array parameters are bound only in a PostgreSQL transaction".into(),
        ))
    }
    /// Whether a group of `rows` creates is copied here ([`Exec::copy_created`]): in a
    /// PostgreSQL write transaction, a group large enough that its copy costs less than an
    /// insert on its own, or any group of [`Exec::copy_groups`]' transaction.
    fn copies(&self, _rows: usize) -> bool {
        false
    }
    /// Copies every group of creates that [`Exec::copy_created`] can take from here on: the
    /// transaction runs group after group (an upload's chunks), which share one copy.
    fn copy_groups(&mut self) {}
    /// Adds rows of `columns` (quoted; `args` holds `width` values a row) to `table` (quoted),
    /// each with a new id from the table's sequence, by the transaction's copy ([`pg_stream`]),
    /// and returns their ids in order. The rows are stored before the transaction's next
    /// statement or its commit, which fail if they could not be. Only where [`Exec::copies`].
    async fn copy_created(
        &mut self,
        _table: &str,
        _columns: &[String],
        _args: &[&Value],
        _width: usize,
    ) -> Result<Vec<i64>> {
        Err(StorageError::Database(
            "rows are copied only in a PostgreSQL transaction".into(),
        ))
    }
    /// Whether [`Exec::insert_numbered`] can run here (SQLite).
    fn numbers_inserts(&self) -> bool {
        false
    }
    /// Runs a multi-row `INSERT` without `RETURNING`, its values borrowed, and returns the ids
    /// of its rows in insertion order without reading them back: on SQLite the rows of one
    /// statement take consecutive ids, the last of them `last_insert_rowid()`. Only where
    /// [`Exec::numbers_inserts`].
    async fn insert_numbered(&mut self, _sql: &str, _args: &[&Value]) -> Result<Vec<i64>> {
        Err(StorageError::Database(
            "inserts are numbered only in a SQLite transaction".into(),
        ))
    }
    /// Records that the statement just run added `delta` rows to (or, negative, removed them
    /// from) the table of `entity`, for its kept row count (see [`counts`]). PostgreSQL's
    /// triggers count by themselves; on SQLite a transaction adds the deltas up and writes them
    /// before it commits, and anything else writes them at once.
    async fn count_rows(&mut self, d: Dialect, entity: &str, delta: i64) -> Result<()> {
        if d == Dialect::Sqlite && delta != 0 {
            self.execute(
                counts::adjust_sql(),
                &[Value::int(delta), Value::text(entity)],
            )
            .await?;
        }
        Ok(())
    }
    /// Logs a change the statement just run made, for live changes (SQLite; see [`live`]): a
    /// transaction keeps it and writes it, numbered, before its next savepoint statement or
    /// its commit; anything else writes it at once.
    async fn log_live(&mut self, change: live::Logged) -> Result<()> {
        live::append(self, &[change], crate::time::unix_now()).await
    }
}

/// An open write transaction.
#[async_trait]
pub trait Tx: Exec {
    async fn commit(self: Box<Self>) -> Result<()>;
    async fn rollback(self: Box<Self>) -> Result<()>;
}

/// A database backend.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    fn dialect(&self) -> Dialect;
    /// Starts a write transaction.
    async fn begin(&self) -> Result<Box<dyn Tx>>;
    /// Starts a read-only transaction whose reads all see the database as it was at its first
    /// one, while other connections go on writing (SQLite: a read transaction, which in WAL mode
    /// never blocks a writer; PostgreSQL: `REPEATABLE READ`). It ends with commit or rollback.
    async fn begin_snapshot(&self) -> Result<Box<dyn Tx>>;
    /// Runs a short read-only query (a point read: by id, a sign-in, a job record) on the
    /// point-read lane, which list queries never occupy.
    async fn fetch(&self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>>;
    /// The row `id` read by `sql` (its one parameter is the id) and decoded with `types`, as
    /// [`Storage::fetch`] reads it; SQLite answers it from the thread's snapshot when the
    /// snapshot read it already.
    async fn fetch_point(
        &self,
        sql: &str,
        types: &[ColType],
        id: i64,
    ) -> Result<Option<Arc<PointRow>>> {
        let rows = self.fetch(sql, &[Value::int(id)], types).await?;
        Ok(rows.into_iter().next().map(|r| Arc::new(PointRow::new(r))))
    }
    /// Runs a read-only query that may visit many rows (a list page, a count) on the list lane.
    async fn fetch_list(&self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>>;
    /// Runs one write statement in its own transaction.
    async fn execute(&self, sql: &str, args: &[Value]) -> Result<u64>;
    /// Runs one statement that returns rows on the write connection (SQLite) or pool
    /// (PostgreSQL), in its own transaction: a write with `RETURNING`, or a read that is part
    /// of a writer's own work (the next items of a background batch), which then takes no trip
    /// to a reader thread.
    async fn fetch_write(&self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>>;
    /// Names of the columns of `table`, empty when the table does not exist.
    async fn table_columns(&self, table: &str) -> Result<Vec<String>>;
    /// Runs several statements (DDL) in one transaction.
    async fn batch_ddl(&self, statements: &[String]) -> Result<()>;
    /// Tells the storage that a transaction changed the tables (readers that cache statements
    /// prepare them again).
    fn schema_changed(&self) {}
    /// A receiver that sees a change whenever newly numbered live changes may be readable
    /// ([`live`]): after a commit that logged changes (SQLite), after a sequencer pass of any
    /// server (PostgreSQL).
    fn live_signal(&self) -> tokio::sync::watch::Receiver<u64>;
    /// Closes every connection.
    async fn close(&self);
}

/// Opens the backend a URL names (`sqlite:` or `postgres:`) and brings its fixed tables up to
/// date.
pub async fn connect(url: &str) -> anyhow::Result<Arc<dyn Storage>> {
    let storage = open(url).await?;
    migrate::run(storage.as_ref()).await?;
    Ok(storage)
}

/// The file a `sqlite:` URL names (`sqlite://PATH` or `sqlite:PATH`, without `?options`);
/// `None` for any other URL.
pub fn sqlite_path(url: &str) -> Option<std::path::PathBuf> {
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    Some(std::path::PathBuf::from(
        path.split('?').next().unwrap_or(path),
    ))
}

/// Opens the backend a URL names, changing nothing.
pub async fn open(url: &str) -> anyhow::Result<Arc<dyn Storage>> {
    let storage: Arc<dyn Storage> =
        if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Arc::new(postgres::PgStorage::connect(url).await?)
        } else if url.starts_with("sqlite:") {
            Arc::new(sqlite::SqliteStorage::connect(url).await?)
        } else {
            anyhow::bail!(
                "unsupported database URL (expected sqlite: or postgres:): {}",
                redact(url)
            );
        };
    Ok(storage)
}

/// Whether the database answers a query.
pub async fn ping(s: &dyn Storage) -> Result<()> {
    s.fetch(
        "SELECT CAST(1 AS BIGINT)",
        &[],
        &[crate::schema::ColType::Int],
    )
    .await
    .map(|_| ())
}

/// A URL with its password removed, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{}@{}", &url[..s + 3], user, &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// Runs statements on a storage's pools, one at a time (reads on the point-read lane).
pub struct PoolExec<'a>(pub &'a dyn Storage);

/// Runs each statement on its own on the write connection, committed as it ends (no
/// `BEGIN`/`COMMIT` round trips): for a call that is one statement.
pub struct AutoCommit<'a>(pub &'a dyn Storage);

#[async_trait]
impl Exec for AutoCommit<'_> {
    async fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64> {
        self.0.execute(sql, args).await
    }
    async fn fetch(&mut self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        self.0.fetch_write(sql, args, types).await
    }
}

/// Runs statements on a storage's pools, one at a time (reads on the list lane).
pub struct ListExec<'a>(pub &'a dyn Storage);

#[async_trait]
impl Exec for ListExec<'_> {
    async fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64> {
        self.0.execute(sql, args).await
    }
    async fn fetch(&mut self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        self.0.fetch_list(sql, args, types).await
    }
}

#[async_trait]
impl Exec for PoolExec<'_> {
    async fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64> {
        self.0.execute(sql, args).await
    }
    async fn fetch(&mut self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        self.0.fetch(sql, args, types).await
    }
}
