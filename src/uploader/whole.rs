//! Whole uploads: a dry run, or all or nothing (see [`crate::engine::whole`]). Every row runs
//! in one transaction, chunk after chunk, as a normal upload runs them; nothing (not its
//! progress either) commits before the end. Then the effects commit with the end of the
//! request (all rows succeeded, not a dry run), or roll back, and the end is recorded alone.
//! A run that stops before its end (crash, shutdown, a lost lease) leaves nothing, and runs
//! again from the first row.
//!
//! The result file is written as the rows run. When an all-or-nothing upload failed it is
//! written again: failing rows keep their error, every other row says it was not applied
//! because the first failing line failed. Per-row progress lines go to a scratch file and
//! reach the details (or the streamed reply) once the outcome is known.

use super::Plan;
use super::result_file::{Lines, not_run, open_result};
use super::rows::{self, Columns, Work};
use super::run::{
    Bundles, RowCalls, Sink, Started, calls_of, hooks_of, io_err, spawn_reader, start_in,
};
use crate::engine::retry::Retry;
use crate::engine::whole::not_applied;
use crate::engine::{CallError, Caller, Outcome};
use crate::jobs::queue::add_details;
use crate::jobs::record::Request;
use crate::jobs::{CANCELLED, Ending, FINISHED, Jobs, NOT_RUN};
use crate::schema::Entity;
use crate::storage::{StorageError, Tx};
use std::collections::HashMap;
use std::io::{BufRead, Seek, Write};
use std::path::{Path, PathBuf};
use tokio::sync::{mpsc, watch};

/// Details entries per statement when the lines are recorded.
const DETAILS_PER_INSERT: usize = 5000;

/// How a whole run's rows ended.
enum Verdict {
    /// The run stopped before its end (shutdown, lost lease): nothing recorded.
    Stopped,
    /// Recorded; whether the rows' effects were applied.
    Ended { applied: bool },
}

/// What every attempt shares.
struct Whole<'a> {
    jobs: &'a Jobs,
    bundles: &'a Bundles<'a>,
    req: &'a Request,
    caller: &'a Caller,
    stop: &'a watch::Receiver<bool>,
    plan: &'a Plan,
    entity: &'a Entity,
    cols: &'a Columns,
    result_path: PathBuf,
    rel: String,
    lines_path: PathBuf,
    want_lines: bool,
}

/// Runs a whole upload from its first row and ends it.
pub(super) async fn rows(
    jobs: &Jobs,
    bundles: &Bundles<'_>,
    req: &Request,
    caller: &Caller,
    sink: Sink,
    stop: &watch::Receiver<bool>,
    (plan, entity, cols): (&Plan, &Entity, &Columns),
) -> Result<(), StorageError> {
    let started = std::time::Instant::now();
    let data_dir = &jobs.settings.data_dir;
    // On this server's disk before the first pass reads it.
    super::keep::working_copy(jobs, plan).await?;
    let (result_path, rel) = super::result_location(data_dir, &req.rid);
    let w = Whole {
        jobs,
        bundles,
        req,
        caller,
        stop,
        plan,
        entity,
        cols,
        result_path,
        rel,
        lines_path: super::intake::work_dir(data_dir).join(format!("{}.lines", req.rid)),
        want_lines: !matches!(sink, Sink::Quiet),
    };
    // Another worker may not take the request over while its transaction is open.
    let lease = jobs.keep_lease(req);
    let mut retry = Retry::new("whole upload");
    let verdict = loop {
        match w.attempt(matches!(sink, Sink::Details)).await {
            Ok(v) => break v,
            Err(e) if retry.again(&e).await => continue,
            Err(e) => {
                let _ = std::fs::remove_file(&w.lines_path);
                return Err(e);
            }
        }
    };
    drop(lease);
    if let Verdict::Ended { applied } = verdict {
        if !applied {
            for prefix in &plan.stored {
                if let Err(e) = bundles.files.remove_prefix(prefix).await {
                    tracing::warn!(prefix, error = %e, "cannot remove the stored files of an upload that applied nothing");
                }
            }
        }
        if let Sink::Stream(s) = &sink {
            for line in read_lines(&w.lines_path)? {
                if s.send(line).await.is_err() {
                    break;
                }
            }
        }
        super::keep::drop_working_copy(jobs, plan).await;
        super::keep::drop_local_result(jobs, &w.result_path).await;
        tracing::info!(rid = %req.rid, applied, elapsed_ms = started.elapsed().as_millis() as u64, "whole upload done");
    }
    let _ = std::fs::remove_file(&w.lines_path);
    Ok(())
}

