//! Reading background requests: the record (every value a string), details, and results.

use super::kinds::KindId;
use super::{Jobs, status_name};
use crate::engine::Caller;
use crate::storage::request_log::{self, DetailRow};
use crate::storage::requests::{self, ListFilter, RequestRow};
use serde_json::{Value as Json, json};

/// One background request as stored.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: i64,
    pub rid: String,
    pub user_id: i64,
    pub name: String,
    pub kind: KindId,
    pub entity: String,
    pub params: Json,
    pub status_id: i64,
    pub total: i64,
    pub done: i64,
    pub cursor: i64,
    pub progress: f64,
    pub http_status: Option<i64>,
    pub content_type: Option<String>,
    pub result: Option<String>,
    pub created_dt: String,
    pub finished_dt: Option<String>,
    pub expired: bool,
}

impl From<RequestRow> for Request {
    fn from(r: RequestRow) -> Request {
        Request {
            id: r.id,
            rid: r.rid,
            user_id: r.user_id,
            name: r.name,
            kind: KindId::from_name(&r.kind),
            entity: r.entity,
            params: serde_json::from_str(&r.params).unwrap_or(Json::Null),
            status_id: r.status_id,
            total: r.total,
            done: r.done,
            cursor: r.cursor,
            progress: r.progress,
            http_status: r.http_status,
            content_type: r.content_type,
            result: r.result,
            created_dt: r.created_dt,
            finished_dt: r.finished_dt,
            expired: r.expired,
        }
    }
}

impl Request {
    /// What records the changes this request applies.
    pub fn recorder(&self) -> crate::engine::changes::Recorder {
        crate::engine::changes::Recorder {
            rid: self.rid.clone(),
            stamp: self.id,
        }
    }

    pub fn is_open(&self) -> bool {
        self.status_id == super::IN_PROGRESS
    }

    /// The contract's record: every value a JSON string.
    pub fn to_json(&self) -> Json {
        let open = self.is_open();
        let mode = crate::engine::whole::Mode::of(&self.params);
        let flag = |on: bool| if on { "1" } else { "0" };
        let blank_if_open = |s: Option<String>| {
            if open {
                String::new()
            } else {
                s.unwrap_or_default()
            }
        };
        json!({
            "id": self.id.to_string(),
            "rid": self.rid,
            "user_id": self.user_id.to_string(),
            "name": self.name,
            "created_dt": self.created_dt,
            "status_id": self.status_id.to_string(),
            "status_name": status_name(self.status_id),
            "progress": format!("{:.2}", match self.status_id {
                super::FINISHED => 100.0,
                // A cancelled request keeps the progress it reached.
                _ => self.progress.min(99.99),
            }),
            "finished_dt": blank_if_open(self.finished_dt.clone()),
            "result": blank_if_open(self.result.clone()),
            "status": blank_if_open(self.http_status.map(|s| s.to_string())),
            "content_type": self.content_type.clone().unwrap_or_default(),
            "dry_run": flag(mode.dry_run),
            "atomic": flag(mode.atomic),
            "kind": self.kind.name(),
            "entity": self.entity,
            "title": self.title(),
        })
    }

    /// What the request does, in words: "upload of `spring.csv` into campaigns", "batch of
    /// 2,000 updates of markers", "undo of request 0a1b2c3d…", or the method and path of a
    /// single call.
    pub fn title(&self) -> String {
        match self.kind {
            KindId::Upload | KindId::UploadHere => {
                let file = self.params["file_name"].as_str().unwrap_or_default();
                if file.is_empty() {
                    format!("upload into {}", self.entity)
                } else {
                    format!("upload of `{file}` into {}", self.entity)
                }
            }
            KindId::Batch => {
                let op = self.params["op"].as_str().unwrap_or("change");
                let n = self.total;
                let what = if n == 1 {
                    op.to_string()
                } else {
                    format!("{op}s")
                };
                format!("batch of {} {what} of {}", thousands(n), self.entity)
            }
            KindId::Undo => {
                let of = self
                    .name
                    .strip_prefix("POST /bgrs/")
                    .and_then(|r| r.strip_suffix("/undo"))
                    .unwrap_or(&self.name);
                format!("undo of request {}…", of.get(..8).unwrap_or(of))
            }
            KindId::Call => self.name.clone(),
        }
    }
}

