//! What chunks applied (users changed, changes per entity and operation), kept for the
//! listeners told once a chunk's transaction commits.

use crate::engine::prepare::Prepared;
use crate::engine::{CallError, Op, Outcome};

/// What chunks applied, kept from when they ran until their transaction commits (see
/// [`Engine::announce`]): far smaller than the chunks themselves.
#[derive(Debug, Default)]
pub struct Applied {
    /// The users changed, by id.
    pub(super) users: Vec<i64>,
    /// Changes applied per entity and operation (a few pairs at most).
    pub(super) counts: Vec<(String, Op, u64)>,
}

impl Applied {
    /// What the calls of a chunk that ran with `outcomes` applied.
    pub fn of(prepared: &[Result<Prepared, CallError>], outcomes: &[Outcome]) -> Applied {
        let mut applied = Applied::default();
        // Consecutive calls of the same entity and operation (a chunk is mostly one run) are
        // counted once per run.
        let mut run: Option<((&str, Op), u64)> = None;
        for (p, o) in prepared.iter().zip(outcomes) {
            if let (Ok(p), Ok(obj)) = (p, o) {
                if let Some(id) = crate::engine::changed_user(p, obj) {
                    applied.users.push(id);
                }
                let key = (p.entity.name.as_str(), p.op);
                match &mut run {
                    Some((k, n)) if *k == key => *n += 1,
                    _ => {
                        if let Some((k, n)) = run.replace((key, 1)) {
                            applied.add(k, n);
                        }
                    }
                }
            }
        }
        if let Some((k, n)) = run {
            applied.add(k, n);
        }
        applied
    }

    fn add(&mut self, (entity, op): (&str, Op), n: u64) {
        match self
            .counts
            .iter_mut()
            .find(|(e, o, _)| e == entity && *o == op)
        {
            Some((_, _, c)) => *c += n,
            None => self.counts.push((entity.to_string(), op, n)),
        }
    }

    /// Adds what another chunk applied.
    pub fn merge(&mut self, other: Applied) {
        self.users.extend(other.users);
        for (entity, op, n) in other.counts {
            self.add((&entity, op), n);
        }
    }
}
