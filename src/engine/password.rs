//! Password hashing with argon2id (salted, slow) on a bounded pool: at most one hash per core
//! runs at a time, on blocking threads, so guessing clients can neither take every thread nor
//! the memory of one argon2 instance per request, and bearer-token requests never wait behind
//! them. Also the password policy (minimum length).

use super::CallError;
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Semaphore;

/// Hashes running at once: one per core.
static POOL: LazyLock<Semaphore> = LazyLock::new(|| {
    Semaphore::new(
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    )
});

/// Shortest password a call may set (the `--min-password-length` setting).
static MIN_LENGTH: AtomicUsize = AtomicUsize::new(8);

/// Sets the shortest password a call may set.
pub fn set_min_length(n: usize) {
    MIN_LENGTH.store(n, Ordering::Relaxed);
}

/// The shortest password a call may set.
pub fn min_length() -> usize {
    MIN_LENGTH.load(Ordering::Relaxed)
}

/// Why a new password is refused, if it is.
pub fn policy_problem(plain: &str) -> Option<String> {
    let min = min_length();
    (plain.chars().count() < min).then(|| format!("must be at least {min} characters"))
}

/// The PHC string of a fresh salted hash of `plain`.
pub fn hash(plain: &str) -> Option<String> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>()).ok()?;
    Argon2::default()
        .hash_password(plain.as_bytes(), &salt)
        .ok()
        .map(|h| h.to_string())
}

/// Whether `plain` matches the stored PHC string.
pub fn verify(stored: &str, plain: &str) -> bool {
    PasswordHash::new(stored)
        .map(|h| {
            Argon2::default()
                .verify_password(plain.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// Whether a stored value is a PHC string this module made.
pub fn is_hash(stored: &str) -> bool {
    stored.starts_with("$argon2") && PasswordHash::new(stored).is_ok()
}

/// Runs `f` on a blocking thread once the pool has room.
async fn pooled<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let _permit = POOL.acquire().await.ok()?;
    tokio::task::spawn_blocking(|| released(f)).await.ok()
}

/// Runs `f`, then hands the memory this thread freed back to the system: an argon2 hash
/// fills 19 MiB, which the allocator would otherwise keep on this (then idle) thread, and
/// the server's resident size would stay that much higher after the first sign-in.
fn released<T>(f: impl FnOnce() -> T) -> T {
    let out = f();
    // SAFETY: `mi_collect` only frees memory no allocation holds.
    unsafe { libmimalloc_sys::mi_collect(true) };
    out
}

/// [`hash`] on the bounded pool.
pub async fn hash_async(plain: String) -> Result<String, CallError> {
    pooled(move || hash(&plain))
        .await
        .flatten()
        .ok_or(CallError::Internal)
}

/// [`hash`] on the bounded pool, from a blocking thread.
pub fn hash_blocking(plain: &str) -> Option<String> {
    let _permit = futures::executor::block_on(POOL.acquire()).ok()?;
    released(|| hash(plain))
}

/// [`verify`] on the bounded pool.
pub async fn verify_async(stored: String, plain: String) -> bool {
    pooled(move || verify(&stored, &plain))
        .await
        .unwrap_or(false)
}
