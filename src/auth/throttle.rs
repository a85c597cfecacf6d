//! Throttling of failed sign-ins. Failures are counted per login and client address together,
//! and per client address alone. A few failures in a window are free; past them, every further
//! failure closes that key for a time that doubles with each one (1 s, 2 s, 4 s, ... up to
//! 15 minutes).
//!
//! The throttle decides before any credential is compared, the credential cache included:
//! while a key is closed, every attempt is refused (429 with `Retry-After`) whatever its
//! password, and is not counted. Once the wait has passed, the next attempt is checked: a right
//! password signs in and forgets that login's failures; a wrong one closes the key again for
//! twice as long. A client that waits as told always gets its right password checked. An
//! admitted attempt counts as a failure (and closes its key when past the free ones) until
//! [`Throttle::succeeded`] says otherwise, so attempts arriving together while one is checked
//! are refused rather than checked in parallel.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::settings::FREE_PER_LOGIN;
/// Failures from one address (any login) before attempts are slowed, as a multiple of the
/// failures of one login.
pub const ADDRESS_FACTOR: u32 = 4;
/// A key's failures are forgotten after this long without one.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// The longest a key stays closed.
pub const MAX_WAIT: Duration = Duration::from_secs(15 * 60);
/// Keys remembered at most (old ones are dropped first).
const MAX_KEYS: usize = 100_000;

#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Login(String, Option<IpAddr>),
    Address(IpAddr),
    /// A login that signed in from this address within the window: the address's own
    /// budget does not hold it back (its login-and-address budget still does).
    Trusted(String, Option<IpAddr>),
}

struct Entry {
    failures: u32,
    last: Instant,
    closed_until: Instant,
}

/// An attempt the throttle let through to the password check.
#[derive(Debug, PartialEq, Eq)]
pub struct Admitted {
    /// When the password turns out wrong: the seconds its keys are now closed for, if this
    /// failure was past the free ones (the answer is then 429 rather than 401).
    pub wait_if_wrong: Option<u64>,
}

/// Failed sign-ins, counted in memory.
pub struct Throttle {
    entries: Mutex<HashMap<Key, Entry>>,
    free: u32,
    /// The latest time any key is closed until, in milliseconds since `epoch`: while it lies
    /// in the past no key is closed, and [`Throttle::closed`] answers without the lock.
    closed_any_until: AtomicU64,
    epoch: Instant,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new(FREE_PER_LOGIN)
    }
}

