//! `GET /<res>/changes`: the changes a subscription sees after a number, as JSON pages.

use super::watch::Watch;
use super::{Live, PAGE, frames, read};
use crate::storage::{PoolExec, StorageError};
use serde_json::{Value as Json, json};

/// Log pages one request reads at most; `next` says where to go on.
const PAGES_PER_REQUEST: usize = 10;

/// A page of changes: `{"seq", "op", "id", "object"}` each, and the number to ask after next.
pub struct Changes {
    pub items: Vec<Json>,
    pub next: i64,
}

pub enum PageError {
    /// The changes after the number asked for are no longer kept; `newest` is the number to
    /// go on from after a reload.
    Gone {
        newest: i64,
    },
    Storage(StorageError),
}

impl From<StorageError> for PageError {
    fn from(e: StorageError) -> Self {
        PageError::Storage(e)
    }
}

/// Up to `limit` changes `watch` sees after number `after`.
pub async fn after(
    live: &Live,
    watch: &Watch,
    after: i64,
    limit: i64,
) -> Result<Changes, PageError> {
    let storage = live.engine().storage.clone();
    let (newest, kept_from) = crate::storage::live::bounds(&mut PoolExec(storage.as_ref())).await?;
    if after + 1 < kept_from && after < newest {
        return Err(PageError::Gone { newest });
    }
    let catalog = live.engine().catalog.load();
    let wanted = [watch.entity.name.clone()];
    let mut items: Vec<Json> = Vec::new();
    let mut next = after;
    for _ in 0..PAGES_PER_REQUEST {
        if next >= newest || items.len() as i64 >= limit {
            break;
        }
        let page = read::page(storage.as_ref(), &catalog, next, PAGE, &wanted).await?;
        if page.upto <= next {
            break;
        }
        let mut upto = page.upto;
        let page_frames = frames(storage.as_ref(), watch, &page.changes).await?;
        for (seq, op, data) in page_frames.iter() {
            if items.len() as i64 >= limit {
                upto = items.last().and_then(|i| i["seq"].as_i64()).unwrap_or(upto);
                break;
            }
            let data: Json = serde_json::from_str(data).unwrap_or(Json::Null);
            items.push(json!({
                "seq": seq,
                "op": op,
                "id": data["id"],
                "object": data["object"],
            }));
        }
        next = upto;
    }
    Ok(Changes { items, next })
}
