//! Secret fields (`secret: true`, e.g. `users.password`) are sealed before a call is stored for
//! later (a background request's items, an upload's working copy): each plain value is checked
//! against the field and the password policy and replaced by its argon2 hash, or, when it is
//! refused, by the reason. Nothing stored for later holds a secret in clear. A sealed call is
//! marked `prehashed`, and [`super::prepare`] then stores the hash as it is or fails the call
//! with the reason. Calls from clients are never `prehashed`, so no client can set a hash.

use super::password;
use crate::item_texts::ItemTexts;
use crate::schema::Entity;
use serde_json::{Map, Value as Json};

/// Why a sealed secret was refused: what follows this prefix.
const REFUSED: &str = "refused: ";

/// The problem with a plain secret value for field `name`, if any.
pub fn problem(e: &Entity, name: &str, plain: &str) -> Option<String> {
    let f = e.field(name)?;
    if let Some(max) = f.max_length
        && plain.chars().count() as u64 > max
    {
        return Some(format!("is too long (at most {max} characters)"));
    }
    if plain.contains('\0') {
        return Some("text may not contain NUL characters".into());
    }
    password::policy_problem(plain)
}

/// What a sealed value says: `Ok(hash)` to store, or `Err(reason)`.
pub fn unseal(v: &str) -> Result<&str, String> {
    if password::is_hash(v) {
        Ok(v)
    } else {
        Err(v
            .strip_prefix(REFUSED)
            .unwrap_or("is not a valid sealed secret")
            .to_string())
    }
}

/// The secret fields of `e` present in `params`, with their plain values.
fn plain_secrets(e: &Entity, params: &Map<String, Json>) -> Vec<(String, Json)> {
    e.fields
        .iter()
        .filter(|f| f.secret)
        .filter_map(|f| params.get(&f.name).map(|v| (f.name.clone(), v.clone())))
        .collect()
}

/// The sealed form of one plain value (`None` for a null, kept as it is).
fn sealed(e: &Entity, name: &str, v: &Json, hash: impl FnOnce(&str) -> Option<String>) -> Json {
    match v {
        Json::Null => Json::Null,
        Json::String(plain) => match problem(e, name, plain) {
            Some(p) => Json::String(format!("{REFUSED}{p}")),
            None => match hash(plain) {
                Some(h) => Json::String(h),
                None => Json::String(format!("{REFUSED}could not be hashed")),
            },
        },
        _ => Json::String(format!("{REFUSED}must be a string")),
    }
}

/// Whether `e` has secret fields at all.
pub fn has_secrets(e: &Entity) -> bool {
    e.fields.iter().any(|f| f.secret)
}

/// Seals the secret values of `params` in place (on the bounded argon2 pool).
pub async fn seal(e: &Entity, params: &mut Map<String, Json>) {
    for (name, v) in plain_secrets(e, params) {
        let plain = v.as_str().map(str::to_string);
        let hashed = match (&plain, problem(e, &name, plain.as_deref().unwrap_or(""))) {
            (Some(p), None) => password::hash_async(p.clone()).await.ok(),
            _ => None,
        };
        params.insert(name.clone(), sealed(e, &name, &v, |_| hashed));
    }
}

/// [`seal`] from a blocking thread.
pub fn seal_blocking(e: &Entity, params: &mut Map<String, Json>) {
    for (name, v) in plain_secrets(e, params) {
        params.insert(name.clone(), sealed(e, &name, &v, password::hash_blocking));
    }
}

/// The texts of batch items with their secret values sealed (objects; other items are left
/// for the call to refuse), a few at a time: one item at a time is parsed, sealed and written
/// back, so a large batch is never held as values.
pub async fn seal_items(e: &Entity, items: &ItemTexts) -> ItemTexts {
    use futures::StreamExt;
    let width = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = ItemTexts::default();
    let mut sealed = futures::stream::iter(0..items.len())
        .map(|i| seal_text(e, items.get(i)))
        .buffered(width);
    let mut i = 0;
    while let Some(text) = sealed.next().await {
        out.push(text.as_deref().unwrap_or(items.get(i)));
        i += 1;
    }
    out
}

/// The text of one item with its secret values sealed; `None` when it is not an object (kept
/// as it is).
async fn seal_text(e: &Entity, text: &str) -> Option<String> {
    match serde_json::from_str::<Json>(text) {
        Ok(Json::Object(mut m)) => {
            seal(e, &mut m).await;
            Some(Json::Object(m).to_string())
        }
        _ => None,
    }
}
