//! The PostgreSQL backend, for deployments that outgrow one machine. Four sets of connections,
//! so that no kind of work waits for connections another kind holds: transactions, writes that
//! are one statement, point reads (by id, sign-ins, job records) and list reads (pages and
//! counts). One-statement writes and point reads take no round trip besides their statement
//! ([`super::pg_conns`]).

use super::pg_conns::{Conns, IDLE_CHECK};
use super::pg_stream::{self, Stream};
use super::{Column, Exec, Result, Returned, Row, Storage, StorageError, Tx, Value, sql::Dialect};
use crate::schema::ColType;
use async_trait::async_trait;
use sqlx::postgres::{PgArguments, PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{AssertSqlSafe, Postgres, Row as _, Transaction};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub struct PgStorage {
    pool: PgPool,
    singles: Arc<Conns>,
    /// Ids taken ahead for copies ([`pg_stream::Ahead`]).
    ids: Arc<pg_stream::Ahead>,
    points: Conns,
    lists: PgPool,
    /// Folds pending row-count deltas; stopped when the storage is dropped.
    compactor: tokio::task::JoinHandle<()>,
    /// Numbers live changes and hears of them ([`super::pg_live`]).
    live: [tokio::task::JoinHandle<()>; 3],
    live_signal: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
    /// Told after each write of this server, for its sequencer.
    live_wake: std::sync::Arc<tokio::sync::Notify>,
}

/// Connections of the transaction pool, of one-statement writes, of point reads and of lists.
const WRITERS: u32 = 16;
const SINGLE_WRITERS: usize = 16;
const POINT_READERS: usize = 8;
const LIST_READERS: u32 = 4;

impl PgStorage {
    pub async fn connect(url: &str) -> anyhow::Result<PgStorage> {
        let opts = PgConnectOptions::from_str(url)?;
        let port = opts.get_port();
        let pool_of = |max: u32, min: u32| {
            PgPoolOptions::new()
                .after_connect(move |_, _| {
                    Box::pin(async move {
                        super::pg_nodelay::to_port(port);
                        Ok(())
                    })
                })
                .max_connections(max)
                .min_connections(min)
                .acquire_timeout(Duration::from_secs(60))
                // sqlx's default pings every connection it hands out: a round trip as long as
                // the statement itself. Only a connection that sat idle a while is checked.
                .test_before_acquire(false)
                .before_acquire(|conn, meta| {
                    Box::pin(async move {
                        if meta.idle_for > IDLE_CHECK {
                            sqlx::Connection::ping(conn).await?;
                        }
                        Ok(true)
                    })
                })
        };
        // One connection first: a refused port or an unknown host fails here at once, with its
        // reason, where the pool would retry until its timeout and then say only that.
        let first = <sqlx::PgConnection as sqlx::Connection>::connect_with(&opts)
            .await
            .map_err(connect_error)?;
        let _ = sqlx::Connection::close(first).await;
        let pool = pool_of(WRITERS, 1)
            .connect_with(opts.clone())
            .await
            .map_err(connect_error)?;
        let singles = Arc::new(Conns::new(opts.clone(), SINGLE_WRITERS));
        let points = Conns::new(opts.clone(), POINT_READERS);
        let lists = pool_of(LIST_READERS, 0).connect_lazy_with(opts);
        let compactor = tokio::spawn(compact_counts(pool.clone()));
        let live_signal = std::sync::Arc::new(tokio::sync::watch::Sender::new(0));
        let live_wake = std::sync::Arc::new(tokio::sync::Notify::new());
        let live = super::pg_live::start(pool.clone(), live_signal.clone(), live_wake.clone());
        Ok(PgStorage {
            pool,
            ids: Arc::new(pg_stream::Ahead::new(singles.clone())),
            singles,
            points,
            lists,
            compactor,
            live,
            live_signal,
            live_wake,
        })
    }
}

impl Drop for PgStorage {
    fn drop(&mut self) {
        self.compactor.abort();
        self.live.iter().for_each(tokio::task::JoinHandle::abort);
    }
}

/// Every second, folds the row-count deltas that writes appended into the per-entity totals, so
/// that a count reads a handful of rows.
async fn compact_counts(pool: PgPool) {
    let sql = super::counts::compact_sql();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if pool.is_closed() {
            return;
        }
        if let Err(e) = sqlx::raw_sql(sql).execute(&pool).await {
            tracing::debug!(error = %e, "row-count compaction failed; it runs again");
        }
    }
}