/// `n` with its thousands separated by commas.
fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One details entry as the API shows it.
pub fn detail_json(row: &DetailRow) -> Json {
    json!({
        "id": row.id.to_string(),
        "rid": row.rid,
        "dt": row.dt,
        "details": row.details,
    })
}

impl Jobs {
    /// The request `rid` if `caller` may see it (its owner or an admin).
    pub async fn find(
        &self,
        caller: &Caller,
        rid: &str,
    ) -> crate::storage::Result<Option<Request>> {
        let Some(r) = self.load(rid).await? else {
            return Ok(None);
        };
        Ok((r.user_id == caller.id || caller.is_admin()).then_some(r))
    }

    /// The request `rid`, whoever owns it.
    pub async fn load(&self, rid: &str) -> crate::storage::Result<Option<Request>> {
        Ok(requests::load(self.storage.as_ref(), rid)
            .await?
            .map(Request::from))
    }

    /// Details entries of `rid` after entry `since`, in order, at most `limit`.
    pub async fn details(
        &self,
        rid: &str,
        since: i64,
        limit: i64,
    ) -> crate::storage::Result<Vec<DetailRow>> {
        request_log::details(self.storage.as_ref(), rid, since, limit).await
    }

    /// Results `(seq, status, body)` of `rid` with `seq >= from`, at most `limit`.
    pub async fn results(
        &self,
        rid: &str,
        from: i64,
        limit: i64,
    ) -> crate::storage::Result<Vec<(i64, i64, String)>> {
        let rows = request_log::results(self.storage.as_ref(), rid, from, limit).await?;
        Ok(rows
            .into_iter()
            .map(|r| (r.seq, r.status, r.body))
            .collect())
    }

    /// The caller's requests, newest first.
    pub async fn list(
        &self,
        caller: &Caller,
        status_id: Option<i64>,
        name: Option<String>,
        limit: i64,
        offset: i64,
    ) -> crate::storage::Result<Vec<Request>> {
        let filter = ListFilter {
            user_id: (!caller.is_admin()).then_some(caller.id),
            status_id,
            name,
        };
        let rows = requests::list(self.storage.as_ref(), filter, limit, offset).await?;
        Ok(rows.into_iter().map(Request::from).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: KindId, name: &str, entity: &str, params: Json, total: i64) -> Request {
        Request {
            id: 1,
            rid: "0".repeat(32),
            user_id: 1,
            name: name.into(),
            kind,
            entity: entity.into(),
            params,
            status_id: super::super::IN_PROGRESS,
            total,
            done: 0,
            cursor: 0,
            progress: 0.0,
            http_status: None,
            content_type: None,
            result: None,
            created_dt: String::new(),
            finished_dt: None,
            expired: false,
        }
    }

    #[test]
    fn titles_say_what_a_request_does() {
        let up = request(
            KindId::Upload,
            "uploader",
            "campaigns",
            json!({"file_name": "spring.csv"}),
            3,
        );
        assert_eq!(up.title(), "upload of `spring.csv` into campaigns");
        let batch = request(
            KindId::Batch,
            "batch",
            "markers",
            json!({"op": "update"}),
            2000,
        );
        assert_eq!(batch.title(), "batch of 2,000 updates of markers");
        let one = request(
            KindId::Batch,
            "batch",
            "markers",
            json!({"op": "delete"}),
            1,
        );
        assert_eq!(one.title(), "batch of 1 delete of markers");
        let rid = "0123456789abcdef0123456789abcdef";
        let undo = request(
            KindId::Undo,
            &format!("POST /bgrs/{rid}/undo"),
            "markers",
            json!({}),
            5,
        );
        assert_eq!(undo.title(), "undo of request 01234567…");
        let call = request(KindId::Call, "PUT /campaigns/3", "campaigns", json!({}), 1);
        assert_eq!(call.title(), "PUT /campaigns/3");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }
}
