//! `entiserve upload FILE --entity NAME`: sends a CSV (or ZIP) file to the uploader as a
//! background request, draws its progress, and downloads the result CSV.
//!
//! Steps: the file is streamed from disk as `multipart/form-data` to
//! `POST /tools/uploader.ex.php` with `bgrs=1` (while its data rows are counted locally, for the
//! progress bar); a refusal (4xx) prints the server's description and exits 1. The request
//! `GET /bgrs/<rid>` is then polled every 250 ms until it is over; the result CSV
//! (`GET /bgrs/<rid>/result`) is written to `--out` (default: FILE with `res.csv` appended) and
//! its `res` column counted: exit 0 when every row is `OK`, 2 when some failed.
//!
//! Ctrl-C while the request runs asks whether to cancel it on the server (`DELETE /bgrs/<rid>`):
//! yes waits until it is cancelled, downloads the result and exits 130; no leaves it running and
//! exits 130.

use super::{CallError, Conn, EXIT_INTERRUPTED, Failure, Record, ServerArgs, read_answer};
use indicatif::{HumanCount, ProgressBar, ProgressState, ProgressStyle};
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// Polling interval of the request record.
const POLL: Duration = Duration::from_millis(250);
/// How long the server may stay unreachable while a request is followed.
const UNREACHABLE_FOR: Duration = Duration::from_secs(120);
/// Steps of the bar when the number of rows is unknown (progress percent × 100).
const PERCENT_STEPS: u64 = 10_000;
/// Failed rows listed after the summary.
const SHOW_FAILURES: usize = 5;
/// How the server starts the `res` of a row a cancel kept from running.
const NOT_RUN: &[u8] = b"not run:";

/// Flags of `entiserve upload`.
#[derive(clap::Args, Debug)]
pub struct UploadArgs {
    /// The CSV file (or ZIP bundle) to upload.
    pub file: PathBuf,
    /// The entity the rows change (users, campaigns, markers, assets, ...).
    #[arg(long)]
    pub entity: String,
    #[command(flatten)]
    pub server: ServerArgs,
    /// Character encoding of the CSV (a WHATWG label: UTF-8, ISO-8859-1, windows-1252, ...).
    #[arg(long, default_value = "UTF-8")]
    pub encoding: String,
    /// Campaign for the markers made from the pages.pdf of a ZIP bundle.
    #[arg(long)]
    pub campaign_id: Option<i64>,
    /// Where to write the result CSV [default: FILE with `res.csv` appended].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Check and run every row, then keep nothing; the result says what would happen.
    #[arg(long)]
    pub dry_run: bool,
    /// All or nothing: when a row fails, apply none of the file.
    #[arg(long)]
    pub atomic: bool,
}

/// Runs `entiserve upload`.
pub fn run(args: UploadArgs) -> ExitCode {
    let input = match Input::inspect(&args.file) {
        Ok(i) => i,
        Err(f) => return super::exit_code(Err(f)),
    };
    let conn = match Conn::open(&args.server) {
        Ok(c) => c,
        Err(f) => return super::exit_code(Err(f)),
    };
    let rt = super::runtime();
    let outcome = rt.block_on(upload(&conn, &args, input));
    // A prompt may still wait on stdin: do not wait for it.
    rt.shutdown_background();
    super::exit_code(outcome)
}

/// The file to upload, as seen locally.
struct Input {
    path: PathBuf,
    name: String,
    size: u64,
    zip: bool,
}

impl Input {
    fn inspect(path: &Path) -> Result<Input, Failure> {
        let cannot =
            |e: std::io::Error| Failure::new(format!("cannot read {}: {e}", path.display()));
        let meta = std::fs::metadata(path).map_err(cannot)?;
        if !meta.is_file() {
            return Err(Failure::new(format!("{} is not a file", path.display())));
        }
        let mut magic = [0u8; 4];
        let n = std::io::Read::read(&mut std::fs::File::open(path).map_err(cannot)?, &mut magic)
            .map_err(cannot)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "upload.csv".into());
        Ok(Input {
            path: path.to_path_buf(),
            name,
            size: meta.len(),
            zip: n == 4 && (magic == *b"PK\x03\x04" || magic == *b"PK\x05\x06"),
        })
    }
}

/// The default result path: the input path with `res.csv` appended.
pub fn default_out(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_os_string();
    s.push("res.csv");
    PathBuf::from(s)
}

