//! Reading background requests: the record (every value a string), details, and results.

use super::{Jobs, status_name};
use crate::engine::Caller;
use crate::schema::ColType;
use crate::storage::{Row, Value};
use serde_json::{Value as Json, json};

/// One background request as stored.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: i64,
    pub rid: String,
    pub user_id: i64,
    pub name: String,
    pub kind: String,
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

pub const COLUMNS: &str = "\"id\", \"rid\", \"user_id\", \"name\", \"kind\", \"entity\", \"params\", \"status_id\", \"total\", \"done\", \"cursor\", \"progress\", \"http_status\", \"content_type\", \"result\", \"created_dt\", \"finished_dt\", \"expired\"";
pub const TYPES: [ColType; 18] = [
    ColType::Int,
    ColType::Text,
    ColType::Int,
    ColType::Text,
    ColType::Text,
    ColType::Text,
    ColType::Text,
    ColType::Int,
    ColType::Int,
    ColType::Int,
    ColType::Int,
    ColType::Float,
    ColType::Int,
    ColType::Text,
    ColType::Text,
    ColType::Text,
    ColType::Text,
    ColType::Int,
];

impl Request {
    pub fn from_row(r: Row) -> Request {
        let mut it = r.into_iter();
        let mut next = || it.next().unwrap_or(Value::Int(None));
        let int = |v: Value| v.as_i64().unwrap_or_default();
        let text = |v: Value| v.into_string().unwrap_or_default();
        Request {
            id: int(next()),
            rid: text(next()),
            user_id: int(next()),
            name: text(next()),
            kind: text(next()),
            entity: text(next()),
            params: serde_json::from_str(&text(next())).unwrap_or(Json::Null),
            status_id: int(next()),
            total: int(next()),
            done: int(next()),
            cursor: int(next()),
            progress: match next() {
                Value::Float(f) => f.unwrap_or_default(),
                v => v.as_i64().unwrap_or_default() as f64,
            },
            http_status: next().as_i64(),
            content_type: next().into_string(),
            result: next().into_string(),
            created_dt: text(next()),
            finished_dt: next().into_string(),
            expired: int(next()) != 0,
        }
    }

    pub fn is_open(&self) -> bool {
        self.status_id == super::IN_PROGRESS
    }

    /// The contract's record: every value a JSON string.
    pub fn to_json(&self) -> Json {
        let open = self.is_open();
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
        })
    }
}

/// One details entry as the API shows it.
pub fn detail_json(row: &Row) -> Json {
    json!({
        "id": row[0].as_i64().unwrap_or_default().to_string(),
        "rid": row[1].as_str().unwrap_or_default(),
        "dt": row[2].as_str().unwrap_or_default(),
        "details": row[3].as_str().unwrap_or_default(),
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
        let d = self.storage.dialect();
        let sql = format!(
            "SELECT {COLUMNS} FROM \"bg_requests\" WHERE \"rid\" = {}",
            d.ph(1)
        );
        let rows = self
            .storage
            .fetch(&sql, &[Value::text(rid)], &TYPES)
            .await?;
        Ok(rows.into_iter().next().map(Request::from_row))
    }

    /// Details entries of `rid` after entry `since`, in order, at most `limit`.
    pub async fn details(
        &self,
        rid: &str,
        since: i64,
        limit: i64,
    ) -> crate::storage::Result<Vec<Row>> {
        let d = self.storage.dialect();
        let sql = format!(
            "SELECT \"id\", \"rid\", \"dt\", \"details\" FROM \"bg_details\" WHERE \"rid\" = {} AND \"id\" > {} ORDER BY \"id\" LIMIT {}",
            d.ph(1),
            d.ph(2),
            d.ph(3)
        );
        let types = [ColType::Int, ColType::Text, ColType::Text, ColType::Text];
        self.storage
            .fetch(
                &sql,
                &[Value::text(rid), Value::int(since), Value::int(limit)],
                &types,
            )
            .await
    }

    /// Results `(seq, status, body)` of `rid` with `seq >= from`, at most `limit`.
    pub async fn results(
        &self,
        rid: &str,
        from: i64,
        limit: i64,
    ) -> crate::storage::Result<Vec<(i64, i64, String)>> {
        let d = self.storage.dialect();
        let sql = format!(
            "SELECT \"seq\", \"status\", \"body\" FROM \"bg_results\" WHERE \"rid\" = {} AND \"seq\" >= {} ORDER BY \"seq\" LIMIT {}",
            d.ph(1),
            d.ph(2),
            d.ph(3)
        );
        let rows = self
            .storage
            .fetch(
                &sql,
                &[Value::text(rid), Value::int(from), Value::int(limit)],
                &[ColType::Int, ColType::Int, ColType::Text],
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let mut it = r.into_iter();
                let seq = it.next().and_then(|v| v.as_i64()).unwrap_or_default();
                let status = it.next().and_then(|v| v.as_i64()).unwrap_or_default();
                let body = it.next().and_then(|v| v.into_string()).unwrap_or_default();
                (seq, status, body)
            })
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
        let d = self.storage.dialect();
        let mut conds = Vec::new();
        let mut args = Vec::new();
        if !caller.is_admin() {
            args.push(Value::int(caller.id));
            conds.push(format!("\"user_id\" = {}", d.ph(args.len())));
        }
        if let Some(s) = status_id {
            args.push(Value::int(s));
            conds.push(format!("\"status_id\" = {}", d.ph(args.len())));
        }
        if let Some(n) = name {
            args.push(Value::text(n));
            conds.push(format!("\"name\" = {}", d.ph(args.len())));
        }
        let w = if conds.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conds.join(" AND "))
        };
        args.push(Value::int(limit));
        args.push(Value::int(offset));
        let sql = format!(
            "SELECT {COLUMNS} FROM \"bg_requests\"{w} ORDER BY \"id\" DESC LIMIT {} OFFSET {}",
            d.ph(args.len() - 1),
            d.ph(args.len())
        );
        let rows = self.storage.fetch(&sql, &args, &TYPES).await?;
        Ok(rows.into_iter().map(Request::from_row).collect())
    }
}
