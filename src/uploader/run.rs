//! Runs the rows of a checked upload in order, in chunks: each chunk's calls run in a
//! transaction (one chunk's, or several chunks' on PostgreSQL: see [`super::span`]), its result
//! rows are appended to the result file, and the progress (rows done and the result file's
//! length) commits with the chunks' effects under the request's lease. A run that stops
//! (crash, shutdown) resumes from the last commit: the result file is cut back to the committed
//! length and the rows after it run again, nothing twice.

use super::result_file::{Tails, open_result};
use super::rows::{self, Columns, Work};
use super::span::{Step, Writer};
use super::stage::{Stage, Target};
use super::{Plan, keep};
use crate::engine::retry::Retry;
use crate::engine::{Call, CallError, Caller};
use crate::jobs::Jobs;
use crate::jobs::queue::add_detail;
use crate::jobs::record::Request;
use crate::plugins::Registry;
use crate::storage::StorageError;
use std::io::Seek;
use tokio::sync::{mpsc, watch};

/// Rows per chunk: what the pipeline prepares at once, and a transaction's rows on SQLite.
pub(super) const CHUNK: usize = 1000;

/// Where per-line progress goes.
pub enum Sink {
    /// Into the request's details (background uploads).
    Details,
    /// To a streamed response (`show_progress=1`), one text line per row.
    Stream(mpsc::Sender<String>),
    /// Nowhere (a plain synchronous upload).
    Quiet,
}

/// A failure of an upload's files: [`StorageError::Full`] when it is an I/O error (of the
/// file system, a CSV writer or the file store) that found the disk full.
pub(super) fn io_err<E: std::fmt::Display + 'static>(e: E) -> StorageError {
    let any = &e as &dyn std::any::Any;
    let full = any
        .downcast_ref::<std::io::Error>()
        .is_some_and(crate::storage::is_out_of_space)
        || any.downcast_ref::<csv::Error>().is_some_and(
            |c| matches!(c.kind(), csv::ErrorKind::Io(io) if crate::storage::is_out_of_space(io)),
        )
        || any
            .downcast_ref::<crate::files::FileError>()
            .is_some_and(|f| f.full);
    if full {
        StorageError::Full(format!("upload file: {e}"))
    } else {
        StorageError::Database(format!("upload file: {e}"))
    }
}

/// The plan stored with a request.
pub fn plan_of(req: &Request) -> Result<Plan, StorageError> {
    serde_json::from_value(req.params.clone()).map_err(|e| io_err(format!("bad stored plan: {e}")))
}

/// What a run needs for ZIP bundles: the plugins, and the file storage that holds what
/// they stored.
pub struct Bundles<'a> {
    pub plugins: &'a Registry,
    pub files: &'a crate::files::Files,
}