async fn upload(conn: &Conn, args: &UploadArgs, input: Input) -> Result<u8, Failure> {
    // Registered now, so that Ctrl-C is ours from here on (never the default exit).
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|e| Failure::new(format!("cannot handle Ctrl-C: {e}")))?;
    let counting = (!input.zip).then(|| {
        let (path, encoding) = (input.path.clone(), args.encoding.clone());
        tokio::task::spawn_blocking(move || count_rows(&path, &encoding))
    });
    eprintln!(
        "uploading {} ({}) into {} at {} as {}",
        input.path.display(),
        indicatif::HumanBytes(input.size),
        args.entity,
        conn.base,
        conn.user
    );
    let rid = tokio::select! {
        r = send(conn, args, &input) => r?,
        _ = interrupt.recv() => {
            eprintln!("interrupted: the upload was stopped before the server accepted it");
            return Ok(EXIT_INTERRUPTED);
        }
    };
    eprintln!("background request {rid} started");
    let rows = match counting {
        Some(task) => task.await.ok().flatten(),
        None => None,
    };
    let bar = progress_bar(rows);
    let followed = tokio::select! {
        r = follow(conn, &rid, &bar, rows) => Some(r),
        _ = interrupt.recv() => None,
    };
    let out = args.out.clone().unwrap_or_else(|| default_out(&args.file));
    match followed {
        Some(record) => {
            let record = record.inspect_err(|_| stop(&bar))?;
            bar.finish_and_clear();
            finished(conn, &rid, &record, &out).await
        }
        None => {
            stop(&bar);
            interrupted(conn, &rid, &out, &mut interrupt).await
        }
    }
}

/// Streams the file to the uploader; returns the request id of the 202 answer.
async fn send(conn: &Conn, args: &UploadArgs, input: &Input) -> Result<String, Failure> {
    let file = tokio::fs::File::open(&input.path)
        .await
        .map_err(|e| Failure::new(format!("cannot read {}: {e}", input.path.display())))?;
    let bar = ProgressBar::new(input.size).with_style(
        ProgressStyle::with_template(
            "{spinner} uploading {bytes}/{total_bytes} ({bytes_per_sec}) {msg}",
        )
        .expect("a valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    let chunks = futures::stream::unfold((file, bar.clone()), |(mut file, bar)| async move {
        let mut buf = vec![0u8; 256 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => {
                bar.set_message("- the server checks the file");
                None
            }
            Ok(n) => {
                buf.truncate(n);
                bar.inc(n as u64);
                Some((Ok(bytes::Bytes::from(buf)), (file, bar)))
            }
            Err(e) => Some((Err(e), (file, bar))),
        }
    });
    let mime = if input.zip {
        "application/zip"
    } else {
        "text/csv"
    };
    let part = Part::stream_with_length(reqwest::Body::wrap_stream(chunks), input.size)
        .file_name(input.name.clone())
        .mime_str(mime)
        .expect("a valid mime type");
    let mut form = Form::new()
        .text("entity", args.entity.clone())
        .text("encoding", args.encoding.clone())
        .text("bgrs", "1");
    if let Some(id) = args.campaign_id {
        form = form.text("campaign_id", id.to_string());
    }
    if args.dry_run {
        form = form.text("dry_run", "1");
    }
    if args.atomic {
        form = form.text("atomic", "1");
    }
    let form = form.part("csvfile", part);
    let req = conn
        .request(Method::POST, "/tools/uploader.ex.php")
        .multipart(form);
    let answer = conn.send(req).await;
    bar.finish_and_clear();
    let r = answer.map_err(|e| match e {
        CallError::Http { status, .. } if status != 401 => Failure::new(format!(
            "the file was refused: {} ({status})",
            e.description()
        )),
        e => Failure::from(e),
    })?;
    let body: serde_json::Value = r.json().await.map_err(|e| conn.net(&e))?;
    body["request"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Failure::new(format!("the server did not return a request id: {body}")))
}

fn progress_bar(rows: Option<u64>) -> ProgressBar {
    let (len, template) = match rows {
        Some(n) => (
            n,
            "{spinner} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} rows ({rate}, {eta} left)",
        ),
        None => (
            PERCENT_STEPS,
            "{spinner} [{elapsed_precise}] {wide_bar} {percent}% ({eta} left)",
        ),
    };
    let style = ProgressStyle::with_template(template)
        .expect("a valid template")
        .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{} rows/s", HumanCount(s.per_sec() as u64));
        });
    let bar = ProgressBar::new(len).with_style(style);
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// Stops the bar where it is, leaving the cursor on a fresh line.
fn stop(bar: &ProgressBar) {
    bar.abandon();
    if !bar.is_hidden() {
        eprintln!();
    }
}

/// The record of `rid`, or why it cannot be read.
async fn record(conn: &Conn, rid: &str) -> Result<Record, CallError> {
    let answer = conn.get_json(&format!("/bgrs/{rid}")).await?;
    Record::from_answer(answer).ok_or_else(|| CallError::Net {
        base: conn.base.clone(),
        detail: format!("GET /bgrs/{rid} did not return a record"),
    })
}

