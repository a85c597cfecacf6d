//! Whole requests: a dry run (`dry_run`: every call is checked and executed as for real in
//! one transaction, which is then rolled back) and all or nothing (`atomic`: one transaction
//! that commits only when every call succeeded). The same [`Mode`] travels with a batch, a
//! backgrounded call and an upload, and the same wording settles their outcomes: a would-be
//! creation has no id, and when an all-or-nothing request failed, every call that did not
//! fail says it was not applied because the first failing one failed.

use super::prepare::Prepared;
use super::retry::Retry;
use super::{Call, CallError, Caller, Engine, Op, Outcome, internal};
use serde_json::Value as Json;

/// How a request applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mode {
    /// Run everything, then roll it all back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Apply everything in one transaction, or nothing when any call fails.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub atomic: bool,
}

impl Mode {
    /// The mode stored in a request's parameters (absent flags are off).
    pub fn of(params: &Json) -> Mode {
        Mode {
            dry_run: params.get("dry_run").and_then(Json::as_bool) == Some(true),
            atomic: params.get("atomic").and_then(Json::as_bool) == Some(true),
        }
    }

    /// Whether the request runs in one transaction.
    pub fn whole(self) -> bool {
        self.dry_run || self.atomic
    }

    /// Whether a whole run commits, given whether any of its calls failed.
    pub fn applies(self, any_failed: bool) -> bool {
        !(self.dry_run || (self.atomic && any_failed))
    }

    /// Adds the flags that are on to a request's stored parameters.
    pub fn store_in(self, params: &mut serde_json::Map<String, Json>) {
        if self.dry_run {
            params.insert("dry_run".into(), Json::Bool(true));
        }
        if self.atomic {
            params.insert("atomic".into(), Json::Bool(true));
        }
    }
}

/// A dry run's outcome of a create: the object as it would be, without the id it would get.
pub fn unborn(o: &mut Outcome) {
    match o {
        Ok(Json::Object(m)) => {
            m.insert("id".into(), Json::Null);
        }
        // A row of a group of creates, which has its id alone (see `outcome_id`).
        Ok(id @ Json::Number(_)) => *id = Json::Null,
        _ => {}
    }
}

/// The outcome of a call that succeeded but was not applied because `failed` (`line 7`,
/// `item 3`) failed in an all-or-nothing request.
pub fn not_applied(failed: &str) -> CallError {
    CallError::NotApplied {
        failed: failed.to_string(),
    }
}

/// Settles the outcomes of a whole run of calls (`ops`: each call's operation, None for one
/// that never became a call); `unit` names a position (`item`). Returns the 1-based position
/// of the first failure.
pub fn settle(
    mode: Mode,
    ops: &[Option<Op>],
    outcomes: &mut [Outcome],
    unit: &str,
) -> Option<usize> {
    let first = outcomes.iter().position(|o| o.is_err()).map(|i| i + 1);
    match first {
        Some(n) if mode.atomic => {
            let why = not_applied(&format!("{unit} {n}"));
            for o in outcomes.iter_mut().filter(|o| o.is_ok()) {
                *o = Err(why.clone());
            }
        }
        _ if mode.dry_run => {
            for (o, op) in outcomes.iter_mut().zip(ops) {
                if *op == Some(Op::Create) {
                    unborn(o);
                }
            }
        }
        _ => {}
    }
    first
}

impl Engine {
    /// Hides the id of what a dry run's call `p` would create: every create, and a save that
    /// found no object. The dry run's transaction is never committed, so an object a save made
    /// in it is not seen from outside it (whether that transaction is still open or already
    /// rolled back), while an object it updated is.
    pub async fn unborn_in_dry_run(&self, p: &Prepared, o: &mut Outcome) {
        let made = match (p.op, &*o) {
            (Op::Create, _) => true,
            (Op::Save, Ok(obj)) => match super::outcome_id(obj) {
                Some(id) => {
                    let mut pool = crate::storage::PoolExec(self.storage.as_ref());
                    let d = self.storage.dialect();
                    !crate::storage::entity::exists(&mut pool, d, &p.entity.name, id)
                        .await
                        .unwrap_or(true)
                }
                None => false,
            },
            _ => false,
        };
        if made {
            unborn(o);
        }
    }

