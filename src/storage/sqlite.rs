//! The embedded SQLite backend: a WAL database file, a pool of readers and one writer.

use super::{Exec, Result, Row, Storage, StorageError, Tx, Value, sql::Dialect};
use crate::schema::ColType;
use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{AssertSqlSafe, Row as _, Sqlite, SqlitePool, Transaction};
use std::str::FromStr;
use std::time::Duration;

pub struct SqliteStorage {
    read: SqlitePool,
    write: SqlitePool,
}

impl SqliteStorage {
    pub async fn connect(url: &str) -> anyhow::Result<SqliteStorage> {
        let opts = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30))
            .pragma("cache_size", "-65536")
            .pragma("temp_store", "memory");
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .acquire_timeout(Duration::from_secs(120))
            .connect_with(opts.clone())
            .await?;
        let readers = std::thread::available_parallelism()
            .map_or(4, |n| n.get() * 2)
            .max(4);
        let read = SqlitePoolOptions::new()
            .max_connections(readers as u32)
            .min_connections(1)
            .connect_with(opts)
            .await?;
        Ok(SqliteStorage { read, write })
    }
}

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments>;

fn bind<'q>(mut q: Query<'q>, args: &'q [Value]) -> Query<'q> {
    for a in args {
        q = match a {
            Value::Int(v) => q.bind(*v),
            Value::Float(v) => q.bind(*v),
            Value::Bool(v) => q.bind(v.map(i64::from)),
            Value::Text(v) => q.bind(v.as_deref()),
        };
    }
    q
}

fn decode(row: &SqliteRow, types: &[ColType]) -> Result<Row> {
    let mut out = Vec::with_capacity(types.len());
    for (i, t) in types.iter().enumerate() {
        let v = match t {
            ColType::Int => Value::Int(row.try_get_unchecked::<Option<i64>, _>(i).map_err(db)?),
            ColType::Float => Value::Float(row.try_get_unchecked::<Option<f64>, _>(i).map_err(db)?),
            ColType::Bool => Value::Bool(
                row.try_get_unchecked::<Option<i64>, _>(i)
                    .map_err(db)?
                    .map(|i| i != 0),
            ),
            ColType::Text => {
                Value::Text(row.try_get_unchecked::<Option<String>, _>(i).map_err(db)?)
            }
        };
        out.push(v);
    }
    Ok(out)
}

fn db(e: sqlx::Error) -> StorageError {
    if let sqlx::Error::Database(d) = &e {
        match d.kind() {
            sqlx::error::ErrorKind::UniqueViolation => {
                // "UNIQUE constraint failed: table.column"
                let column = d
                    .message()
                    .rsplit(": ")
                    .next()
                    .and_then(|c| c.split(", ").next())
                    .and_then(|c| c.split('.').nth(1))
                    .map(str::to_string);
                return StorageError::Unique { column };
            }
            sqlx::error::ErrorKind::ForeignKeyViolation => return StorageError::ForeignKey,
            _ => {}
        }
    }
    StorageError::Database(e.to_string())
}

async fn exec_on<'c, E>(ex: E, sql: &str, args: &[Value]) -> Result<u64>
where
    E: sqlx::Executor<'c, Database = Sqlite>,
{
    let q = bind(sqlx::query(AssertSqlSafe(sql.to_string())), args);
    Ok(q.execute(ex).await.map_err(db)?.rows_affected())
}

async fn fetch_on<'c, E>(ex: E, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>>
where
    E: sqlx::Executor<'c, Database = Sqlite>,
{
    let q = bind(sqlx::query(AssertSqlSafe(sql.to_string())), args);
    let rows = q.fetch_all(ex).await.map_err(db)?;
    rows.iter().map(|r| decode(r, types)).collect()
}

struct SqliteTx(Transaction<'static, Sqlite>);

#[async_trait]
impl Exec for SqliteTx {
    async fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64> {
        exec_on(&mut *self.0, sql, args).await
    }
    async fn fetch(&mut self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        fetch_on(&mut *self.0, sql, args, types).await
    }
}

#[async_trait]
impl Tx for SqliteTx {
    async fn commit(self: Box<Self>) -> Result<()> {
        self.0.commit().await.map_err(db)
    }
    async fn rollback(self: Box<Self>) -> Result<()> {
        self.0.rollback().await.map_err(db)
    }
}

#[async_trait]
impl Storage for SqliteStorage {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    async fn begin(&self) -> Result<Box<dyn Tx>> {
        let tx = self.write.begin().await.map_err(db)?;
        Ok(Box::new(SqliteTx(tx)))
    }

    async fn fetch(&self, sql: &str, args: &[Value], types: &[ColType]) -> Result<Vec<Row>> {
        fetch_on(&self.read, sql, args, types).await
    }

    async fn execute(&self, sql: &str, args: &[Value]) -> Result<u64> {
        exec_on(&self.write, sql, args).await
    }

    async fn table_columns(&self, table: &str) -> Result<Vec<String>> {
        let rows = fetch_on(
            &self.write,
            "SELECT name FROM pragma_table_info(?1)",
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
        let mut tx = self.write.begin().await.map_err(db)?;
        for s in statements {
            sqlx::raw_sql(AssertSqlSafe(s.clone()))
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        tx.commit().await.map_err(db)
    }

    async fn close(&self) {
        self.read.close().await;
        self.write.close().await;
    }
}