/// Polls the record until the request is over, moving the bar; the server may be unreachable
/// for a while (a restart), since background work survives it.
async fn follow(
    conn: &Conn,
    rid: &str,
    bar: &ProgressBar,
    rows: Option<u64>,
) -> Result<Record, Failure> {
    let mut unreachable_since: Option<Instant> = None;
    loop {
        match record(conn, rid).await {
            Ok(r) => {
                unreachable_since = None;
                bar.set_message("");
                let p = r.progress();
                let pos = match rows {
                    Some(n) => (p / 100.0 * n as f64).round() as u64,
                    None => (p * 100.0).round() as u64,
                };
                bar.set_position(pos);
                if !r.in_progress() {
                    return Ok(r);
                }
            }
            Err(e @ CallError::Net { .. }) => {
                let since = *unreachable_since.get_or_insert_with(Instant::now);
                if since.elapsed() > UNREACHABLE_FOR {
                    return Err(Failure::new(format!(
                        "{e}; the request goes on in the background: entiserve bgrs {rid}"
                    )));
                }
                bar.println(format!("warning: {e}; retrying"));
            }
            Err(e) => return Err(e.into()),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The end of a request that ran to its end: the result file and the exit code.
async fn finished(conn: &Conn, rid: &str, record: &Record, out: &Path) -> Result<u8, Failure> {
    let status = record.get("status");
    if record.get("status_id") == "4" && !status.is_empty() && !status.starts_with('2') {
        return Err(Failure::new(format!(
            "the upload failed on the server (status {status}); see entiserve bgrs {rid}"
        )));
    }
    download(conn, rid, out).await?;
    let cancelled = record.get("status_id") == "5";
    let s = summarize(out, cancelled)?;
    if cancelled {
        println!("request {rid} was cancelled");
    }
    s.print(out);
    Ok(if s.failed > 0 { 2 } else { 0 })
}

/// Ctrl-C while the request runs: cancel it on the server, or leave it running.
async fn interrupted(
    conn: &Conn,
    rid: &str,
    out: &Path,
    interrupt: &mut Signal,
) -> Result<u8, Failure> {
    let goes_on = || eprintln!("the request goes on in the background: entiserve bgrs {rid}");
    eprint!("Cancel the request {rid} on the server? [y/N] ");
    let _ = std::io::stderr().flush();
    let answer = read_answer(interrupt).await.unwrap_or_default();
    if !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        if answer.is_empty() {
            eprintln!();
        }
        goes_on();
        return Ok(EXIT_INTERRUPTED);
    }
    let req = conn
        .request(Method::DELETE, &format!("/bgrs/{rid}"))
        .timeout(Duration::from_secs(60));
    let already_over = match conn.send(req).await {
        Ok(_) => false,
        Err(e) if e.status() == Some(409) => true,
        Err(e) => {
            return Err(Failure {
                message: format!(
                    "cannot cancel the request: {e}; it goes on in the background: \
                     entiserve bgrs {rid}"
                ),
                code: EXIT_INTERRUPTED,
            });
        }
    };
    if already_over {
        eprintln!("the request had already finished; nothing was cancelled");
    } else {
        eprintln!("cancelling {rid}");
    }
    let bar = ProgressBar::hidden();
    let record = tokio::select! {
        r = follow(conn, rid, &bar, None) => r?,
        _ = interrupt.recv() => {
            goes_on();
            return Ok(EXIT_INTERRUPTED);
        }
    };
    if already_over {
        // Nothing was interrupted: it ends like any finished request.
        return finished(conn, rid, &record, out).await;
    }
    finished(conn, rid, &record, out).await?;
    Ok(EXIT_INTERRUPTED)
}

/// Writes the result CSV of `rid` to `out`, as it comes.
async fn download(conn: &Conn, rid: &str, out: &Path) -> Result<(), Failure> {
    let req = conn.request(Method::GET, &format!("/bgrs/{rid}/result"));
    let mut r = conn
        .send(req)
        .await
        .map_err(|e| Failure::new(format!("cannot download the result: {e}")))?;
    let cannot_write =
        |e: std::io::Error| Failure::new(format!("cannot write {}: {e}", out.display()));
    let mut file = tokio::fs::File::create(out).await.map_err(cannot_write)?;
    while let Some(chunk) = r.chunk().await.map_err(|e| conn.net(&e))? {
        file.write_all(&chunk).await.map_err(cannot_write)?;
    }
    file.flush().await.map_err(cannot_write)?;
    Ok(())
}

/// The separator of a CSV file, from its header line.
fn separator_of(path: &Path) -> std::io::Result<u8> {
    let mut head = Vec::new();
    let f = std::fs::File::open(path)?;
    std::io::Read::read_to_end(&mut std::io::Read::take(f, 64 * 1024), &mut head)?;
    Ok(crate::input::separator(&head))
}

/// The number of data rows of a CSV file in an ASCII-compatible encoding; `None` when it cannot
/// be told (the bar then shows percent).
fn count_rows(path: &Path, encoding: &str) -> Option<u64> {
    let enc = encoding_rs::Encoding::for_label(encoding.trim().as_bytes())?;
    if !enc.is_ascii_compatible() {
        return None;
    }
    let mut r = csv::ReaderBuilder::new()
        .delimiter(separator_of(path).ok()?)
        .flexible(true)
        .from_path(path)
        .ok()?;
    let mut rec = csv::ByteRecord::new();
    let mut n = 0;
    while r.read_byte_record(&mut rec).ok()? {
        n += 1;
    }
    Some(n)
}

/// The counts of a result CSV.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub rows: u64,
    pub ok: u64,
    pub failed: u64,
    /// Rows with an empty `op`, which the uploader ignores.
    pub skipped: u64,
    /// Rows a cancel kept from running.
    pub not_run: u64,
    /// The first failed rows: (line number counted from 1 after the header, `res` text).
    pub failures: Vec<(u64, String)>,
}

impl Summary {
    fn print(&self, out: &Path) {
        let mut extra = String::new();
        if self.skipped > 0 {
            extra.push_str(&format!(", {} skipped", self.skipped));
        }
        if self.not_run > 0 {
            extra.push_str(&format!(", {} not run", self.not_run));
        }
        println!(
            "{} rows: {} OK, {} failed{extra}; result written to {}",
            self.rows,
            self.ok,
            self.failed,
            out.display()
        );
        for (line, res) in &self.failures {
            println!("  line {line}: {res}");
        }
        let more = self.failed.saturating_sub(self.failures.len() as u64);
        if more > 0 {
            println!("  ... and {more} more failed rows");
        }
    }
}

/// Counts the rows of a result CSV: `res` `OK`, an error text, an empty `op` (skipped), or, for
/// a `cancelled` request, `not run: ...`. Reads bytes, so any ASCII-compatible encoding does.
pub fn summarize(path: &Path, cancelled: bool) -> Result<Summary, Failure> {
    let bad = |e: &dyn std::fmt::Display| {
        Failure::new(format!("cannot read the result {}: {e}", path.display()))
    };
    let mut r = csv::ReaderBuilder::new()
        .delimiter(separator_of(path).map_err(|e| bad(&e))?)
        .flexible(true)
        .from_path(path)
        .map_err(|e| bad(&e))?;
    let header = r.byte_headers().map_err(|e| bad(&e))?.clone();
    let column = |name: &str| {
        header.iter().position(|h| {
            let h = h.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(h);
            h.trim_ascii().eq_ignore_ascii_case(name.as_bytes())
        })
    };
    let res = column("res").unwrap_or(0);
    let op = column("op");
    let mut s = Summary::default();
    let mut rec = csv::ByteRecord::new();
    while r.read_byte_record(&mut rec).map_err(|e| bad(&e))? {
        s.rows += 1;
        if op.is_some_and(|i| rec.get(i).unwrap_or(b"").trim_ascii().is_empty()) {
            s.skipped += 1;
        } else if rec.get(res) == Some(b"OK") {
            s.ok += 1;
        } else if cancelled && rec.get(res).is_some_and(|r| r.starts_with(NOT_RUN)) {
            s.not_run += 1;
        } else {
            s.failed += 1;
            if s.failures.len() < SHOW_FAILURES {
                let text = String::from_utf8_lossy(rec.get(res).unwrap_or(b"")).into_owned();
                s.failures.push((s.rows, text));
            }
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_out_appends_res_csv() {
        assert_eq!(
            default_out(Path::new("d/a.csv")),
            PathBuf::from("d/a.csvres.csv")
        );
    }

    #[test]
    fn summary_counts_ok_failed_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv");
        std::fs::write(
            &p,
            b"res;id;op;name\r\nOK;1;c;a\r\n`id` must be empty;5;c;b\r\n;;;\r\nOK;2;c;\xe9t\xe9\r\n\
              not run: the request was cancelled;;c;x\r\n",
        )
        .unwrap();
        let s = summarize(&p, true).unwrap();
        assert_eq!(
            (s.rows, s.ok, s.failed, s.skipped, s.not_run),
            (5, 2, 1, 1, 1)
        );
        assert_eq!(s.failures, vec![(2, "`id` must be empty".to_string())]);
        let s = summarize(&p, false).unwrap();
        assert_eq!((s.ok, s.failed, s.not_run), (2, 2, 0));
    }
}
