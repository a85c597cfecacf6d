//! Group commit for single calls on a single-writer database (SQLite): calls that arrive while
//! a transaction is being written wait, and then share the next transaction and its commit.
//! Each call is one statement, which SQLite applies or undoes on its own, so a failing call
//! never affects the others in its group. A group that meets a busy database runs again as a
//! whole.

use super::changes::NO_REQUEST;
use super::gather::{Job, Queue};
use super::retry::Retry;
use super::{Engine, Outcome, exec, internal};
use crate::storage::StorageError;
use tokio::sync::mpsc;

/// Most calls that share one transaction.
const MAX_GROUP: usize = 512;

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
    let mut retry = Retry::new("group commit");
    let committed = loop {
        match attempt(engine, group).await {
            Ok(outcomes) => break Ok(outcomes),
            Err(e) if retry.again(&e).await => continue,
            Err(e) => break Err(internal(e)),
        }
    };
    match committed {
        Ok(outcomes) => {
            for (j, o) in group.drain(..).zip(outcomes) {
                if let Ok(obj) = &o {
                    engine.after(&j.prepared, obj);
                }
                let _ = j.reply.send(o);
            }
        }
        Err(err) => {
            for j in group.drain(..) {
                let _ = j.reply.send(Err(err.clone()));
            }
        }
    }
}

/// One attempt at the whole group in one transaction: every call's outcome once it
/// committed; an `Err` (after rolling back) when the database failed.
async fn attempt(engine: &Engine, group: &[Job]) -> Result<Vec<Outcome>, StorageError> {
    let mut tx = engine.storage.begin().await?;
    let mut outcomes = Vec::with_capacity(group.len());
    for j in group {
        match exec::execute(
            engine,
            tx.as_mut(),
            &j.caller,
            &j.prepared,
            false,
            NO_REQUEST,
        )
        .await
        {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                let _ = tx.rollback().await;
                return Err(e);
            }
        }
    }
    tx.commit().await?;
    Ok(outcomes)
}
