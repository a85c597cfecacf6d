//! Verified credentials, remembered for a short time so that HTTP Basic on every request does
//! not cost an argon2 hash per request. Entries are keyed by an HMAC of the credentials under
//! a per-process random key (the cache never holds a password), live [`TTL`], and are dropped
//! as soon as the user's record changes. Each change of a user also moves a generation counter,
//! so that a check that read the user before the change cannot put a stale entry back after it.

use crate::engine::Caller;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a verified credential is trusted without checking the database again.
pub const TTL: Duration = Duration::from_secs(60);
const MAX_ENTRIES: usize = 100_000;

pub type Digest = [u8; 32];

pub struct CredentialCache {
    /// The HMAC keyed with a per-process random key, copied for each digest (keying it again
    /// would cost two more hash blocks a digest).
    keyed: Hmac<Sha256>,
    /// Keyed by digests, which the per-process key makes unpredictable: a fast hasher is
    /// enough (no one can choose credentials whose digests collide).
    entries: Mutex<HashMap<Digest, (Caller, Instant), foldhash::fast::RandomState>>,
    /// Per user: the global generation at that user's last change.
    changed: Mutex<HashMap<i64, u64>>,
    generation: std::sync::atomic::AtomicU64,
}

impl Default for CredentialCache {
    fn default() -> Self {
        CredentialCache {
            keyed: Hmac::<Sha256>::new_from_slice(&rand::random::<[u8; 32]>())
                .expect("any key length"),
            entries: Mutex::new(HashMap::default()),
            changed: Mutex::new(HashMap::new()),
            generation: std::sync::atomic::AtomicU64::new(1),
        }
    }
}

impl CredentialCache {
    /// The keyed digest of a credential (`kind` separates Basic pairs from tokens).
    pub fn digest(&self, kind: &str, secret: &[&str]) -> Digest {
        let mut mac = self.keyed.clone();
        mac.update(kind.as_bytes());
        for s in secret {
            mac.update(&(s.len() as u64).to_le_bytes());
            mac.update(s.as_bytes());
        }
        mac.finalize().into_bytes().into()
    }

    pub fn get(&self, d: &Digest) -> Option<Caller> {
        let map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(d) {
            Some((c, until)) if *until > Instant::now() => Some(c.clone()),
            _ => None,
        }
    }

    /// The current generation, taken before a credential is looked up.
    pub fn generation_now(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Remembers `caller` for at most `ttl` (capped at [`TTL`]), unless the user changed after
    /// generation `seen` (when the check began).
    pub fn put(&self, d: Digest, caller: Caller, ttl: Duration, seen: u64) {
        let changed = self.changed.lock().unwrap_or_else(|p| p.into_inner());
        if changed.get(&caller.id).is_some_and(|g| *g >= seen) {
            return;
        }
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_ENTRIES {
            let now = Instant::now();
            map.retain(|_, (_, until)| *until > now);
            if map.len() >= MAX_ENTRIES {
                map.clear();
            }
        }
        map.insert(d, (caller, Instant::now() + ttl.min(TTL)));
    }

    /// Drops every entry of a user (password, role or record changed).
    pub fn forget_user(&self, user_id: i64) {
        let mut changed = self.changed.lock().unwrap_or_else(|p| p.into_inner());
        let g = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if changed.len() >= MAX_ENTRIES {
            changed.clear();
        }
        changed.insert(user_id, g);
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, (c, _)| c.id != user_id);
    }

    /// Drops one entry (a revoked token).
    pub fn forget(&self, d: &Digest) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(d);
    }
}