/// Runs the rows of `req` from where it stopped, then finishes it. A dry run or an
/// all-or-nothing upload runs whole (see [`super::whole`]).
pub async fn rows(
    jobs: &Jobs,
    bundles: &Bundles<'_>,
    req: &Request,
    caller: &Caller,
    sink: Sink,
    stop: &watch::Receiver<bool>,
) -> Result<(), StorageError> {
    let started = std::time::Instant::now();
    let _bulk = jobs.engine.bulk.start();
    let mut plan = plan_of(req)?;
    let catalog = jobs.engine.catalog.load();
    let entity = catalog
        .get(&plan.entity)
        .cloned()
        .ok_or_else(|| io_err(format!("entity `{}` is gone", plan.entity)))?;
    let mut cols = Columns::from_header(&plan.layout.header, &entity).map_err(io_err)?;
    cols.sealed = plan.sealed;
    if plan.mode.whole() {
        let target = (&plan, entity.as_ref(), &cols);
        return super::whole::rows(jobs, bundles, req, caller, sink, stop, target).await;
    }
    let plugins = bundles.plugins;
    let encoding = plan.encoding();
    let (result_path, rel) = super::result_location(&jobs.settings.data_dir, &req.rid);
    let parts = keep::keeps_parts(jobs, req);
    if parts && req.cursor > 0 {
        keep::rebuild_result(jobs, &req.rid, &result_path, req.cursor).await?;
    }
    let (out, cursor, unsaved) = reopen_result(&plan, &result_path, &cols, req, parts)?;
    let working_copy = keep::working_copy(jobs, &plan).await?;
    // Why no row runs at all (a bundle's start failed).
    let mut refused: Option<String> = None;
    if plan.bundle.is_some() {
        refused = start_bundle(jobs, plugins, req, caller, &entity, &mut plan).await?;
    }
    let hooks = hooks_of(plugins, &entity, &plan);
    let tails = Tails::possible(&cols, encoding, &hooks).then_some(plan.layout.separator);
    let (tx_rows, rx_rows) = mpsc::channel::<Read>(1);
    let (spare_tx, spare_rx) = std::sync::mpsc::channel();
    let reader = spawn_reader(
        working_copy.clone(),
        plan.layout.separator,
        req.done as u64,
        tx_rows,
        tails_ahead(cols.clone(), tails),
        Some(spare_rx),
    );
    let target = Target {
        engine: jobs.engine.clone(),
        caller: caller.clone(),
        cols: cols.clone(),
        entity: entity.clone(),
        hooks,
        tails,
    };
    let mut stage = Stage::spawn(target, rx_rows, spare_tx);
    if refused.is_some() {
        stage.skip_rest();
    }
    let mut w = Writer::new(
        jobs,
        req,
        caller,
        &plan,
        &cols,
        &sink,
        out,
        working_copy.clone(),
        cursor,
        unsaved,
        parts,
    );
    if !run_all(&mut w, &mut stage, refused.as_deref(), stop).await? {
        return Ok(());
    }
    let cancelled_at = w.cancelled_at;
    let (out, done) = w.finish()?;
    reader.await.map_err(io_err)?.map_err(io_err)?;
    drop(out);
    keep::publish_result(jobs, &rel, &result_path).await?;
    let ctype = format!("text/csv; charset={}", encoding.name());
    close(
        jobs,
        req,
        &ctype,
        &rel,
        cancelled_at,
        refused.as_deref(),
        done,
    )
    .await?;
    tracing::info!(rid = %req.rid, rows = done, elapsed_ms = started.elapsed().as_millis() as u64, "upload rows done");
    keep::drop_working_copy(jobs, &plan).await;
    keep::drop_local_result(jobs, &result_path).await;
    Ok(())
}

/// Runs (or writes as not run) every chunk the stage hands `w`. False when the run must stop
/// here: stopped, or its lease lost.
async fn run_all(
    w: &mut Writer<'_>,
    stage: &mut Stage,
    refused: Option<&str>,
    stop: &watch::Receiver<bool>,
) -> Result<bool, StorageError> {
    while let Some(next) = w.next(stage).await? {
        if *stop.borrow() {
            return Ok(false);
        }
        // Storage calls may complete without suspending; let other tasks run.
        tokio::task::yield_now().await;
        if let Some(why) = refused {
            w.not_run(&next.records, &format!("not run: {why}"))?;
            continue;
        }
        if w.cancelled_at.is_some() {
            w.not_run(&next.records, crate::jobs::NOT_RUN)?;
            continue;
        }
        if w.run(stage, next).await? == Step::LeaseLost {
            return Ok(false);
        }
    }
    Ok(!w.lease_lost())
}

/// Records how the run of `req` ended, its result file at `rel`: refused (a bundle's start
/// failed), every line run, or cancelled after `cancelled_at` of `done` lines.
async fn close(
    jobs: &Jobs,
    req: &Request,
    ctype: &str,
    rel: &str,
    cancelled_at: Option<i64>,
    refused: Option<&str>,
    done: i64,
) -> Result<(), StorageError> {
    match (cancelled_at, refused) {
        (_, Some(why)) => {
            let last = format!("refused: {why}");
            jobs.close(req, crate::jobs::FINISHED, 400, ctype, rel, &last)
                .await
        }
        (None, None) => jobs.finish(req, 200, ctype, rel).await,
        (Some(ran), None) => {
            let last = format!("cancelled: {ran} of {done} lines ran, the rest did not run");
            jobs.close(req, crate::jobs::CANCELLED, 200, ctype, rel, &last)
                .await
        }
    }
}

/// Where the result file of `req` is written, reopened at its cursor: the file, the cursor,
/// and the bytes written but not yet committed as a part (the header, when the result is
/// kept in `parts`).
fn reopen_result(
    plan: &Plan,
    result_path: &std::path::Path,
    cols: &Columns,
    req: &Request,
    parts: bool,
) -> Result<(std::fs::File, i64, Vec<u8>), StorageError> {
    let mut out = open_result(plan, result_path, cols, req.cursor as u64)?;
    let cursor = out.stream_position().map_err(io_err)? as i64;
    let unsaved = if parts && req.cursor == 0 {
        std::fs::read(result_path).map_err(io_err)?
    } else {
        Vec::new()
    };
    Ok((out, cursor, unsaved))
}

