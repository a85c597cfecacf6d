//! Authentication: HTTP Basic and bearer tokens resolve to a [`Caller`]; tokens are issued by
//! login and stored only as SHA-256 digests, each tagged with the password hash and role it was
//! issued under, so that changing either (or deleting the user) ends it at once; failed
//! sign-ins are throttled; the first start creates the admin user.

pub mod cache;
pub mod throttle;

use crate::engine::{Call, Caller, Engine, Op, password};
use crate::schema::Role;
use crate::storage::Storage;
use crate::storage::auth::{self as store, UserRow};
use base64::Engine as _;
use cache::CredentialCache;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// Why a credential was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("credentials are required")]
    Missing,
    #[error("wrong login or password")]
    BadPassword,
    #[error("the token is unknown or expired")]
    BadToken,
    #[error("the credential store is unavailable")]
    Unavailable,
    /// Too many failed sign-ins: retry after this many seconds.
    #[error("too many failed sign-ins")]
    Throttled(u64),
}

pub struct Auth {
    storage: Arc<dyn Storage>,
    pub cache: CredentialCache,
    pub throttle: throttle::Throttle,
    /// The password checks under way, by the digest of their login and password: the same
    /// credentials arriving together wait for one check instead of each counting as an attempt.
    checking: std::sync::Mutex<HashMap<cache::Digest, Arc<tokio::sync::Mutex<()>>>>,
}

/// A newly issued token.
pub struct Token {
    pub token: String,
    pub expires_dt: String,
}

impl Auth {
    /// Authentication over `storage`; `free_failures` failed sign-ins of a login from one
    /// address pass before attempts are throttled.
    pub fn new(storage: Arc<dyn Storage>, free_failures: u32) -> Auth {
        Auth {
            storage,
            cache: CredentialCache::default(),
            throttle: throttle::Throttle::new(free_failures),
            checking: Default::default(),
        }
    }

    /// Checks a login and password from a client at `addr`. The throttle decides first: while
    /// failures from there close the login, every attempt is refused whatever its password.
    /// Otherwise a remembered credential passes at once, and anything else is checked against
    /// the stored hash as one counted attempt.
    pub async fn basic(
        &self,
        login: &str,
        password: &str,
        addr: Option<IpAddr>,
    ) -> Result<Caller, AuthError> {
        if let Some(secs) = self.throttle.closed(login, addr) {
            tracing::debug!(login, client = ?addr, retry_after = secs, "sign-in throttled");
            return Err(AuthError::Throttled(secs));
        }
        let key = self.cache.digest("basic", &[login, password]);
        if let Some(c) = self.cache.get(&key) {
            return Ok(c);
        }
        // Requests with the same credentials take turns: the first checks them, and the
        // others find the result remembered (a client with many connections open counts one
        // attempt, not one per connection, which the throttle would refuse as failures).
        let gate = {
            let mut checking = self.checking.lock().unwrap_or_else(|p| p.into_inner());
            checking.entry(key).or_default().clone()
        };
        let turn = gate.lock().await;
        let checked = match self.cache.get(&key) {
            Some(c) => Ok(c),
            None => self.check_basic(login, password, addr, key).await,
        };
        drop(turn);
        let mut checking = self.checking.lock().unwrap_or_else(|p| p.into_inner());
        // Only the map and this request hold the gate: nobody else waits on it.
        if Arc::strong_count(&gate) <= 2 {
            checking.remove(&key);
        }
        checked
    }

    /// One sign-in attempt, counted by the throttle, against the stored hash.
    async fn check_basic(
        &self,
        login: &str,
        password: &str,
        addr: Option<IpAddr>,
        key: cache::Digest,
    ) -> Result<Caller, AuthError> {
        let admitted = match self.throttle.attempt(login, addr) {
            Ok(admitted) => admitted,
            Err(secs) => {
                tracing::debug!(login, client = ?addr, retry_after = secs, "sign-in throttled");
                return Err(AuthError::Throttled(secs));
            }
        };
        match self.check_password(login, password, key).await {
            Ok(caller) => {
                self.throttle.succeeded(login, addr);
                Ok(caller)
            }
            Err(AuthError::BadPassword) => {
                self.throttle.failed(login, addr, &admitted);
                // Past the free failures, a wrong password is told when to try again.
                Err(match admitted.wait_if_wrong {
                    Some(secs) => AuthError::Throttled(secs),
                    None => AuthError::BadPassword,
                })
            }
            Err(e) => Err(e),
        }
    }

