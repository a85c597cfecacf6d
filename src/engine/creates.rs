//! Shared statements for single creates on PostgreSQL: creates that arrive while earlier ones
//! are being written wait, and then those of one entity that write the same columns are
//! inserted by one statement and share its commit (one WAL flush for many creates instead of
//! one each). The statement is all or none: when it fails (a taken unique value, a missing
//! reference, a broken database), it changed nothing, and its creates run again one by one, so
//! that each gets the outcome it would have had alone. A create that arrives while a writer is
//! free is written at once, alone.

use super::gather::{Job, Queue};
use super::prepare::Prepared;
use super::{Engine, exec, render};
use crate::storage::{AutoCommit, Value, inserts};

/// Groups written at once; each takes a connection of its own.
const WRITERS: usize = 4;
/// Most creates that share one statement.
const MAX_GROUP: usize = 64;
/// Most bound values in one statement (PostgreSQL allows 65,535).
const MAX_VALUES: usize = 30_000;

/// Starts the writers; they end when every sender is gone.
pub fn spawn(engine: Engine) -> Queue {
    super::gather::spawn(WRITERS, MAX_GROUP, move |group| {
        let engine = engine.clone();
        async move { write(&engine, group).await }
    })
}

/// Writes a group: each set of creates of the same shape with one statement.
async fn write(engine: &Engine, mut pending: Vec<Job>) {
    while !pending.is_empty() {
        let mut jobs = pending.into_iter();
        let head = jobs.next().expect("not empty");
        let width = head.prepared.values.len().max(1);
        let most = (MAX_VALUES / width).max(1);
        let mut same = vec![head];
        let mut rest = Vec::new();
        for j in jobs {
            if same.len() < most && exec::same_shape(&same[0].prepared, &j.prepared) {
                same.push(j);
            } else {
                rest.push(j);
            }
        }
        write_same(engine, same).await;
        pending = rest;
    }
}

/// Creates of one entity that write the same columns: one statement, else one by one.
async fn write_same(engine: &Engine, group: Vec<Job>) {
    if group.len() > 1 {
        match insert_together(engine, &group).await {
            Together::Created(objects) => {
                for (j, obj) in group.into_iter().zip(objects) {
                    engine.after(&j.prepared, &obj);
                    let _ = j.reply.send(Ok(obj));
                }
                return;
            }
            Together::Unknown => {
                for j in group {
                    let _ = j.reply.send(Err(super::CallError::Internal));
                }
                return;
            }
            Together::Failed => {}
        }
    }
    let alone = group.into_iter().map(|j| async move {
        let outcome = engine.call_alone(&j.caller, &j.prepared).await;
        let _ = j.reply.send(outcome);
    });
    futures::future::join_all(alone).await;
}

/// How a shared statement ended.
enum Together {
    /// The objects the group created, in its order.
    Created(Vec<serde_json::Value>),
    /// The statement failed and changed nothing: the creates run one by one.
    Failed,
    /// The statement committed but did not return a row per create: running them again could
    /// create twice, so each create fails.
    Unknown,
}

async fn insert_together(engine: &Engine, group: &[Job]) -> Together {
    let first: &Prepared = &group[0].prepared;
    let e = first.entity.as_ref();
    let columns: Vec<&str> = first.values.iter().map(|(c, _)| c.as_str()).collect();
    let args: Vec<&Value> = group
        .iter()
        .flat_map(|j| j.prepared.values.iter().map(|(_, v)| v))
        .collect();
    let mut ex = AutoCommit(engine.storage.as_ref());
    let d = engine.storage.dialect();
    match inserts::insert_many(&mut ex, d, e, &columns, &args, true).await {
        Ok(rows) if rows.len() == group.len() => {
            Together::Created(rows.iter().map(|r| render::object(e, r)).collect())
        }
        Ok(rows) => {
            tracing::error!(
                created = rows.len(),
                creates = group.len(),
                "a shared insert returned another number of rows than it was given"
            );
            Together::Unknown
        }
        Err(err) => {
            tracing::debug!(error = %err, creates = group.len(), "shared insert failed; one by one");
            Together::Failed
        }
    }
}