/// A bundle's plugins with their settings and their state from the plan.
pub(super) type Hooks = Vec<(
    std::sync::Arc<dyn crate::plugins::Plugin>,
    serde_json::Value,
    serde_json::Value,
)>;

/// The hooks rows of `plan` meet: the `on_row` hooks of a bundle's plugins, none otherwise.
pub(super) fn hooks_of(plugins: &Registry, entity: &crate::schema::Entity, plan: &Plan) -> Hooks {
    match &plan.bundle {
        Some(b) => plugins
            .of(entity)
            .map(|(p, s)| {
                (
                    p.clone(),
                    s.clone(),
                    b.get(p.name()).cloned().unwrap_or_default(),
                )
            })
            .collect(),
        None => Vec::new(),
    }
}

/// What a chunk of records runs as.
pub(super) struct RowCalls {
    /// Per row: None for a skipped row, else whether its result gets the object's id (a
    /// create, or a row that names its object by key).
    pub kinds: Vec<Option<bool>>,
    /// The calls of the rows that are not skipped, or why a row cannot run.
    pub calls: Vec<Result<Call, CallError>>,
    /// Per row: the cells the bundle's hooks changed, written to the result when it runs.
    pub changed_cells: Vec<Vec<(usize, String)>>,
}

/// The calls of a chunk of records, through the bundle's `on_row` hooks.
pub(super) fn calls_of(
    cols: &Columns,
    entity: &crate::schema::Entity,
    records: &[csv::StringRecord],
    hooks: &Hooks,
) -> RowCalls {
    let mut kinds: Vec<Option<bool>> = Vec::with_capacity(records.len());
    let mut calls: Vec<Result<Call, CallError>> = Vec::with_capacity(records.len());
    let mut changed_cells: Vec<Vec<(usize, String)>> = Vec::new();
    for r in records {
        match rows::work(cols, entity, r) {
            Work::Skip => kinds.push(None),
            Work::Run(mut c) if !hooks.is_empty() => {
                kinds.push(Some(c.id.is_none()));
                let before = c.params.clone();
                let hooked = hooks
                    .iter()
                    .try_for_each(|(p, settings, state)| p.on_row(settings, state, &mut c));
                changed_cells.resize(kinds.len(), Vec::new());
                if hooked.is_ok() {
                    changed_cells[kinds.len() - 1] = rows::changed_cells(cols, &before, &c);
                }
                calls.push(hooked.map(|_| c));
            }
            Work::Run(c) => {
                kinds.push(Some(c.id.is_none()));
                calls.push(Ok(c));
            }
            Work::Fail(e) => {
                kinds.push(Some(false));
                calls.push(Err(e));
            }
        }
    }
    RowCalls {
        kinds,
        calls,
        changed_cells,
    }
}

/// Runs the `on_start` hooks of a bundle's plugins in one transaction that also stores their
/// state with the request and logs their notes. Some(reason) when a hook refused: no row
/// runs then. After contention the whole start runs again from the state it began with.
async fn start_bundle(
    jobs: &Jobs,
    plugins: &Registry,
    req: &Request,
    caller: &Caller,
    entity: &crate::schema::Entity,
    plan: &mut Plan,
) -> Result<Option<String>, StorageError> {
    let mut retry = Retry::new("upload start");
    loop {
        let mut attempt = plan.clone();
        match try_start(jobs, plugins, req, caller, entity, &mut attempt).await {
            Ok(refused) => {
                *plan = attempt;
                return Ok(refused);
            }
            Err(e) if retry.again(&e).await => continue,
            Err(e) => return Err(e),
        }
    }
}

/// One attempt at [`start_bundle`].
async fn try_start(
    jobs: &Jobs,
    plugins: &Registry,
    req: &Request,
    caller: &Caller,
    entity: &crate::schema::Entity,
    plan: &mut Plan,
) -> Result<Option<String>, StorageError> {
    let d = jobs.storage.dialect();
    let mut tx = jobs.storage.begin().await?;
    let notes = match start_in(
        jobs,
        plugins,
        tx.as_mut(),
        caller,
        &req.recorder(),
        entity,
        plan,
    )
    .await
    {
        Ok(Started::Refused(why)) => {
            tx.rollback().await?;
            jobs.log(&req.rid, &format!("refused: {why}")).await?;
            return Ok(Some(why));
        }
        Ok(Started::Ran(notes)) => notes,
        Err(e) => {
            let _ = tx.rollback().await;
            return Err(e);
        }
    };
    let params = serde_json::to_value(&*plan).map_err(io_err)?;
    jobs.store_params(tx.as_mut(), req, &params).await?;
    for n in &notes {
        add_detail(tx.as_mut(), d, &req.rid, n).await?;
    }
    tx.commit().await?;
    Ok(None)
}

