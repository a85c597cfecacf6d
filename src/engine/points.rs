//! Shared statements for point reads on PostgreSQL: reads of objects by id that arrive while
//! earlier ones are being answered wait, and then those of one entity are read by one
//! statement (one round trip to the database for many reads instead of one each). A read that
//! arrives while a reader is free runs at once, alone. Each read still sees the object as it
//! was at some moment between its request and its answer.

use crate::schema::Entity;
use crate::storage::{PoolExec, Row, Storage, StorageError, entity, points};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Groups read at once; each takes a connection of its own.
const READERS: usize = 4;
/// Most reads that share one statement.
const MAX_GROUP: usize = 256;

pub struct Job {
    pub entity: Arc<Entity>,
    pub id: i64,
    pub reply: oneshot::Sender<Result<Option<Row>, StorageError>>,
}

pub type Queue = mpsc::Sender<Job>;

/// Starts the readers; they end when every sender is gone.
pub fn spawn(storage: Arc<dyn Storage>) -> Queue {
    super::gather::spawn(READERS, MAX_GROUP, move |group| {
        let storage = storage.clone();
        async move { read(storage.as_ref(), group).await }
    })
}

/// Answers a group: the reads of each entity with one statement.
async fn read(storage: &dyn Storage, mut pending: Vec<Job>) {
    while !pending.is_empty() {
        let mut jobs = pending.into_iter();
        let head = jobs.next().expect("not empty");
        let mut same = vec![head];
        let mut rest = Vec::new();
        for j in jobs {
            if Arc::ptr_eq(&same[0].entity, &j.entity) {
                same.push(j);
            } else {
                rest.push(j);
            }
        }
        read_same(storage, same).await;
        pending = rest;
    }
}

/// Reads of one entity: one statement, else one by one.
async fn read_same(storage: &dyn Storage, group: Vec<Job>) {
    let d = storage.dialect();
    if group.len() > 1 {
        let e = group[0].entity.clone();
        let mut ids: Vec<i64> = group.iter().map(|j| j.id).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut ex = PoolExec(storage);
        if let Ok(rows) = points::get_many(&mut ex, d, &e, &ids).await {
            let mut by_id: HashMap<i64, Row> = rows
                .into_iter()
                .filter_map(|r| Some((r.first()?.as_i64()?, r)))
                .collect();
            let mut group = group;
            // The last reader of an id takes the row, the others a copy.
            for i in (0..group.len()).rev() {
                let j = group.swap_remove(i);
                let row = if group.iter().any(|o| o.id == j.id) {
                    by_id.get(&j.id).cloned()
                } else {
                    by_id.remove(&j.id)
                };
                let _ = j.reply.send(Ok(row));
            }
            return;
        }
    }
    let alone = group.into_iter().map(|j| async move {
        let mut ex = PoolExec(storage);
        let row = entity::get(&mut ex, d, &j.entity, j.id).await;
        let _ = j.reply.send(row);
    });
    futures::future::join_all(alone).await;
}