type Query<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

fn bind<'q>(mut q: Query<'q>, args: &'q [Value]) -> Query<'q> {
    for a in args {
        q = match a {
            Value::Int(v) => q.bind(*v),
            Value::Float(v) => q.bind(*v),
            Value::Decimal(v) => q.bind(*v),
            Value::Bool(v) => q.bind(*v),
            Value::Text(v) => q.bind(v.as_deref()),
        };
    }
    q
}

fn decode(row: &PgRow, types: &[ColType]) -> Result<Row> {
    let mut out = Vec::with_capacity(types.len());
    for (i, t) in types.iter().enumerate() {
        let v = match t {
            ColType::Int => Value::Int(row.try_get::<Option<i64>, _>(i).map_err(db)?),
            ColType::Float => Value::Float(row.try_get::<Option<f64>, _>(i).map_err(db)?),
            // A decimal column of an earlier version is DOUBLE PRECISION: its floats read as
            // their shortest form until the start that converts it.
            ColType::Decimal => {
                Value::Decimal(match row.try_get::<Option<crate::decimal::Decimal>, _>(i) {
                    Ok(d) => d.map(|d| d.normalize()),
                    Err(_) => row
                        .try_get::<Option<f64>, _>(i)
                        .map_err(db)?
                        .and_then(|f| crate::decimal::from_f64(f).ok()),
                })
            }
            ColType::Bool => Value::Bool(row.try_get::<Option<bool>, _>(i).map_err(db)?),
            ColType::Text => Value::Text(row.try_get::<Option<String>, _>(i).map_err(db)?),
        };
        out.push(v);
    }
    Ok(out)
}

/// Why the first connection failed, in one line: the server's own message (sqlx's error repeats
/// it, with the line of the server's source code) or the network's, and what to do when the
/// database is not there.
fn connect_error(e: sqlx::Error) -> anyhow::Error {
    match &e {
        // 3D000: invalid_catalog_name.
        sqlx::Error::Database(d) if d.code().as_deref() == Some("3D000") => anyhow::anyhow!(
            "{}; create it first (for example with `createdb`), or name another in the URL",
            d.message()
        ),
        sqlx::Error::Database(d) => anyhow::anyhow!("{}", d.message()),
        // Its message already ends with its cause's: the cause is not chained again.
        _ => anyhow::anyhow!("{e}"),
    }
}

pub(super) fn db(e: sqlx::Error) -> StorageError {
    if let sqlx::Error::Database(d) = &e {
        match d.kind() {
            sqlx::error::ErrorKind::UniqueViolation => {
                // Unique indexes are named `<table>_<column>_key`.
                let column = match (d.constraint(), d.table()) {
                    (Some(c), Some(t)) => c
                        .strip_prefix(t)
                        .and_then(|c| c.strip_prefix('_'))
                        .and_then(|c| c.strip_suffix("_key"))
                        .map(str::to_string),
                    _ => None,
                };
                return StorageError::Unique { column };
            }
            sqlx::error::ErrorKind::ForeignKeyViolation => return StorageError::ForeignKey,
            sqlx::error::ErrorKind::NotNullViolation => {
                let column = d
                    .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .and_then(|p| p.column())
                    .map(str::to_string);
                return StorageError::NotNull { column };
            }
            _ => {}
        }
        // Class 53: insufficient resources; 53100 is disk_full.
        if d.code().as_deref() == Some("53100") {
            return StorageError::Full(d.message().to_string());
        }
        if let Some(class) = d.code().as_deref().and_then(super::contention::pg_class) {
            return StorageError::Contention {
                class,
                message: d.message().to_string(),
            };
        }
    }
    StorageError::Database(e.to_string())
}