/// How the `on_start` hooks of a bundle ended.
pub(super) enum Started {
    /// Their notes for the details.
    Ran(Vec<String>),
    /// A hook refused the upload: no row runs.
    Refused(String),
}

/// Runs the `on_start` hooks of a bundle's plugins inside `tx`, keeping their state in
/// `plan`. An `Err` (contention, a failed database) leaves `tx` to be rolled back.
pub(super) async fn start_in(
    jobs: &Jobs,
    plugins: &Registry,
    tx: &mut dyn crate::storage::Tx,
    caller: &Caller,
    recorder: &crate::engine::changes::Recorder,
    entity: &crate::schema::Entity,
    plan: &mut Plan,
) -> Result<Started, StorageError> {
    let bundle = plan.bundle.as_mut().expect("a bundle");
    let mut notes = Vec::new();
    for (p, settings) in plugins.of(entity) {
        let mut state = bundle.get(p.name()).cloned().unwrap_or_default();
        let mut start = crate::plugins::Start {
            engine: &jobs.engine,
            tx: &mut *tx,
            caller,
            recorder,
            state: &mut state,
            notes: Vec::new(),
            failed: None,
        };
        let r = p.on_start(settings, &mut start).await;
        notes.append(&mut start.notes);
        if let Some(e) = start.failed.take() {
            return Err(e);
        }
        if let Err(why) = r {
            return Ok(Started::Refused(why));
        }
        if !state.is_null() {
            bundle.insert(p.name().to_string(), state);
        }
    }
    Ok(Started::Ran(notes))
}

/// A chunk of records as the reader sends it, with the tails of their result lines when the
/// reader renders them (see [`Tails`]).
pub(super) struct Read {
    pub records: Vec<csv::StringRecord>,
    pub tails: Option<Result<Tails, StorageError>>,
}

/// What the reader of a run sends for each chunk: its records, and their result lines' tails
/// when the run renders them ahead (`separator`). The reader's thread has the time to spare,
/// where the preparing stage's is the busiest of the pipeline.
fn tails_ahead(
    cols: Columns,
    separator: Option<u8>,
) -> impl Fn(Vec<csv::StringRecord>) -> Read + Send + 'static {
    move |records| Read {
        tails: separator.map(|s| Tails::render(&cols, &records, s)),
        records,
    }
}

/// Reads the working copy off the async executor, skipping the header and the rows already
/// done, and sends records in chunks, each made into what the receiver takes by `make`. The
/// chunks of records that `spare` gives back are read into again: their records keep their
/// buffers, so a record costs no allocation here and no free on the thread that ran it.
pub(super) fn spawn_reader<T: Send + 'static>(
    path: std::path::PathBuf,
    separator: u8,
    skip: u64,
    tx: mpsc::Sender<T>,
    make: impl Fn(Vec<csv::StringRecord>) -> T + Send + 'static,
    spare: Option<std::sync::mpsc::Receiver<Vec<csv::StringRecord>>>,
) -> tokio::task::JoinHandle<Result<(), String>> {
    tokio::task::spawn_blocking(move || {
        let mut r = csv::ReaderBuilder::new()
            .delimiter(separator)
            .has_headers(true)
            .flexible(false)
            .from_path(&path)
            .map_err(|e| e.to_string())?;
        let mut rec = csv::StringRecord::new();
        for _ in 0..skip {
            if !r.read_record(&mut rec).map_err(|e| e.to_string())? {
                return Ok(());
            }
        }
        let next_chunk = || {
            spare
                .as_ref()
                .and_then(|s| s.try_recv().ok())
                .unwrap_or_else(|| Vec::with_capacity(CHUNK))
        };
        let mut chunk = next_chunk();
        let mut n = 0;
        loop {
            if n == chunk.len() {
                chunk.push(csv::StringRecord::new());
            }
            if !r.read_record(&mut chunk[n]).map_err(|e| e.to_string())? {
                break;
            }
            n += 1;
            if n == CHUNK {
                chunk.truncate(n);
                let full = std::mem::replace(&mut chunk, next_chunk());
                n = 0;
                if tx.blocking_send(make(full)).is_err() {
                    return Ok(());
                }
            }
        }
        chunk.truncate(n);
        if !chunk.is_empty() {
            let _ = tx.blocking_send(make(chunk));
        }
        Ok(())
    })
}