    /// Runs one call in a transaction that is rolled back: its outcome as if it had run, a
    /// created object without an id.
    pub async fn dry_call(&self, caller: &Caller, call: &Call) -> Outcome {
        let catalog = self.catalog.load();
        let prepared = super::prepare::prepare(self, &catalog, caller, call).await?;
        let mut retry = Retry::new("dry run");
        let mut outcome = loop {
            let attempt = async {
                let mut tx = self.storage.begin().await?;
                let o = super::exec::execute(
                    self,
                    tx.as_mut(),
                    caller,
                    &prepared,
                    false,
                    super::changes::NO_REQUEST,
                )
                .await;
                let _ = tx.rollback().await;
                o
            }
            .await;
            match attempt {
                Ok(o) => break o,
                Err(e) if retry.again(&e).await => continue,
                Err(e) => return Err(internal(e)),
            }
        };
        self.unborn_in_dry_run(&prepared, &mut outcome).await;
        outcome
    }

    /// Runs a whole batch in one transaction, `chunk` calls at a time: rolled back for a dry
    /// run or when an all-or-nothing batch had a failure, committed otherwise. The outcomes
    /// are settled (see [`settle`]).
    pub async fn run_whole(
        &self,
        caller: &Caller,
        calls: Vec<Result<Call, CallError>>,
        chunk: usize,
        mode: Mode,
    ) -> Vec<Outcome> {
        let n = calls.len();
        let ops: Vec<Option<Op>> = calls
            .iter()
            .map(|c| c.as_ref().ok().map(|c| c.op))
            .collect();
        let prepared = self.prepare_chunk(caller, calls).await;
        let mut retry = Retry::new("whole batch");
        let mut outcomes = loop {
            match self.try_whole(caller, &prepared, chunk, mode).await {
                Ok(o) => break o,
                Err(e) if retry.again(&e).await => continue,
                Err(e) => return vec![Err(internal(e)); n],
            }
        };
        settle(mode, &ops, &mut outcomes, "item");
        if mode.dry_run {
            for (p, o) in prepared.iter().zip(outcomes.iter_mut()) {
                if let Ok(p) = p
                    && p.op == Op::Save
                {
                    self.unborn_in_dry_run(p, o).await;
                }
            }
        }
        outcomes
    }

    /// One attempt at [`Engine::run_whole`].
    async fn try_whole(
        &self,
        caller: &Caller,
        prepared: &[Result<Prepared, CallError>],
        chunk: usize,
        mode: Mode,
    ) -> Result<Vec<Outcome>, crate::storage::StorageError> {
        let mut tx = self.storage.begin().await?;
        let mut out = Vec::with_capacity(prepared.len());
        for part in prepared.chunks(chunk.max(1)) {
            match self
                .execute_chunk(tx.as_mut(), caller, part, true, None)
                .await
            {
                Ok(o) => out.extend(o),
                Err(e) => {
                    let _ = tx.rollback().await;
                    return Err(e);
                }
            }
        }
        if mode.applies(out.iter().any(|o| o.is_err())) {
            tx.commit().await?;
            self.after_chunk(prepared, &out);
        } else {
            tx.rollback().await?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_atomic_failure_words_every_other_outcome() {
        let mode = Mode {
            dry_run: false,
            atomic: true,
        };
        let ops = [Some(Op::Create); 3];
        let mut o: Vec<Outcome> = vec![
            Ok(json!({"id": 1})),
            Err(CallError::Conflict { field: None }),
            Ok(json!({"id": 3})),
        ];
        assert_eq!(settle(mode, &ops, &mut o, "item"), Some(2));
        assert_eq!(o[0], Err(not_applied("item 2")));
        assert_eq!(o[1], Err(CallError::Conflict { field: None }));
        assert_eq!(o[2], Err(not_applied("item 2")));
        assert!(
            not_applied("item 2")
                .description()
                .contains("item 2 failed")
        );
    }

    #[test]
    fn a_dry_run_creates_nothing_with_an_id() {
        let mode = Mode {
            dry_run: true,
            atomic: false,
        };
        let ops = [Some(Op::Create), Some(Op::Update)];
        let mut o: Vec<Outcome> = vec![Ok(json!({"id": 9})), Ok(json!({"id": 4}))];
        assert_eq!(settle(mode, &ops, &mut o, "item"), None);
        assert_eq!(o[0], Ok(json!({"id": null})));
        assert_eq!(o[1], Ok(json!({"id": 4})));
        assert!(!mode.applies(false));
        assert!(
            Mode {
                dry_run: false,
                atomic: true
            }
            .applies(false)
        );
        assert!(
            !Mode {
                dry_run: false,
                atomic: true
            }
            .applies(true)
        );
        assert!(Mode::default().applies(true));
    }
}
