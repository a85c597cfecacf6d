//! Statements on users as credentials and on issued tokens (`users`, `auth_tokens`).

use super::{Result, Row, Storage, Value};
use crate::schema::ColType;

/// A user as sign-in sees it.
#[derive(Debug, Clone)]
pub struct UserRow {
    pub id: i64,
    pub login: String,
    /// The stored password hash.
    pub password: Option<String>,
    pub role: Option<String>,
}

const USER_TYPES: [ColType; 4] = [ColType::Int, ColType::Text, ColType::Text, ColType::Text];

impl UserRow {
    /// Reads the first four values of `it`: id, login, password, role.
    fn take(it: &mut impl Iterator<Item = Value>) -> UserRow {
        UserRow {
            id: it.next().and_then(|v| v.as_i64()).unwrap_or_default(),
            login: it.next().and_then(|v| v.into_string()).unwrap_or_default(),
            password: it.next().and_then(|v| v.into_string()),
            role: it.next().and_then(|v| v.into_string()),
        }
    }
}

fn first_user(rows: Vec<Row>) -> Option<UserRow> {
    rows.into_iter()
        .next()
        .map(|r| UserRow::take(&mut r.into_iter()))
}

/// The user signing in as `login`.
pub async fn user_by_login(s: &dyn Storage, login: &str) -> Result<Option<UserRow>> {
    let sql = format!(
        "SELECT \"id\", \"login\", \"password\", \"role\" FROM \"users\" WHERE \"login\" = {}",
        s.dialect().ph(1)
    );
    Ok(first_user(
        s.fetch(&sql, &[Value::text(login)], &USER_TYPES).await?,
    ))
}

/// The user with id `id`.
pub async fn user_by_id(s: &dyn Storage, id: i64) -> Result<Option<UserRow>> {
    let sql = format!(
        "SELECT \"id\", \"login\", \"password\", \"role\" FROM \"users\" WHERE \"id\" = {}",
        s.dialect().ph(1)
    );
    Ok(first_user(
        s.fetch(&sql, &[Value::int(id)], &USER_TYPES).await?,
    ))
}

/// How many users there are.
pub async fn count_users(s: &dyn Storage) -> Result<i64> {
    Ok(
        s.fetch("SELECT COUNT(*) FROM \"users\"", &[], &[ColType::Int])
            .await?
            .first()
            .and_then(|r| r[0].as_i64())
            .unwrap_or(0),
    )
}

/// A stored token with the user it was issued to.
#[derive(Debug, Clone)]
pub struct TokenRow {
    pub user: UserRow,
    pub expires_dt: Option<String>,
    /// The digest of the password hash and role it was issued under.
    pub tag: Option<String>,
}

/// The token whose digest is `token_hash`, with its user.
pub async fn token(s: &dyn Storage, token_hash: &str) -> Result<Option<TokenRow>> {
    let sql = format!(
        "SELECT u.\"id\", u.\"login\", u.\"password\", u.\"role\", t.\"expires_dt\", t.\"tag\" FROM \"auth_tokens\" t \
         JOIN \"users\" u ON u.\"id\" = t.\"user_id\" WHERE t.\"token_hash\" = {}",
        s.dialect().ph(1)
    );
    let types = [
        ColType::Int,
        ColType::Text,
        ColType::Text,
        ColType::Text,
        ColType::Text,
        ColType::Text,
    ];
    let rows = s.fetch(&sql, &[Value::text(token_hash)], &types).await?;
    Ok(rows.into_iter().next().map(|r| {
        let mut it = r.into_iter();
        TokenRow {
            user: UserRow::take(&mut it),
            expires_dt: it.next().and_then(|v| v.into_string()),
            tag: it.next().and_then(|v| v.into_string()),
        }
    }))
}

/// A token to store.
pub struct NewToken<'a> {
    pub token_hash: &'a str,
    pub user_id: i64,
    pub created_dt: &'a str,
    pub expires_dt: &'a str,
    pub tag: &'a str,
}

/// Stores a token.
pub async fn insert_token(s: &dyn Storage, t: &NewToken<'_>) -> Result<()> {
    let d = s.dialect();
    let sql = d.bind("INSERT INTO \"auth_tokens\" (\"token_hash\", \"user_id\", \"created_dt\", \"expires_dt\", \"tag\") VALUES (?, ?, ?, ?, ?)");
    let args = [
        Value::text(t.token_hash),
        Value::int(t.user_id),
        Value::text(t.created_dt),
        Value::text(t.expires_dt),
        Value::text(t.tag),
    ];
    s.execute(&sql, &args).await?;
    Ok(())
}

/// Removes the token whose digest is `token_hash`; how many rows went.
pub async fn delete_token(s: &dyn Storage, token_hash: &str) -> Result<u64> {
    let sql = format!(
        "DELETE FROM \"auth_tokens\" WHERE \"token_hash\" = {}",
        s.dialect().ph(1)
    );
    s.execute(&sql, &[Value::text(token_hash)]).await
}

/// Removes tokens that expired before `now` and tokens without a tag.
pub async fn purge_tokens(s: &dyn Storage, now: &str) -> Result<u64> {
    let sql = format!(
        "DELETE FROM \"auth_tokens\" WHERE \"expires_dt\" < {} OR \"tag\" IS NULL",
        s.dialect().ph(1)
    );
    s.execute(&sql, &[Value::text(now)]).await
}