/// The lines of a progress file.
fn read_lines(path: &Path) -> Result<Vec<String>, StorageError> {
    match std::fs::File::open(path) {
        Ok(f) => std::io::BufReader::new(f)
            .lines()
            .collect::<Result<_, _>>()
            .map_err(io_err),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_err(e)),
    }
}

/// What the first pass saw.
#[derive(Default)]
struct Pass {
    /// Rows read.
    done: i64,
    /// Failing lines and their errors.
    failures: HashMap<i64, CallError>,
    /// The first failing line.
    first_failed: Option<i64>,
    /// A cancel was seen before the end.
    cancelled: bool,
    /// Why no row ran (a bundle's start was refused).
    refused: Option<String>,
    /// Users changed by calls that succeeded: their cached credentials go once applied.
    users: Vec<i64>,
}

impl Whole<'_> {
    /// One attempt: the rows, the decision and the end, in one transaction (two when the
    /// effects are rolled back). An `Err` leaves nothing recorded.
    async fn attempt(&self, details: bool) -> Result<Verdict, StorageError> {
        let jobs = self.jobs;
        let mut out = open_result(self.plan, &self.result_path, self.cols, 0)?;
        let header_len = out.stream_position().map_err(io_err)?;
        let mut lines = self.lines_file()?;
        let mut tx = jobs.storage.begin().await?;
        // Its chunks share one copy of their creates (PostgreSQL).
        tx.copy_groups();
        // On SQLite the one writer is held from here until the end is recorded.
        let held = std::time::Instant::now();
        let pass = match self.first_pass(tx.as_mut(), &mut out, &mut lines).await {
            Ok(Some(p)) => p,
            Ok(None) => {
                tx.rollback().await?;
                return Ok(Verdict::Stopped);
            }
            Err(e) => {
                let _ = tx.rollback().await;
                return Err(e);
            }
        };
        let mode = self.plan.mode;
        let applied =
            !pass.cancelled && pass.refused.is_none() && mode.applies(pass.first_failed.is_some());
        // Nothing to keep: the writer is let go while the result is written again.
        let mut kept = Some(tx);
        if !applied && let Some(tx) = kept.take() {
            tx.rollback().await?;
        }
        let rewrite = if pass.cancelled {
            Some(None)
        } else if mode.atomic && pass.refused.is_none() {
            pass.first_failed.map(|n| Some((n, &pass.failures)))
        } else {
            None
        };
        if let Some(failed) = rewrite {
            out.set_len(header_len).map_err(io_err)?;
            out.seek(std::io::SeekFrom::End(0)).map_err(io_err)?;
            // The first pass's lines are void. Its writer goes first: dropped after the file
            // was made anew, it would flush its buffer into the new file at its old offset.
            drop(lines.take());
            lines = self.lines_file()?;
            self.second_pass(&mut out, &mut lines, failed).await?;
        }
        out.flush().map_err(io_err)?;
        if let Some(l) = lines.as_mut() {
            l.flush().map_err(io_err)?;
        }
        let cursor = out.stream_position().map_err(io_err)? as i64;
        // Stored before the end is recorded: a request that ended has its result file.
        super::keep::publish_result(jobs, &self.rel, &self.result_path).await?;
        let mut tx = match kept {
            Some(tx) => tx,
            None => jobs.storage.begin().await?,
        };
        let recorded = self
            .record(tx.as_mut(), &pass, applied, cursor, details)
            .await;
        match recorded {
            Ok(true) => {
                tx.commit().await?;
                jobs.drop_spent(self.req).await;
                tracing::info!(
                    rid = %self.req.rid,
                    rows = pass.done,
                    applied,
                    held_ms = held.elapsed().as_millis() as u64,
                    "whole upload committed"
                );
                if applied {
                    for id in &pass.users {
                        (jobs.engine.user_changed)(*id);
                    }
                }
                Ok(Verdict::Ended { applied })
            }
            Ok(false) => {
                let _ = tx.rollback().await;
                tracing::warn!(rid = %self.req.rid, "lost the lease of an upload; another worker has it");
                Ok(Verdict::Stopped)
            }
            Err(e) => {
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }

    /// A new, empty progress file when lines are wanted.
    fn lines_file(&self) -> Result<Option<std::io::BufWriter<std::fs::File>>, StorageError> {
        if !self.want_lines {
            return Ok(None);
        }
        let f = std::fs::File::create(&self.lines_path).map_err(io_err)?;
        Ok(Some(std::io::BufWriter::new(f)))
    }

    /// Starts the bundle's plugins inside `tx` (logging their notes); why no row runs when
    /// one refused.
    async fn start_bundle(
        &self,
        tx: &mut dyn Tx,
        run_plan: &mut Plan,
    ) -> Result<Option<String>, StorageError> {
        let jobs = self.jobs;
        let (plugins, entity) = (self.bundles.plugins, self.entity);
        let recorder = self.req.recorder();
        match start_in(jobs, plugins, tx, self.caller, &recorder, entity, run_plan).await? {
            Started::Ran(notes) => {
                if !notes.is_empty() {
                    add_details(tx, jobs.storage.dialect(), &self.req.rid, &notes).await?;
                }
                Ok(None)
            }
            Started::Refused(why) => Ok(Some(why)),
        }
    }

    /// Notes in `pass` what the rows of lines `ran` came to: each failure, and the users
    /// named by id or key; a dry run's saves are told as creates where they would create.
    async fn note_outcomes(
        &self,
        pass: &mut Pass,
        ran: impl Iterator<Item = i64>,
        outcomes: &mut [Outcome],
        prepared: &[Result<crate::engine::prepare::Prepared, CallError>],
    ) {
        let jobs = self.jobs;
        for ((line, o), p) in ran.zip(outcomes.iter_mut()).zip(prepared) {
            match o {
                Err(e) => {
                    pass.failures.insert(line, e.clone());
                    pass.first_failed.get_or_insert(line);
                }
                Ok(_) if self.plan.mode.dry_run => {
                    if let Ok(p) = p {
                        jobs.engine.unborn_in_dry_run(p, o).await;
                    }
                }
                Ok(obj) => {
                    // A user named by id or by key (login): its id is in the outcome.
                    if let Ok(p) = p
                        && p.entity.name == "users"
                        && p.op != crate::engine::Op::Create
                        && let Some(id) = p.id.or_else(|| crate::engine::outcome_id(obj))
                    {
                        pass.users.push(id);
                    }
                }
            }
        }
    }

    /// Runs every row inside `tx`, writing the result file and the progress lines as they
    /// would be. None when the run must stop.
    async fn first_pass(
        &self,
        tx: &mut dyn Tx,
        out: &mut std::fs::File,
        lines: &mut Option<std::io::BufWriter<std::fs::File>>,
    ) -> Result<Option<Pass>, StorageError> {
        let jobs = self.jobs;
        let (plan, cols) = (self.plan, self.cols);
        let encoding = plan.encoding();
        let mut pass = Pass::default();
        let mut run_plan = plan.clone();
        if run_plan.bundle.is_some() {
            pass.refused = self.start_bundle(tx, &mut run_plan).await?;
        }
        let hooks = hooks_of(self.bundles.plugins, self.entity, &run_plan);
        let (tx_rows, mut rx_rows) = mpsc::channel::<Vec<csv::StringRecord>>(1);
        let reader = spawn_reader(
            plan.working_copy(&jobs.settings.data_dir),
            plan.layout.separator,
            0,
            tx_rows,
            |records| records,
            None,
        );
        while let Some(records) = rx_rows.recv().await {
            if *self.stop.borrow() {
                return Ok(None);
            }
            // Storage calls may complete without suspending; let other tasks run.
            tokio::task::yield_now().await;
            let first_line = pass.done + 1;
            pass.done += records.len() as i64;
            if let Some(why) = &pass.refused {
                let text = format!("not run: {why}");
                out.write_all(&not_run(plan, cols, &records, encoding, &text)?)
                    .map_err(io_err)?;
                continue;
            }
            if pass.cancelled {
                continue;
            }
            if jobs.cancel_requested_in(tx, &self.req.rid).await? {
                pass.cancelled = true;
                continue;
            }
            let RowCalls {
                kinds,
                calls,
                changed_cells,
            } = calls_of(cols, self.entity, &records, &hooks);
            let prepared = jobs.engine.prepare_chunk(self.caller, calls).await;
            let mut outcomes = jobs
                .engine
                .execute_chunk(
                    tx,
                    self.caller,
                    &prepared,
                    false,
                    Some(&self.req.recorder()),
                )
                .await?;
            let ran = kinds
                .iter()
                .enumerate()
                .filter_map(|(i, k)| k.map(|_| first_line + i as i64));
            self.note_outcomes(&mut pass, ran, &mut outcomes, &prepared)
                .await;
            let chunk = Lines {
                first_line,
                records: &records,
                kinds: &kinds,
                changed_cells: &changed_cells,
                want_lines: self.want_lines,
                tails: None,
            };
            let (bytes, rendered) = chunk.render(plan, cols, encoding, &outcomes)?;
            out.write_all(&bytes).map_err(io_err)?;
            write_lines(lines, &rendered)?;
        }
        reader.await.map_err(io_err)?.map_err(io_err)?;
        Ok(Some(pass))
    }

    /// Writes the result file and the progress lines again from the working copy: every row
    /// not run (`failed` None: cancelled), or, for an all-or-nothing upload whose line
    /// `failed.0` failed, each failing row with its error and every other one not applied.
    async fn second_pass(
        &self,
        out: &mut std::fs::File,
        lines: &mut Option<std::io::BufWriter<std::fs::File>>,
        failed: Option<(i64, &HashMap<i64, CallError>)>,
    ) -> Result<(), StorageError> {
        let (plan, cols) = (self.plan, self.cols);
        let encoding = plan.encoding();
        let (tx_rows, mut rx_rows) = mpsc::channel::<Vec<csv::StringRecord>>(1);
        let reader = spawn_reader(
            plan.working_copy(&self.jobs.settings.data_dir),
            plan.layout.separator,
            0,
            tx_rows,
            |records| records,
            None,
        );
        let mut done = 0i64;
        while let Some(records) = rx_rows.recv().await {
            let first_line = done + 1;
            done += records.len() as i64;
            let Some((first_failed, failures)) = failed else {
                out.write_all(&not_run(plan, cols, &records, encoding, NOT_RUN)?)
                    .map_err(io_err)?;
                continue;
            };
            let why = not_applied(&format!("line {first_failed}"));
            let kinds: Vec<Option<bool>> = records
                .iter()
                .map(|r| match rows::work(cols, self.entity, r) {
                    Work::Skip => None,
                    Work::Run(c) => Some(c.op == crate::engine::Op::Create),
                    Work::Fail(_) => Some(false),
                })
                .collect();
            let outcomes: Vec<Outcome> = kinds
                .iter()
                .enumerate()
                .filter(|(_, k)| k.is_some())
                .map(|(i, _)| {
                    let line = first_line + i as i64;
                    Err(failures.get(&line).cloned().unwrap_or_else(|| why.clone()))
                })
                .collect();
            let chunk = Lines {
                first_line,
                records: &records,
                kinds: &kinds,
                changed_cells: &[],
                want_lines: self.want_lines,
                tails: None,
            };
            let (bytes, rendered) = chunk.render(plan, cols, encoding, &outcomes)?;
            out.write_all(&bytes).map_err(io_err)?;
            write_lines(lines, &rendered)?;
            // Reading and rendering only: let other tasks run.
            tokio::task::yield_now().await;
        }
        reader.await.map_err(io_err)?.map_err(io_err)?;
        Ok(())
    }

    /// Records the end in `tx`: the progress lines (to the details), the progress and the
    /// request's end. False when the lease is gone.
    async fn record(
        &self,
        tx: &mut dyn Tx,
        pass: &Pass,
        applied: bool,
        cursor: i64,
        details: bool,
    ) -> Result<bool, StorageError> {
        let jobs = self.jobs;
        let d = jobs.storage.dialect();
        let rid = &self.req.rid;
        if details && self.want_lines {
            let all = read_lines(&self.lines_path)?;
            for part in all.chunks(DETAILS_PER_INSERT) {
                add_details(tx, d, rid, part).await?;
            }
        }
        if !jobs.advance(tx, self.req, pass.done, Some(cursor)).await? {
            return Ok(false);
        }
        let mode = self.plan.mode;
        let failed = pass.first_failed;
        let (status_id, status, last) = match (&pass.refused, pass.cancelled) {
            (Some(why), _) => (FINISHED, 400, format!("refused: {why}")),
            (None, true) => (
                CANCELLED,
                200,
                "cancelled before the end: nothing was applied, no line ran".to_string(),
            ),
            (None, false) => {
                let text = match (mode.dry_run, mode.atomic, failed) {
                    (true, true, Some(n)) => format!(
                        "dry run: line {n} failed, so nothing would be applied (all or nothing); nothing was applied"
                    ),
                    (true, _, _) => "dry run: nothing was applied".to_string(),
                    (false, _, Some(n)) => {
                        format!("all or nothing: line {n} failed, so nothing was applied")
                    }
                    (false, _, None) => "done: every line was applied".to_string(),
                };
                (FINISHED, 200, text)
            }
        };
        debug_assert!(!applied || (status_id == FINISHED && failed.is_none()));
        let ctype = format!("text/csv; charset={}", self.plan.encoding().name());
        let end = Ending {
            status_id,
            status,
            content_type: &ctype,
            path: &self.rel,
            last_detail: &last,
        };
        jobs.close_in(tx, self.req, &end).await
    }
}

fn write_lines(
    lines: &mut Option<std::io::BufWriter<std::fs::File>>,
    rendered: &[String],
) -> Result<(), StorageError> {
    if let Some(l) = lines {
        for line in rendered {
            l.write_all(line.as_bytes()).map_err(io_err)?;
            l.write_all(b"\n").map_err(io_err)?;
        }
    }
    Ok(())
}