impl Throttle {
    /// A throttle that lets `free` failures of a login from one address (and `4 * free` from
    /// one address) through before slowing attempts.
    pub fn new(free: u32) -> Throttle {
        Throttle {
            entries: Mutex::new(HashMap::new()),
            free: free.max(1),
            closed_any_until: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    fn millis(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_millis() as u64
    }

    fn keys(
        &self,
        map: &HashMap<Key, Entry>,
        login: &str,
        addr: Option<IpAddr>,
        now: Instant,
    ) -> Vec<(Key, u32)> {
        let login = login.to_ascii_lowercase();
        let trusted = map
            .get(&Key::Trusted(login.clone(), addr))
            .is_some_and(|e| now.duration_since(e.last) < WINDOW);
        let mut keys = vec![(Key::Login(login, addr), self.free)];
        if let Some(a) = addr
            && !trusted
        {
            keys.push((Key::Address(a), self.free.saturating_mul(ADDRESS_FACTOR)));
        }
        keys
    }

    /// How long the keys of `keys` stay closed from `now` (zero when all are open).
    fn wait_of(map: &HashMap<Key, Entry>, keys: &[(Key, u32)], now: Instant) -> Duration {
        keys.iter()
            .filter_map(|(k, _)| map.get(k))
            .map(|e| e.closed_until.saturating_duration_since(now))
            .max()
            .unwrap_or_default()
    }

    /// The seconds to wait when a sign-in of `login` from `addr` is refused now, without
    /// counting anything. Asked before any credential is compared, the remembered ones
    /// included; free of locking while no key at all is closed.
    pub fn closed(&self, login: &str, addr: Option<IpAddr>) -> Option<u64> {
        let now = Instant::now();
        if self.closed_any_until.load(Ordering::Relaxed) <= self.millis(now) {
            return None;
        }
        let map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let keys = self.keys(&map, login, addr, now);
        let wait = Self::wait_of(&map, &keys, now);
        (!wait.is_zero()).then(|| secs(wait))
    }

    /// Counts a sign-in attempt for `login` from `addr` before its password is checked, or
    /// refuses it with the seconds to wait while one of its keys is closed. An admitted
    /// attempt counts as a failure until [`Throttle::succeeded`] says otherwise; past the free
    /// failures it closes its keys at once, so attempts arriving while it is checked wait.
    pub fn attempt(&self, login: &str, addr: Option<IpAddr>) -> Result<Admitted, u64> {
        let now = Instant::now();
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let keys = self.keys(&map, login, addr, now);
        let wait = Self::wait_of(&map, &keys, now);
        if !wait.is_zero() {
            return Err(secs(wait));
        }
        if map.len() >= MAX_KEYS {
            map.retain(|_, e| now.duration_since(e.last) < WINDOW || e.closed_until > now);
            if map.len() >= MAX_KEYS {
                map.clear();
            }
        }
        let mut wait = Duration::ZERO;
        for (k, free) in keys {
            let e = map.entry(k).or_insert(Entry {
                failures: 0,
                last: now,
                closed_until: now,
            });
            if now.duration_since(e.last) >= WINDOW {
                e.failures = 0;
            }
            e.failures += 1;
            e.last = now;
            if e.failures > free {
                let doublings = (e.failures - free - 1).min(20);
                let closed = Duration::from_secs(1 << doublings).min(MAX_WAIT);
                e.closed_until = now + closed;
                wait = wait.max(closed);
            }
        }
        if wait.is_zero() {
            return Ok(Admitted {
                wait_if_wrong: None,
            });
        }
        self.closed_any_until
            .fetch_max(self.millis(now + wait), Ordering::Relaxed);
        Ok(Admitted {
            wait_if_wrong: Some(secs(wait)),
        })
    }

    /// The attempt turned out wrong after all: logged when it closed its keys.
    pub fn failed(&self, login: &str, addr: Option<IpAddr>, admitted: &Admitted) {
        if let Some(wait_secs) = admitted.wait_if_wrong {
            tracing::warn!(
                login,
                client = ?addr,
                wait_secs,
                "too many failed sign-ins: further attempts wait"
            );
        }
    }

    /// The attempt's password was right: its login-and-address failures are forgotten, and
    /// the address is neither charged nor closed for it.
    pub fn succeeded(&self, login: &str, addr: Option<IpAddr>) {
        let now = Instant::now();
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&Key::Login(login.to_ascii_lowercase(), addr));
        map.insert(
            Key::Trusted(login.to_ascii_lowercase(), addr),
            Entry {
                failures: 0,
                last: now,
                closed_until: now,
            },
        );
        if let Some(a) = addr
            && let Some(e) = map.get_mut(&Key::Address(a))
        {
            e.failures = e.failures.saturating_sub(1);
            if e.failures <= self.free.saturating_mul(ADDRESS_FACTOR) {
                e.closed_until = e.closed_until.min(now);
            }
        }
    }
}

fn secs(d: Duration) -> u64 {
    d.as_secs_f64().ceil().max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: Admitted = Admitted {
        wait_if_wrong: None,
    };

    fn past_free(secs: u64) -> Result<Admitted, u64> {
        Ok(Admitted {
            wait_if_wrong: Some(secs),
        })
    }

    /// Pretends every wait is over.
    fn reopen(t: &Throttle) {
        for e in t.entries.lock().unwrap().values_mut() {
            e.closed_until = Instant::now();
        }
    }

    #[test]
    fn free_attempts_then_growing_waits_per_login_and_address() {
        let t = Throttle::default();
        let a: Option<IpAddr> = Some("10.0.0.1".parse().unwrap());
        let b: Option<IpAddr> = Some("10.0.0.2".parse().unwrap());
        for _ in 0..FREE_PER_LOGIN {
            assert_eq!(t.attempt("admin", a), Ok(FREE));
        }
        assert_eq!(t.attempt("admin", a), past_free(1), "checked, and closes");
        assert_eq!(t.closed("Admin", a), Some(1), "logins compare without case");
        assert!(t.attempt("Admin", a).is_err());
        // Another address, and another login from the same address, are not affected.
        assert_eq!(t.closed("admin", b), None);
        assert_eq!(t.attempt("admin", b), Ok(FREE));
        assert_eq!(t.attempt("alice", a), Ok(FREE));
        t.succeeded("admin", a);
        assert_eq!(t.closed("admin", a), None);
        assert_eq!(t.attempt("admin", a), Ok(FREE));
    }

    #[test]
    fn once_the_wait_is_over_the_next_attempt_is_checked_and_the_wait_doubles() {
        let t = Throttle::default();
        let a: Option<IpAddr> = Some("10.0.0.5".parse().unwrap());
        for _ in 0..FREE_PER_LOGIN {
            t.attempt("bob", a).unwrap();
        }
        assert_eq!(t.attempt("bob", a), past_free(1));
        // Attempts while closed are refused and not counted.
        for _ in 0..10 {
            assert_eq!(t.attempt("bob", a), Err(1));
        }
        reopen(&t);
        assert_eq!(t.closed("bob", a), None);
        assert_eq!(t.attempt("bob", a), past_free(2));
        reopen(&t);
        assert_eq!(t.attempt("bob", a), past_free(4));
        // This one was right: bob is free again.
        t.succeeded("bob", a);
        assert_eq!(t.closed("bob", a), None);
        assert_eq!(t.attempt("bob", a), Ok(FREE));
    }

    #[test]
    fn an_address_guessing_many_logins_is_slowed() {
        let t = Throttle::default();
        let a: Option<IpAddr> = Some("10.0.0.9".parse().unwrap());
        for i in 0..FREE_PER_LOGIN * ADDRESS_FACTOR {
            assert_eq!(t.attempt(&format!("user{i}"), a), Ok(FREE));
        }
        assert_eq!(t.attempt("someone", a), past_free(1));
        assert!(t.attempt("anyone", a).is_err());
        assert_eq!(
            t.attempt("anyone", Some("10.0.0.10".parse().unwrap())),
            Ok(FREE)
        );
    }

    #[test]
    fn a_right_password_past_the_address_budget_does_not_close_the_address() {
        let t = Throttle::default();
        let a: Option<IpAddr> = Some("10.0.0.30".parse().unwrap());
        for i in 0..FREE_PER_LOGIN * ADDRESS_FACTOR {
            t.attempt(&format!("user{i}"), a).unwrap();
        }
        assert_eq!(t.attempt("erin", a), past_free(1));
        t.succeeded("erin", a);
        assert_eq!(t.closed("frank", a), None);
    }

    #[test]
    fn a_login_that_signed_in_from_an_address_keeps_working_there() {
        let t = Throttle::default();
        let a: Option<IpAddr> = Some("10.0.0.20".parse().unwrap());
        t.attempt("carol", a).unwrap();
        t.succeeded("carol", a);
        for i in 0..FREE_PER_LOGIN * ADDRESS_FACTOR + 5 {
            let _ = t.attempt(&format!("sprayed{i}"), a);
        }
        assert!(t.attempt("dave", a).is_err(), "the address is closed");
        assert_eq!(t.attempt("carol", a), Ok(FREE), "but not for carol");
    }
}
