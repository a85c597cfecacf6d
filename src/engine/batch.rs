//! Batches: JSON array items become calls, and calls run in chunks, many per transaction.
//! On PostgreSQL each call runs in a savepoint so a failing one leaves the others; on SQLite
//! a failing statement undoes only itself, so no savepoint is needed.

use super::prepare::{self, Prepared};
use super::{Call, CallError, Caller, Engine, Op, Outcome, exec};
use crate::storage::{Dialect, StorageError, Tx};
use serde_json::{Map, Value as Json};

/// Most rows in one multi-row INSERT.
const GROUP_ROWS: usize = 500;

/// The call a batch item stands for, or why it stands for none.
pub fn item_call(entity: &str, op: Op, item: &Json) -> Result<Call, CallError> {
    let id_of = |v: &Json| -> Option<i64> {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    };
    match (op, item) {
        (Op::Create, Json::Object(m)) => Ok(Call {
            entity: entity.to_string(),
            op,
            id: None,
            params: m.clone(),
            prehashed: false,
        }),
        (Op::Update, Json::Object(m)) => {
            let id = m.get("id").and_then(id_of).ok_or_else(|| {
                CallError::invalid_field("id", "each item of a PUT batch needs an integer `id`")
            })?;
            let mut params = m.clone();
            params.remove("id");
            Ok(Call {
                entity: entity.to_string(),
                op,
                id: Some(id),
                params,
                prehashed: false,
            })
        }
        (Op::Delete, Json::Object(m)) => {
            let id = m.get("id").and_then(id_of).ok_or_else(|| {
                CallError::invalid_field("id", "each item of a DELETE batch needs an integer `id`")
            })?;
            Ok(Call {
                entity: entity.to_string(),
                op,
                id: Some(id),
                params: Map::new(),
                prehashed: false,
            })
        }
        (Op::Delete, v) => match id_of(v) {
            Some(id) => Ok(Call {
                entity: entity.to_string(),
                op,
                id: Some(id),
                params: Map::new(),
                prehashed: false,
            }),
            None => Err(CallError::invalid_field(
                "id",
                "a DELETE batch item is an id or an object with `id`",
            )),
        },
        _ => Err(CallError::Invalid {
            description: "a batch item must be a JSON object".into(),
            fields: Default::default(),
        }),
    }
}

impl Engine {
    /// Runs `calls` in order inside `tx` and returns one outcome per call, and the prepared
    /// calls that changed users. Consecutive creates of the same shape share one multi-row
    /// INSERT. An `Err` means the database failed and the transaction must be rolled back.
    pub async fn run_chunk(
        &self,
        tx: &mut dyn Tx,
        caller: &Caller,
        calls: Vec<Result<Call, CallError>>,
        full: bool,
    ) -> Result<(Vec<Outcome>, Vec<Prepared>), StorageError> {
        let catalog = self.catalog.load();
        let isolate = self.storage.dialect() == Dialect::Postgres;
        let now = crate::time::now();
        let mut prepared = Vec::with_capacity(calls.len());
        for call in calls {
            prepared.push(match call {
                Ok(c) => prepare::prepare_at(&catalog, caller, c, &now).await,
                Err(e) => Err(e),
            });
        }
        let n = prepared.len();
        let mut outcomes: Vec<Option<Outcome>> = vec![None; n];
        let mut i = 0;
        while i < n {
            let p = match &prepared[i] {
                Err(e) => {
                    outcomes[i] = Some(Err(e.clone()));
                    i += 1;
                    continue;
                }
                Ok(p) => p,
            };
            let max = (30_000 / p.values.len().max(1)).clamp(1, GROUP_ROWS);
            let mut j = i + 1;
            while j < n && j - i < max && matches!(&prepared[j], Ok(q) if exec::same_shape(p, q)) {
                j += 1;
            }
            if j - i >= 2 {
                let group: Vec<&Prepared> = prepared[i..j]
                    .iter()
                    .filter_map(|r| r.as_ref().ok())
                    .collect();
                if let Some(objs) = exec::insert_group(self, tx, &group, isolate, full).await? {
                    for (k, o) in objs.into_iter().enumerate() {
                        outcomes[i + k] = Some(Ok(o));
                    }
                    i = j;
                    continue;
                }
            } else {
                j = i + 1;
            }
            // One at a time: a single call, or a group in which some row failed.
            for k in i..j {
                if let Ok(p) = &prepared[k] {
                    outcomes[k] = Some(exec::execute(self, tx, caller, p, isolate).await?);
                }
            }
            i = j;
        }
        let outcomes: Vec<Outcome> = outcomes
            .into_iter()
            .map(|o| o.unwrap_or(Err(CallError::Internal)))
            .collect();
        let changed = prepared
            .into_iter()
            .zip(&outcomes)
            .filter_map(|(p, o)| match (p, o) {
                (Ok(p), Ok(_)) if p.entity.name == "users" => Some(p),
                _ => None,
            })
            .collect();
        Ok((outcomes, changed))
    }

    /// Runs a whole batch synchronously, in chunks of `chunk` calls per transaction.
    pub async fn run_batch(
        &self,
        caller: &Caller,
        calls: Vec<Result<Call, CallError>>,
        chunk: usize,
    ) -> Vec<Outcome> {
        let mut out = Vec::with_capacity(calls.len());
        let mut rest = calls.into_iter().peekable();
        while rest.peek().is_some() {
            let part: Vec<_> = rest.by_ref().take(chunk.max(1)).collect();
            let n = part.len();
            let result = match self.storage.begin().await {
                Ok(mut tx) => match self.run_chunk(tx.as_mut(), caller, part, true).await {
                    Ok((o, changed)) => match tx.commit().await {
                        Ok(()) => {
                            for p in &changed {
                                self.after(p);
                            }
                            Ok(o)
                        }
                        Err(e) => Err(e),
                    },
                    Err(e) => {
                        let _ = tx.rollback().await;
                        Err(e)
                    }
                },
                Err(e) => Err(e),
            };
            match result {
                Ok(o) => out.extend(o),
                Err(e) => {
                    let err = super::internal(e);
                    out.extend(std::iter::repeat_n(Err(err), n));
                }
            }
        }
        out
    }
}
