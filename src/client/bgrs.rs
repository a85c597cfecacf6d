//! `entiserve bgrs [RID]`: without RID, the caller's background requests (`GET /bgrs?limit=50`,
//! newest first) as an aligned table; with RID, the record (`GET /bgrs/<rid>`) and its details
//! log (`GET /bgrs/<rid>/details`), one entry per line. An unknown RID exits 1.

use super::{CallError, Conn, Failure, Record, ServerArgs};
use serde_json::Value as Json;
use std::process::ExitCode;

/// Requests listed without RID.
const LIST_LIMIT: u32 = 50;

/// Flags of `entiserve bgrs`.
#[derive(clap::Args, Debug)]
pub struct BgrsArgs {
    /// A request id: show this request and its details instead of the list.
    pub rid: Option<String>,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Runs `entiserve bgrs`.
pub fn run(args: BgrsArgs) -> ExitCode {
    let conn = match Conn::open(&args.server) {
        Ok(c) => c,
        Err(f) => return super::exit_code(Err(f)),
    };
    let rt = super::runtime();
    let outcome = rt.block_on(async {
        match &args.rid {
            None => list(&conn).await,
            Some(rid) => show(&conn, rid.trim()).await,
        }
    });
    rt.shutdown_background();
    super::exit_code(outcome)
}

/// The table of the caller's requests.
async fn list(conn: &Conn) -> Result<u8, Failure> {
    let answer = conn.get_json(&format!("/bgrs?limit={LIST_LIMIT}")).await?;
    let records: Vec<Record> = match answer {
        Json::Array(items) => items
            .into_iter()
            .filter_map(|i| match i {
                Json::Object(m) => Some(Record(m)),
                _ => None,
            })
            .collect(),
        other => return Err(Failure::new(format!("unexpected answer: {other}"))),
    };
    if records.is_empty() {
        println!("no background requests");
        return Ok(0);
    }
    let mut rows =
        vec![["RID", "NAME", "STATUS", "PROGRESS", "CREATED", "FINISHED"].map(String::from)];
    for r in &records {
        rows.push([
            r.get("rid"),
            name_of(r),
            r.get("status_name"),
            format!("{}%", r.get("progress")),
            r.get("created_dt"),
            r.get("finished_dt"),
        ]);
    }
    print!("{}", table(&rows));
    Ok(0)
}

/// A request's name, with `(dry run)` or `(all or nothing)` when it is one.
fn name_of(r: &Record) -> String {
    let mut name = r.get("name");
    if r.get("dry_run") == "1" {
        name.push_str(" (dry run)");
    }
    if r.get("atomic") == "1" {
        name.push_str(" (all or nothing)");
    }
    name
}

/// Rows as left-aligned columns two spaces apart, with no trailing blanks.
fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (cell, w) in row.iter().zip(widths) {
            line.push_str(&format!("{cell:<w$}  "));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// One request: its fields, then its details log.
async fn show(conn: &Conn, rid: &str) -> Result<u8, Failure> {
    let not_found = |e: CallError| match e.status() {
        Some(404) => Failure::new(format!("no background request {rid}: {}", e.description())),
        _ => e.into(),
    };
    let answer = conn
        .get_json(&format!("/bgrs/{rid}"))
        .await
        .map_err(not_found)?;
    let record = Record::from_answer(answer)
        .ok_or_else(|| Failure::new(format!("GET /bgrs/{rid} did not return a record")))?;
    let width = record.0.keys().map(|k| k.len()).max().unwrap_or(0);
    for key in record.0.keys() {
        let value = match key.as_str() {
            "progress" => format!("{}%", record.get(key)),
            _ => record.get(key),
        };
        println!("{:<width$}  {value}", format!("{key}:"), width = width + 1);
    }
    // The log comes a page at a time: go on after the last entry until a page is empty.
    let mut entries = Vec::new();
    let mut since = "0".to_string();
    loop {
        let page = conn
            .get_json(&format!("/bgrs/{rid}/details?since={since}"))
            .await
            .map_err(not_found)?;
        let page = page.as_array().cloned().unwrap_or_default();
        match page.last().and_then(|e| e["id"].as_str()) {
            Some(id) => since = id.to_string(),
            None => break,
        }
        entries.extend(page);
    }
    println!();
    println!("details ({}):", entries.len());
    for e in &entries {
        let text = |k: &str| e[k].as_str().unwrap_or("").to_string();
        println!("{}  {}", text("dt"), text("details"));
    }
    let result = record.get("result");
    if !result.is_empty() {
        println!();
        println!("result: {}", conn.url(&format!("/bgrs/{rid}/result")));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::table;

    #[test]
    fn table_aligns_columns() {
        let rows = [
            ["a".to_string(), "bb".to_string()],
            ["ccc".to_string(), "d".to_string()],
        ];
        assert_eq!(table(&rows), "a    bb\nccc  d\n");
    }
}
