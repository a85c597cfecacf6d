//! Password hashing with argon2id (salted, slow), run off the async executor.

use crate::engine::CallError;
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

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

/// [`hash`] on the blocking pool.
pub async fn hash_async(plain: String) -> Result<String, CallError> {
    tokio::task::spawn_blocking(move || hash(&plain))
        .await
        .ok()
        .flatten()
        .ok_or(CallError::Internal)
}

/// [`verify`] on the blocking pool.
pub async fn verify_async(stored: String, plain: String) -> bool {
    tokio::task::spawn_blocking(move || verify(&stored, &plain))
        .await
        .unwrap_or(false)
}