    async fn check_password(
        &self,
        login: &str,
        password: &str,
        key: cache::Digest,
    ) -> Result<Caller, AuthError> {
        let generation = self.cache.generation_now();
        let user = store::user_by_login(self.storage.as_ref(), login)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "user lookup failed");
                AuthError::Unavailable
            })?;
        let Some(user) = user else {
            // Spend the same time as a real check, so logins cannot be probed by timing.
            password::verify_async(DUMMY_HASH.to_string(), password.to_string()).await;
            return Err(AuthError::BadPassword);
        };
        let caller = caller_of(&user);
        let Some(stored) = user.password else {
            return Err(AuthError::BadPassword);
        };
        if !password::verify_async(stored, password.to_string()).await {
            return Err(AuthError::BadPassword);
        }
        self.cache.put(key, caller.clone(), cache::TTL, generation);
        Ok(caller)
    }

    /// Parses an `Authorization: Basic ...` value and checks it.
    pub async fn basic_header(
        &self,
        encoded: &str,
        addr: Option<IpAddr>,
    ) -> Result<Caller, AuthError> {
        let b64 = &base64::engine::general_purpose::STANDARD;
        let encoded = encoded.trim();
        // Decoded on the stack when it fits (it nearly always does), else into a vector.
        let mut buf = [0u8; 384];
        let owned;
        let raw = match b64.decode_slice(encoded, &mut buf) {
            Ok(n) => &buf[..n],
            Err(base64::DecodeSliceError::OutputSliceTooSmall) => {
                owned = b64.decode(encoded).map_err(|_| AuthError::BadPassword)?;
                &owned[..]
            }
            Err(_) => return Err(AuthError::BadPassword),
        };
        let text = std::str::from_utf8(raw).map_err(|_| AuthError::BadPassword)?;
        let (login, password) = text.split_once(':').ok_or(AuthError::BadPassword)?;
        self.basic(login, password, addr).await
    }

    /// Checks a bearer token: it must exist, be unexpired, and have been issued under the
    /// user's current password hash and role.
    pub async fn token(&self, token: &str) -> Result<Caller, AuthError> {
        let key = self.cache.digest("token", &[token]);
        if let Some(c) = self.cache.get(&key) {
            return Ok(c);
        }
        let generation = self.cache.generation_now();
        let row = store::token(self.storage.as_ref(), &token_digest(token))
            .await
            .map_err(|_| AuthError::Unavailable)?
            .ok_or(AuthError::BadToken)?;
        let expires = row
            .expires_dt
            .as_deref()
            .and_then(crate::time::parse)
            .ok_or(AuthError::BadToken)?;
        let left = expires - chrono::Utc::now();
        if left <= chrono::TimeDelta::zero() {
            return Err(AuthError::BadToken);
        }
        if row.tag.as_deref() != Some(tag_of(&row.user).as_str()) {
            // Issued under a password or role the user no longer has.
            let _ = self.revoke(token).await;
            return Err(AuthError::BadToken);
        }
        let caller = caller_of(&row.user);
        self.cache.put(
            key,
            caller.clone(),
            left.to_std().unwrap_or_default(),
            generation,
        );
        Ok(caller)
    }

    /// Signs a token out. Returns whether it existed.
    pub async fn revoke(&self, token: &str) -> Result<bool, AuthError> {
        self.cache.forget(&self.cache.digest("token", &[token]));
        let n = store::delete_token(self.storage.as_ref(), &token_digest(token))
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "token delete failed");
                AuthError::Unavailable
            })?;
        Ok(n > 0)
    }

    /// Removes expired tokens (and tokens from before tags existed). A token of a changed
    /// password or role is refused at once and removed when it is next presented or expires.
    pub async fn purge(&self) -> crate::storage::Result<u64> {
        store::purge_tokens(self.storage.as_ref(), &crate::time::now()).await
    }

    /// Issues a token for a login and password, valid `ttl`.
    pub async fn issue(
        &self,
        login: &str,
        password: &str,
        ttl: Duration,
        addr: Option<IpAddr>,
    ) -> Result<Token, AuthError> {
        let caller = self.basic(login, password, addr).await?;
        let token = hex::encode(rand::random::<[u8; 32]>());
        let now = chrono::Utc::now();
        let expires_dt = crate::time::format(now + ttl);
        let user = store::user_by_id(self.storage.as_ref(), caller.id)
            .await
            .map_err(|_| AuthError::Unavailable)?
            .ok_or(AuthError::BadPassword)?;
        let new = store::NewToken {
            token_hash: &token_digest(&token),
            user_id: caller.id,
            created_dt: &crate::time::format(now),
            expires_dt: &expires_dt,
            tag: &tag_of(&user),
        };
        store::insert_token(self.storage.as_ref(), &new)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "token insert failed");
                AuthError::Unavailable
            })?;
        Ok(Token { token, expires_dt })
    }

    /// Creates the `admin` user on an empty database. Returns the password when it was
    /// generated here (so that it can be shown once).
    pub async fn bootstrap(
        &self,
        engine: &Engine,
        password: Option<String>,
    ) -> anyhow::Result<Option<String>> {
        let n = store::count_users(self.storage.as_ref()).await?;
        if n > 0 {
            return Ok(None);
        }
        let generated = password.is_none();
        let password = password.unwrap_or_else(|| {
            let bytes: [u8; 12] = rand::random();
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        });
        let system = Caller {
            id: 0,
            login: "system".into(),
            role: Role::admin(),
        };
        if let Some(why) = password::policy_problem(&password) {
            tracing::warn!(
                "ENTISERVE_ADMIN_PASSWORD {why}: the admin is created with it, but change it"
            );
        }
        // The operator's choice is stored as given (hashed here), even below the policy.
        let hash = password::hash_async(password.clone())
            .await
            .map_err(|_| anyhow::anyhow!("cannot hash the admin password"))?;
        let mut params = serde_json::Map::new();
        params.insert("login".into(), "admin".into());
        params.insert("password".into(), hash.into());
        params.insert("role".into(), "admin".into());
        let call = Call {
            entity: "users".into(),
            op: Op::Create,
            id: None,
            params,
            prehashed: true,
        };
        if let Err(e) = engine.call(&system, &call).await {
            // Servers started together on one new database each find it empty; the first
            // creates `admin`, and the others' create fails on the login's uniqueness.
            if store::count_users(self.storage.as_ref()).await? > 0 {
                tracing::info!("the admin user was created by another server");
                return Ok(None);
            }
            anyhow::bail!("cannot create the admin user: {}", e.description());
        }
        Ok(generated.then_some(password))
    }
}

/// The caller a stored user signs in as.
pub fn caller_of(user: &UserRow) -> Caller {
    Caller {
        id: user.id,
        login: user.login.clone(),
        role: Role::new(user.role.as_deref().unwrap_or(Role::USER)),
    }
}

/// The tag a token must carry for `user`: a digest of the password hash and role it was
/// issued under.
fn tag_of(user: &UserRow) -> String {
    let mut h = Sha256::new();
    h.update(user.password.as_deref().unwrap_or_default().as_bytes());
    h.update([0]);
    h.update(user.role.as_deref().unwrap_or_default().as_bytes());
    hex::encode(h.finalize())
}

/// Tokens are stored only as their SHA-256 digest.
fn token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A valid argon2 hash of a random string, verified against when a login does not exist.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$Gf3Vx2Ybq0S7wCJ2bm9rZk3kq6m1l1n0ehj8V3f2H9g";
