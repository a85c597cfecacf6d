//! Connections for PostgreSQL statements that run on their own (a point read, a write committed
//! as it ends), handed out without a round trip. sqlx's pool sends a Sync and waits for the
//! answer every time a connection goes back to it, which doubles the round trips of a
//! one-statement request; here a connection whose statement ran to its end goes straight back.
//! A connection whose statement was abandoned halfway (a dropped future) or whose socket failed
//! is closed instead, and a new one is opened when needed. One that sat idle a while is checked
//! before it is used again, and after a schema change each drops its prepared statements.

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection, Error};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, SemaphorePermit};

/// A connection idle longer than this is checked (a round trip) before it is used again.
pub const IDLE_CHECK: Duration = Duration::from_secs(30);

/// How long a statement waits for a connection before it fails.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);

struct Idle {
    conn: PgConnection,
    since: Instant,
    /// The schema generation its prepared statements were made in.
    schema: u64,
}

/// Up to `max` connections, opened on demand, the most recently used lent first.
pub struct Conns {
    opts: PgConnectOptions,
    idle: Mutex<Vec<Idle>>,
    permits: Semaphore,
    schema: AtomicU64,
}

/// A connection lent out; it goes back when dropped if its statement ran to its end.
pub struct Held<'a> {
    conns: &'a Conns,
    conn: Option<PgConnection>,
    schema: u64,
    finished: bool,
    _permit: SemaphorePermit<'a>,
}

impl Conns {
    pub fn new(opts: PgConnectOptions, max: usize) -> Conns {
        Conns {
            opts,
            idle: Mutex::new(Vec::with_capacity(max)),
            permits: Semaphore::new(max),
            schema: AtomicU64::new(0),
        }
    }

    /// A new connection, without Nagle's algorithm ([`super::pg_nodelay`]).
    async fn connect(&self) -> Result<PgConnection, Error> {
        let conn = PgConnection::connect_with(&self.opts).await?;
        super::pg_nodelay::to_port(self.opts.get_port());
        Ok(conn)
    }

    /// A connection: an idle one, else a new one; waits while `max` are lent out.
    pub async fn acquire(&self) -> Result<Held<'_>, Error> {
        let permit = tokio::time::timeout(ACQUIRE_TIMEOUT, self.permits.acquire())
            .await
            .map_err(|_| Error::PoolTimedOut)?
            .map_err(|_| Error::PoolClosed)?;
        let schema = self.schema.load(Ordering::Acquire);
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some(mut i) => {
                let ready = if i.since.elapsed() > IDLE_CHECK {
                    i.conn.ping().await
                } else {
                    Ok(())
                };
                let ready = match ready {
                    Ok(()) if i.schema != schema => i.conn.clear_cached_statements().await,
                    r => r,
                };
                match ready {
                    Ok(()) => i.conn,
                    Err(_) => self.connect().await?,
                }
            }
            None => self.connect().await?,
        };
        Ok(Held {
            conns: self,
            conn: Some(conn),
            schema,
            finished: false,
            _permit: permit,
        })
    }

    /// Prepared statements made before now are dropped before their connection's next use.
    pub fn schema_changed(&self) {
        self.schema.fetch_add(1, Ordering::AcqRel);
    }

    /// Lends no more connections and closes the idle ones.
    pub async fn close(&self) {
        self.permits.close();
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|p| p.into_inner()));
        for i in idle {
            let _ = i.conn.close().await;
        }
    }
}

impl Held<'_> {
    pub fn conn(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("held until dropped")
    }

    /// Records how the statement ended: the connection goes back unless the failure was its
    /// own (the database refusing a statement leaves it usable).
    pub fn finish<T>(&mut self, r: &Result<T, Error>) {
        self.finished = matches!(r, Ok(_) | Err(Error::Database(_)));
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if !self.finished || self.conns.permits.is_closed() {
            return;
        }
        if let Some(conn) = self.conn.take() {
            self.conns
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Idle {
                    conn,
                    since: Instant::now(),
                    schema: self.schema,
                });
        }
    }
}
