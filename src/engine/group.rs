//! Group commit for single calls on a single-writer database (SQLite): calls that arrive while
//! a transaction is being written wait, and then share the next transaction and its commit.
//! Each call is one statement, which SQLite applies or undoes on its own, so a failing call
//! never affects the others in its group.

use super::prepare::Prepared;
use super::{CallError, Caller, Engine, Outcome, exec, internal};
use tokio::sync::{mpsc, oneshot};

/// Most calls that share one transaction.
const MAX_GROUP: usize = 512;

pub struct Job {
    pub caller: Caller,
    pub prepared: Prepared,
    pub reply: oneshot::Sender<Outcome>,
}

pub type Queue = mpsc::Sender<Job>;

/// Starts the writer task; it ends when every sender is gone.
pub fn spawn(engine: Engine) -> Queue {
    let (tx, mut rx) = mpsc::channel::<Job>(4096);
    tokio::spawn(async move {
        let mut group = Vec::with_capacity(MAX_GROUP);
        while let Some(first) = rx.recv().await {
            group.push(first);
            while group.len() < MAX_GROUP {
                match rx.try_recv() {
                    Ok(j) => group.push(j),
                    Err(_) => break,
                }
            }
            write(&engine, &mut group).await;
        }
    });
    tx
}

async fn write(engine: &Engine, group: &mut Vec<Job>) {
    let mut tx = match engine.storage.begin().await {
        Ok(t) => t,
        Err(e) => {
            let err = internal(e);
            for j in group.drain(..) {
                let _ = j.reply.send(Err(err.clone()));
            }
            return;
        }
    };
    let mut outcomes = Vec::with_capacity(group.len());
    let mut failed = None;
    for j in group.iter() {
        match exec::execute(engine, tx.as_mut(), &j.caller, &j.prepared, false).await {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let committed = match failed {
        Some(e) => {
            let _ = tx.rollback().await;
            Err(internal(e))
        }
        None => tx.commit().await.map_err(internal),
    };
    for (j, o) in group.drain(..).zip(
        outcomes
            .into_iter()
            .map(Some)
            .chain(std::iter::repeat(None)),
    ) {
        let out = match (&committed, o) {
            (Ok(()), Some(o)) => {
                if o.is_ok() {
                    engine.after(&j.prepared);
                }
                o
            }
            (Err(e), _) => Err(e.clone()),
            (Ok(()), None) => Err(CallError::Internal),
        };
        let _ = j.reply.send(out);
    }
}
