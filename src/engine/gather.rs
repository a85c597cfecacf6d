//! Workers that take jobs off one queue in groups: a free worker takes the next job at once,
//! with whatever others are waiting behind it (up to a limit), so that jobs arriving while
//! every worker is busy share the next trip to the database. Used for single creates and point
//! reads on PostgreSQL ([`super::creates`], [`super::points`]).

use super::prepare::Prepared;
use super::{CallError, Caller, Outcome};
use std::future::Future;
use std::sync::Arc;
use tokio::sync::{Mutex, mpsc, oneshot};

/// A prepared call waiting for a writer that runs calls together (the group commit on SQLite,
/// shared creates on PostgreSQL), and where its outcome goes.
pub struct Job {
    pub caller: Caller,
    pub prepared: Prepared,
    pub reply: oneshot::Sender<Outcome>,
}

/// Where calls wait for such a writer.
pub type Queue = mpsc::Sender<Job>;

/// Hands `prepared` to the writer behind `queue` and waits for its outcome.
pub async fn submit(queue: &Queue, caller: &Caller, prepared: Prepared) -> Outcome {
    let (reply, rx) = oneshot::channel();
    let job = Job {
        caller: caller.clone(),
        prepared,
        reply,
    };
    if queue.send(job).await.is_err() {
        return Err(CallError::Internal);
    }
    rx.await.unwrap_or_else(|_| Err(CallError::Internal))
}

/// Starts `workers` tasks that run `work` on groups of at most `max` jobs; they end when every
/// sender of the returned queue is gone.
pub fn spawn<J, F, Fut>(workers: usize, max: usize, work: F) -> mpsc::Sender<J>
where
    J: Send + 'static,
    F: Fn(Vec<J>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (tx, rx) = mpsc::channel::<J>(4096);
    let rx = Arc::new(Mutex::new(rx));
    for _ in 0..workers {
        let rx = rx.clone();
        let work = work.clone();
        tokio::spawn(async move {
            loop {
                let group = {
                    let mut rx = rx.lock().await;
                    let Some(first) = rx.recv().await else {
                        return;
                    };
                    let mut group = vec![first];
                    while group.len() < max {
                        match rx.try_recv() {
                            Ok(j) => group.push(j),
                            Err(_) => break,
                        }
                    }
                    group
                };
                work(group).await;
            }
        });
    }
    tx
}