async fn exec_on<'c, E>(ex: E, sql: &str, args: &[Value]) -> Result<u64>
where
    E: sqlx::Executor<'c, Database = Postgres>,
{
    let q = bind(sqlx::query(AssertSqlSafe(sql.to_string())), args);
    Ok(q.execute(ex).await.map_err(db)?.rows_affected())
}

async fn fetch_on<'c, E>(ex: E, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>>
where
    E: sqlx::Executor<'c, Database = Postgres>,
{
    let q = bind(sqlx::query(AssertSqlSafe(sql.to_string())), args);
    let rows = q.fetch_all(ex).await.map_err(db)?;
    rows.iter().map(|r| decode(r, types)).collect()
}

/// Runs one statement that returns rows on a connection of `conns`.
async fn fetch_single(
    conns: &Conns,
    sql: &str,
    args: &[Value],
    types: &[ColType],
) -> Result<Vec<Row>> {
    let mut held = conns.acquire().await.map_err(db)?;
    let q = bind(sqlx::query(AssertSqlSafe(sql.to_string())), args);
    let rows = q.fetch_all(held.conn()).await;
    held.finish(&rows);
    drop(held);
    rows.map_err(db)?.iter().map(|r| decode(r, types)).collect()
}

/// Runs one statement on a connection of `conns`; the number of rows it affected.
async fn exec_single(conns: &Conns, sql: &str, args: &[Value]) -> Result<u64> {
    let mut held = conns.acquire().await.map_err(db)?;
    let q = bind(sqlx::query(AssertSqlSafe(sql.to_string())), args);
    let done = q.execute(held.conn()).await;
    held.finish(&done);
    Ok(done.map_err(db)?.rows_affected())
}

/// An open transaction; `wake`, when set, is told after it commits (the sequencer of live
/// changes numbers what it may have logged). While a copy of created rows is under way
/// ([`pg_stream`]) its task holds the transaction, and the next statement ends the copy first.
pub(super) struct PgTx {
    tx: Option<Transaction<'static, Postgres>>,
    stream: Option<Stream>,
    wake: Option<Arc<tokio::sync::Notify>>,
    /// Where the ids of copied rows are taken; none in a read-only transaction.
    ids: Option<Arc<pg_stream::Ahead>>,
    /// The fewest creates of a group that is copied ([`Exec::copies`]).
    copy_from: usize,
}

impl PgTx {
    pub(super) fn new(
        tx: Transaction<'static, Postgres>,
        wake: Option<Arc<tokio::sync::Notify>>,
        ids: Option<Arc<pg_stream::Ahead>>,
    ) -> PgTx {
        PgTx {
            tx: Some(tx),
            stream: None,
            wake,
            ids,
            copy_from: pg_stream::COPY_ALONE,
        }
    }

    /// The transaction's connection, once a copy under way has ended (with its error, if it
    /// failed).
    async fn conn(&mut self) -> Result<&mut sqlx::PgConnection> {
        if let Some(stream) = self.stream.take() {
            let (tx, copied) = stream.end().await?;
            self.tx = Some(tx);
            copied?;
        }
        match self.tx.as_mut() {
            Some(tx) => Ok(&mut **tx),
            None => Err(StorageError::Database(
                "the transaction was lost with its copy".into(),
            )),
        }
    }

    /// The transaction itself, once a copy under way has ended.
    async fn take(&mut self) -> Result<Transaction<'static, Postgres>> {
        self.conn().await?;
        self.tx
            .take()
            .ok_or_else(|| StorageError::Database("the transaction was lost with its copy".into()))
    }
}

