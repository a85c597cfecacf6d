//! Read lanes for SQLite: a few threads, each owning one read connection, that run queries handed
//! to them and send the result back to the waiting task. List pages and counts, which may visit
//! many rows, run on one so that they never hold an async worker; point reads run on the calling
//! thread instead ([`super::near`]) and never queue behind them. WAL lets every lane read beside
//! the writer.

use rusqlite::Connection;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

type Job = Box<dyn FnOnce(&Connection) + Send>;

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Bumped after every schema change; threads then drop their cached statements.
    schema: Arc<AtomicU64>,
}

struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
    /// Threads waiting on `ready`; a job wakes one only when some are.
    sleeping: usize,
}

/// Times an idle thread yields and looks again before it sleeps: a busy server hands it the next
/// job in the meantime, without a wake-up call.
const IDLE_YIELDS: usize = 32;

/// A set of threads with their connections, fed from one queue.
pub struct Lane {
    shared: Arc<Shared>,
}

impl Lane {
    /// Starts one named thread per connection; on Linux, `nice` above 0 lowers the threads'
    /// scheduling priority, so that another lane's work gets the CPU first.
    pub fn start(
        name: &str,
        conns: Vec<Connection>,
        schema: Arc<AtomicU64>,
        nice: i32,
    ) -> std::io::Result<Lane> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                closed: false,
                sleeping: 0,
            }),
            ready: Condvar::new(),
            schema,
        });
        for (i, conn) in conns.into_iter().enumerate() {
            let s = shared.clone();
            std::thread::Builder::new()
                .name(format!("sqlite-{name}-{i}"))
                .spawn(move || {
                    lower_priority(nice);
                    work(&s, conn)
                })?;
        }
        Ok(Lane { shared })
    }

    /// Runs `f` on one of the lane's connections and returns its result; `None` when `f`
    /// panicked (the thread survives it).
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |c| {
            if let Ok(v) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(c))) {
                let _ = tx.send(v);
            }
        });
        let wake = {
            let mut q = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.jobs.push_back(job);
            q.sleeping > 0
        };
        if wake {
            self.shared.ready.notify_one();
        }
        rx.await.ok()
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .closed = true;
        self.shared.ready.notify_all();
    }
}

/// Raises the calling thread's nice value (Linux schedules threads one by one).
fn lower_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    if nice > 0 {
        // SAFETY: setpriority on the calling thread's id; failure only leaves the priority.
        unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

fn work(s: &Shared, conn: Connection) {
    let mut seen = s.schema.load(Ordering::Acquire);
    loop {
        let mut job = None;
        for _ in 0..IDLE_YIELDS {
            job = s
                .queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .jobs
                .pop_front();
            if job.is_some() {
                break;
            }
            std::thread::yield_now();
        }
        let job = match job {
            Some(j) => j,
            None => {
                let mut q = s.queue.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if let Some(j) = q.jobs.pop_front() {
                        break j;
                    }
                    if q.closed {
                        return;
                    }
                    q.sleeping += 1;
                    q = s.ready.wait(q).unwrap_or_else(|p| p.into_inner());
                    q.sleeping -= 1;
                }
            }
        };
        let now = s.schema.load(Ordering::Acquire);
        if now != seen {
            conn.flush_prepared_statement_cache();
            seen = now;
        }
        job(&conn);
    }
}
