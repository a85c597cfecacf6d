//! Retrying work that lost to another writer. A unit of work (a call, a chunk of a batch or
//! an upload, a group commit) runs in one transaction; when it fails with contention
//! ([`StorageError::contention`]) the transaction is rolled back and the whole unit runs
//! again after a short, growing, randomised pause. Attempts are bounded; each retry is
//! logged (`warn`, with the attempt and the error class) and counted
//! ([`crate::storage::contention::counts`]).

use crate::storage::StorageError;
use crate::storage::contention;
use std::time::Duration;

/// Most attempts of one unit of work.
pub const MAX_ATTEMPTS: u32 = 10;
/// The pause before the second attempt (before jitter); it doubles with each attempt.
const BASE: Duration = Duration::from_millis(5);
/// The longest pause between two attempts.
const CAP: Duration = Duration::from_millis(1000);

/// The attempts of one unit of work.
pub struct Retry {
    what: &'static str,
    attempt: u32,
}

impl Retry {
    /// The first attempt at `what` (named in logs).
    pub fn new(what: &'static str) -> Retry {
        Retry { what, attempt: 1 }
    }

    /// The attempt now running, from 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// After the attempt failed with `e` (and its transaction was rolled back): true, after
    /// pausing, when the work should run again; false when `e` is not contention or no
    /// attempt is left.
    pub async fn again(&mut self, e: &StorageError) -> bool {
        let Some(class) = e.contention() else {
            return false;
        };
        if self.attempt >= MAX_ATTEMPTS {
            contention::count_gave_up();
            tracing::error!(
                what = self.what,
                attempt = self.attempt,
                class = %class,
                "still contended after the last attempt; giving up"
            );
            return false;
        }
        contention::count_retry(class);
        let pause = pause(self.attempt);
        tracing::warn!(
            what = self.what,
            attempt = self.attempt,
            class = %class,
            pause_ms = pause.as_millis() as u64,
            "lost to another writer; retrying"
        );
        tokio::time::sleep(pause).await;
        self.attempt += 1;
        true
    }
}

/// The pause after failed attempt `attempt`: exponential with "equal jitter" (half fixed,
/// half random), so that writers that collided do not collide again in step.
fn pause(attempt: u32) -> Duration {
    let full = BASE.saturating_mul(1u32 << (attempt - 1).min(16)).min(CAP);
    let half = full / 2;
    half + half.mul_f64(rand::random::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::contention::Class;

    fn contended() -> StorageError {
        StorageError::Contention {
            class: Class::Deadlock,
            message: "deadlock detected".into(),
        }
    }

    #[test]
    fn pauses_grow_and_stay_bounded() {
        for a in 1..20 {
            let p = pause(a);
            let full = BASE.saturating_mul(1 << (a - 1).min(16)).min(CAP);
            assert!(p >= full / 2 && p <= full, "attempt {a}: {p:?}");
        }
        assert!(pause(30) <= CAP);
    }

    #[tokio::test]
    async fn retries_contention_only_and_only_so_often() {
        let mut r = Retry::new("test");
        assert!(!r.again(&StorageError::Database("broken".into())).await);
        assert_eq!(r.attempt(), 1);
        let before = contention::counts();
        let mut n = 1;
        while r.again(&contended()).await {
            n += 1;
        }
        assert_eq!(n, MAX_ATTEMPTS);
        let after = contention::counts();
        assert!(after.deadlock_retries >= before.deadlock_retries + u64::from(MAX_ATTEMPTS - 1));
        assert!(after.gave_up > before.gave_up);
    }
}