#[async_trait]
impl Exec for PgTx {
    async fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64> {
        exec_on(self.conn().await?, sql, args).await
    }
    async fn fetch(&mut self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        fetch_on(self.conn().await?, sql, args, types).await
    }
    fn binds_arrays(&self) -> bool {
        true
    }
    fn copies(&self, rows: usize) -> bool {
        self.ids.is_some() && rows >= self.copy_from
    }
    fn copy_groups(&mut self) {
        self.copy_from = pg_stream::COPY_ROWS;
    }
    async fn copy_created(
        &mut self,
        table: &str,
        columns: &[String],
        args: &[&Value],
        width: usize,
    ) -> Result<Vec<i64>> {
        let ahead = self.ids.clone().ok_or_else(|| {
            StorageError::Database("rows are not copied in a read-only transaction".into())
        })?;
        let ids = ahead.take(table, args.len() / width.max(1)).await?;
        let tuples = pg_stream::tuples(&ids, args, width);
        let all: Vec<String> = std::iter::once("\"id\"".to_string())
            .chain(columns.iter().cloned())
            .collect();
        let statement = pg_stream::statement(table, &all);
        if self.stream.as_ref().is_some_and(|s| !s.is(&statement)) {
            self.conn().await?;
        }
        if self.stream.is_none() {
            let tx = self.take().await?;
            self.stream = Some(Stream::start(tx, statement));
        }
        let sent = match &self.stream {
            Some(stream) => stream.send(tuples).await,
            None => false,
        };
        if !sent {
            self.conn().await?;
            return Err(StorageError::Database(format!(
                "the copy into {table} ended before its rows"
            )));
        }
        Ok(ids)
    }
    async fn fetch_columns(
        &mut self,
        sql: &str,
        columns: &[Column<'_>],
        types: &[ColType],
        returned: Returned,
    ) -> Result<Vec<Row>> {
        let mut q = sqlx::query(AssertSqlSafe(sql.to_string()));
        for c in columns {
            q = match c {
                Column::Each(values) => bind_column(q, values)?,
                Column::Same(v) => bind(q, std::slice::from_ref(*v)),
            };
        }
        match returned {
            Returned::Rows => {
                let rows = q.fetch_all(self.conn().await?).await.map_err(db)?;
                rows.iter().map(|r| decode(r, types)).collect()
            }
            Returned::Gathered => {
                let row = q.fetch_one(self.conn().await?).await.map_err(db)?;
                ungather(&row, types)
            }
        }
    }
}

/// The rows of a row of arrays, one array per column (see [`Returned::Gathered`]).
fn ungather(row: &PgRow, types: &[ColType]) -> Result<Vec<Row>> {
    fn array<T>(row: &PgRow, i: usize) -> Result<Vec<Option<T>>>
    where
        for<'r> Vec<Option<T>>: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
    {
        let v: Option<Vec<Option<T>>> = row.try_get(i).map_err(db)?;
        Ok(v.unwrap_or_default())
    }
    let mut columns: Vec<std::vec::IntoIter<Value>> = Vec::with_capacity(types.len());
    for (i, t) in types.iter().enumerate() {
        let values: Vec<Value> = match t {
            ColType::Int => array::<i64>(row, i)?.into_iter().map(Value::Int).collect(),
            ColType::Float => array::<f64>(row, i)?
                .into_iter()
                .map(Value::Float)
                .collect(),
            ColType::Bool => array::<bool>(row, i)?
                .into_iter()
                .map(Value::Bool)
                .collect(),
            ColType::Text => array::<String>(row, i)?
                .into_iter()
                .map(Value::Text)
                .collect(),
            ColType::Decimal => {
                return Err(StorageError::Database(
                    "decimal columns are not read gathered".into(),
                ));
            }
        };
        columns.push(values.into_iter());
    }
    let n = columns.first().map_or(0, |c| c.len());
    if columns.iter().any(|c| c.len() != n) {
        return Err(StorageError::Database(
            "gathered columns of different lengths".into(),
        ));
    }
    Ok((0..n)
        .map(|_| columns.iter_mut().filter_map(Iterator::next).collect())
        .collect())
}

/// Binds one column's values as one array parameter.
fn bind_column<'q>(q: Query<'q>, column: &[&'q Value]) -> Result<Query<'q>> {
    fn all<'q, T>(column: &[&'q Value], f: impl Fn(&'q Value) -> Option<T>) -> Result<Vec<T>> {
        column
            .iter()
            .map(|v| f(v))
            .collect::<Option<Vec<T>>>()
            .ok_or_else(|| StorageError::Database("a column of mixed kinds".into()))
    }
    Ok(match column.first() {
        None | Some(Value::Text(_)) => q.bind(all(column, |v| match v {
            Value::Text(t) => Some(t.as_deref()),
            _ => None,
        })?),
        Some(Value::Int(_)) => q.bind(all(column, |v| match v {
            Value::Int(i) => Some(*i),
            _ => None,
        })?),
        Some(Value::Float(_)) => q.bind(all(column, |v| match v {
            Value::Float(f) => Some(*f),
            _ => None,
        })?),
        Some(Value::Decimal(_)) => q.bind(all(column, |v| match v {
            Value::Decimal(d) => Some(*d),
            _ => None,
        })?),
        Some(Value::Bool(_)) => q.bind(all(column, |v| match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        })?),
    })
}

