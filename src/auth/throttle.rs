//! Throttling of failed sign-ins. Failures are counted per login and client address together,
//! and per client address alone. A few failures in a window are free; past them, every further
//! failure closes that key for a time that doubles with each one (1 s, 2 s, 4 s, ... up to
//! 15 minutes), and attempts while it is closed are refused without a password check (429 with
//! `Retry-After`). A sign-in with the right password resets its login-and-address key, so the
//! real user is never locked out by someone guessing from another address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
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

/// Failed sign-ins, counted in memory.
pub struct Throttle {
    entries: Mutex<HashMap<Key, Entry>>,
    free: u32,
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
        }
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

    /// Counts a sign-in attempt for `login` from `addr` before its password is checked, or
    /// refuses it with the seconds to wait. Every attempt counts as a failure until
    /// [`Throttle::succeeded`] says otherwise, so no more than the free failures of a key are
    /// ever checked, however many arrive at once.
    pub fn attempt(&self, login: &str, addr: Option<IpAddr>) -> Result<(), u64> {
        let now = Instant::now();
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let keys = self.keys(&map, login, addr, now);
        let wait = keys
            .iter()
            .filter_map(|(k, _)| map.get(k))
            .map(|e| e.closed_until.saturating_duration_since(now))
            .max()
            .unwrap_or_default();
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
            return Ok(());
        }
        tracing::warn!(
            login,
            client = ?addr,
            wait_secs = secs(wait),
            "too many failed sign-ins: further attempts wait"
        );
        Err(secs(wait))
    }

    /// The attempt's password was right: its login-and-address failures are forgotten, and
    /// the address is not charged for it.
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
        }
    }
}

fn secs(d: Duration) -> u64 {
    d.as_secs_f64().ceil().max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_attempts_then_growing_waits_per_login_and_address() {
        let t = Throttle::default();
        let a: Option<IpAddr> = Some("10.0.0.1".parse().unwrap());
        let b: Option<IpAddr> = Some("10.0.0.2".parse().unwrap());
        for _ in 0..FREE_PER_LOGIN {
            assert_eq!(t.attempt("admin", a), Ok(()));
        }
        assert_eq!(t.attempt("admin", a), Err(1));
        assert!(
            t.attempt("Admin", a).is_err(),
            "logins compare without case"
        );
        // Another address, and another login from the same address, are not affected.
        assert_eq!(t.attempt("admin", b), Ok(()));
        assert_eq!(t.attempt("alice", a), Ok(()));
        t.succeeded("admin", a);
        assert_eq!(t.attempt("admin", a), Ok(()));
    }

    #[test]
    fn the_wait_doubles_with_each_failure_past_the_free_ones() {
        let t = Throttle::default();
        let a: Option<IpAddr> = Some("10.0.0.5".parse().unwrap());
        for _ in 0..FREE_PER_LOGIN {
            t.attempt("bob", a).unwrap();
        }
        assert_eq!(t.attempt("bob", a), Err(1));
        // Pretend the wait is over.
        let reopen = |t: &Throttle| {
            for e in t.entries.lock().unwrap().values_mut() {
                e.closed_until = Instant::now();
            }
        };
        reopen(&t);
        assert_eq!(t.attempt("bob", a), Err(2));
        reopen(&t);
        assert_eq!(t.attempt("bob", a), Err(4));
    }

    #[test]
    fn an_address_guessing_many_logins_is_slowed() {
        let t = Throttle::default();
        let a: Option<IpAddr> = Some("10.0.0.9".parse().unwrap());
        for i in 0..FREE_PER_LOGIN * ADDRESS_FACTOR {
            assert_eq!(t.attempt(&format!("user{i}"), a), Ok(()));
        }
        assert!(t.attempt("someone", a).is_err());
        assert!(t.attempt("anyone", a).is_err());
        assert!(
            t.attempt("anyone", Some("10.0.0.10".parse().unwrap()))
                .is_ok()
        );
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
        assert_eq!(t.attempt("carol", a), Ok(()), "but not for carol");
    }
}