#[async_trait]
impl Tx for PgTx {
    async fn commit(mut self: Box<Self>) -> Result<()> {
        let tx = self.take().await?;
        tx.commit().await.map_err(db)?;
        if let Some(w) = self.wake.take() {
            w.notify_one();
        }
        Ok(())
    }
    async fn rollback(mut self: Box<Self>) -> Result<()> {
        let tx = match self.stream.take() {
            Some(stream) => stream.abort().await?,
            None => self.tx.take().ok_or_else(|| {
                StorageError::Database("the transaction was lost with its copy".into())
            })?,
        };
        tx.rollback().await.map_err(db)
    }
}

#[async_trait]
impl Storage for PgStorage {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    async fn begin(&self) -> Result<Box<dyn Tx>> {
        let tx = self.pool.begin().await.map_err(db)?;
        Ok(Box::new(PgTx::new(
            tx,
            Some(self.live_wake.clone()),
            Some(self.ids.clone()),
        )))
    }

    async fn begin_snapshot(&self) -> Result<Box<dyn Tx>> {
        let mut tx = self.lists.begin().await.map_err(db)?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        Ok(Box::new(PgTx::new(tx, None, None)))
    }

    async fn fetch(&self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        fetch_single(&self.points, sql, args, types).await
    }

    async fn fetch_list(&self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        fetch_on(&self.lists, sql, args, types).await
    }

    async fn execute(&self, sql: &str, args: &[Value]) -> Result<u64> {
        let n = exec_single(&self.singles, sql, args).await?;
        self.live_wake.notify_one();
        Ok(n)
    }

    async fn fetch_write(&self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        let rows = fetch_single(&self.singles, sql, args, types).await?;
        self.live_wake.notify_one();
        Ok(rows)
    }

    async fn table_columns(&self, table: &str) -> Result<Vec<String>> {
        let rows = fetch_on(
            &self.pool,
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
            &[Value::text(table)],
            &[ColType::Text],
        )
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|mut r| r.pop()?.into_string())
            .collect())
    }

    async fn batch_ddl(&self, statements: &[String]) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        // One schema change at a time across every server on this database.
        sqlx::query("SELECT pg_advisory_xact_lock(7262018)")
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        for s in statements {
            sqlx::raw_sql(AssertSqlSafe(s.clone()))
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        tx.commit().await.map_err(db)
    }

    fn live_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.live_signal.subscribe()
    }

    fn schema_changed(&self) {
        self.points.schema_changed();
        self.singles.schema_changed();
    }

    async fn close(&self) {
        self.compactor.abort();
        self.live.iter().for_each(tokio::task::JoinHandle::abort);
        self.lists.close().await;
        self.points.close().await;
        self.singles.close().await;
        self.pool.close().await;
    }
}
