//! The runner's transactions. Chunks run in order; on PostgreSQL several chunks share one
//! transaction (a span), which commits with the progress (rows done, the result file's
//! length) after [`SPAN_CHUNKS`] chunks or [`SPAN_TIME`], so that the commit's round trips and
//! its WAL flush are paid once for several chunks. SQLite commits every chunk: its one writer
//! would keep every other writer waiting for a longer transaction.
//!
//! A span that cannot commit runs again from the last commit, as after a crash: it is rolled
//! back, the result file is cut back to the committed length, and its chunks are prepared and
//! run again. That happens after contention, and when a row broke a constraint in a chunk that
//! was not the first of its span (on PostgreSQL that aborts the whole transaction): that chunk
//! then runs first in a transaction of its own, where [`Engine::begin_chunk`] falls back to
//! savepoints, and the rest of the run commits every chunk.
//!
//! [`Engine::begin_chunk`]: crate::engine::Engine::begin_chunk

use super::Plan;
use super::keep;
use super::result_file::{Lines, not_run};
use super::rows::Columns;
use super::run::{Sink, io_err};
use super::stage::{Ready, Spent, Stage, Work as Prepared};
use crate::engine::Caller;
use crate::engine::batch::{Applied, Guard, Objects};
use crate::engine::changes::Pending;
use crate::engine::retry::Retry;
use crate::jobs::queue::add_details;
use crate::jobs::record::Request;
use crate::jobs::{Advance, Jobs};
use crate::storage::{Dialect, StorageError, Tx};
use std::collections::VecDeque;
use std::io::{Seek, Write};
use std::time::{Duration, Instant};

/// Chunks per transaction on PostgreSQL.
const SPAN_CHUNKS: usize = 16;
/// The longest a span stays open before it commits (after its chunk ends): the progress, the
/// lease's heartbeat and a cancel are read at its commit.
const SPAN_TIME: Duration = Duration::from_millis(250);

/// Chunks per transaction.
fn span_chunks(d: Dialect) -> usize {
    match d {
        Dialect::Sqlite => 1,
        Dialect::Postgres => SPAN_CHUNKS,
    }
}

/// Where a chunk's rows are in the working copy: read again from there when the chunk runs
/// again or is written as not run, so that a span holds no rows.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// The byte offset of its first row.
    offset: u64,
    rows: usize,
}

impl Held {
    /// Where `records` (read from the working copy, with their positions) are.
    fn of(records: &[csv::StringRecord]) -> Result<Held, StorageError> {
        let offset = records
            .first()
            .and_then(|r| r.position())
            .map(|p| p.byte())
            .ok_or_else(|| io_err("a chunk without the place of its rows"))?;
        Ok(Held {
            offset,
            rows: records.len(),
        })
    }
}

/// A chunk to run again, and whether it must be the first of its span.
struct Again {
    at: Held,
    first: bool,
}

/// The chunks run in the open transaction, not yet committed.
struct Span {
    tx: Box<dyn Tx>,
    /// Where each chunk's rows are: to run them again, or to write them as not run.
    held: Vec<Held>,
    /// Rows run in the span.
    rows: i64,
    /// Bytes of the result file written by the span.
    len: i64,
    /// Those bytes, when the result file is kept in parts.
    bytes: Vec<u8>,
    /// The progress lines of its rows: written as the request's details when it commits
    /// (background uploads; a statement between chunks would end a copy of their rows, see
    /// [`crate::storage::inserts`]), or sent to the streamed response once it has.
    lines: Vec<String>,
    /// The change records of its chunks, written when it commits.
    changes: Pending,
    applied: Applied,
    began: Instant,
}

/// A chunk to run: its records, and what the stage prepared of them (none when it must be
/// prepared again).
pub(super) struct Next {
    pub records: Vec<csv::StringRecord>,
    pub work: Option<Result<Prepared, StorageError>>,
}

/// How a chunk or a commit ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Ran (or will run again); the run goes on.
    Ran,
    /// A cancel was read at the commit: the span's rows were written as not run.
    Cancelled,
    /// Another worker holds the request: this run stops.
    LeaseLost,
}

/// What the rows of an upload run with, and where they stand.
pub(super) struct Writer<'a> {
    pub jobs: &'a Jobs,
    pub req: &'a Request,
    pub caller: &'a Caller,
    pub plan: &'a Plan,
    pub cols: &'a Columns,
    pub encoding: &'static encoding_rs::Encoding,
    pub sink: &'a Sink,
    pub out: std::fs::File,
    /// The working copy the rows are read from.
    pub source: std::path::PathBuf,
    /// Whether the result file is kept in parts in the database (see [`keep`]).
    pub parts: bool,
    /// Rows done, committed (and, after a cancel, written as not run).
    pub done: i64,
    /// The result file's committed length.
    pub cursor: i64,
    /// Bytes of the result file before `cursor` not yet stored as a part (the header, until
    /// the first commit).
    pub unsaved: Vec<u8>,
    /// Rows done when a cancel was seen; the rest are written as not run.
    pub cancelled_at: Option<i64>,
    span: Option<Span>,
    again: VecDeque<Again>,
    limit: usize,
    retry: Retry,
    /// Set when another worker took the request over.
    lost: bool,
}

impl<'a> Writer<'a> {
    #[expect(clippy::too_many_arguments, reason = "the parts of one run, named")]
    pub fn new(
        jobs: &'a Jobs,
        req: &'a Request,
        caller: &'a Caller,
        plan: &'a Plan,
        cols: &'a Columns,
        sink: &'a Sink,
        out: std::fs::File,
        source: std::path::PathBuf,
        cursor: i64,
        unsaved: Vec<u8>,
        parts: bool,
    ) -> Writer<'a> {
        Writer {
            jobs,
            req,
            caller,
            plan,
            cols,
            encoding: plan.encoding(),
            sink,
            out,
            source,
            parts,
            done: req.done,
            cursor,
            unsaved,
            cancelled_at: None,
            span: None,
            again: VecDeque::new(),
            limit: span_chunks(jobs.storage.dialect()),
            retry: Retry::new("upload chunk"),
            lost: false,
        }
    }

    /// The next chunk to run: one to run again, else the stage's next. At the end of the
    /// rows the open span commits; None once nothing is left.
    pub async fn next(&mut self, stage: &mut Stage) -> Result<Option<Next>, StorageError> {
        loop {
            if let Some(Again { at, first }) = self.again.pop_front() {
                if first && self.span.is_some() {
                    // It runs after the span commits, in a transaction of its own.
                    self.again.push_front(Again { at, first });
                    if self.commit(stage).await? == Step::LeaseLost {
                        return Ok(None);
                    }
                    continue;
                }
                return Ok(Some(Next {
                    records: self.reread(at)?,
                    work: None,
                }));
            }
            if let Some(Ready { records, work }) = stage.next().await {
                return Ok(Some(Next { records, work }));
            }
            if self.span.is_none() {
                return Ok(None);
            }
            if self.commit(stage).await? == Step::LeaseLost {
                return Ok(None);
            }
        }
    }

    /// Writes `records` to the result file as not run, with `text` as their result.
    pub fn not_run(
        &mut self,
        records: &[csv::StringRecord],
        text: &str,
    ) -> Result<(), StorageError> {
        let bytes = not_run(self.plan, self.cols, records, self.encoding, text)?;
        self.out.write_all(&bytes).map_err(io_err)?;
        self.cursor += bytes.len() as i64;
        self.done += records.len() as i64;
        Ok(())
    }

    /// Executes `prepared` in the open span, or in a new span it opens. `None` when a row
    /// broke a constraint and aborted the span (see [`crate::engine::Engine::continue_chunk`]).
    async fn execute(
        &mut self,
        prepared: &[Result<crate::engine::prepare::Prepared, crate::engine::CallError>],
    ) -> Result<Option<Vec<crate::engine::Outcome>>, StorageError> {
        let engine = &self.jobs.engine;
        let rec = self.req.recorder();
        match &mut self.span {
            None => {
                // No savepoints unless a row of this chunk fails (see `Engine::begin_chunk`).
                let mut guard = Guard::Optimistic;
                let mut changes = Pending::default();
                let began = Instant::now();
                engine
                    .begin_chunk(
                        self.caller,
                        prepared,
                        Objects::Ids,
                        Some(&rec),
                        Some(&mut changes),
                        &mut guard,
                        true,
                    )
                    .await
                    .map(|(tx, ran)| {
                        let outcomes = ran.finish();
                        self.span = Some(Span {
                            tx,
                            held: Vec::new(),
                            rows: 0,
                            len: 0,
                            bytes: Vec::new(),
                            lines: Vec::new(),
                            changes,
                            applied: Applied::default(),
                            began,
                        });
                        Some(outcomes)
                    })
            }
            Some(span) => {
                let tx = span.tx.as_mut();
                let changes = Some(&mut span.changes);
                engine
                    .continue_chunk(tx, self.caller, prepared, Some(&rec), changes)
                    .await
            }
        }
    }

    /// Runs a chunk in the open span (or a new one) and commits the span when it is full.
    pub async fn run(&mut self, stage: &Stage, next: Next) -> Result<Step, StorageError> {
        let Next { records, work } = next;
        let Prepared {
            kinds,
            changed_cells,
            prepared,
            tails,
        } = stage.work(work, &records).await?;
        let ran = self.execute(&prepared).await;
        let outcomes = match ran {
            Ok(Some(outcomes)) => outcomes,
            Ok(None) => {
                // A row broke a constraint and aborted the span: this chunk runs first in a
                // transaction of its own, and from now on every chunk commits by itself.
                self.limit = 1;
                self.again.push_front(Again {
                    at: Held::of(&records)?,
                    first: true,
                });
                self.roll_back().await?;
                return Ok(Step::Ran);
            }
            Err(e) => return self.give_back(records, e).await,
        };
        let span = self.span.as_mut().expect("a span is open");
        let lines = Lines {
            first_line: self.done + span.rows + 1,
            records: &records,
            kinds: &kinds,
            changed_cells: &changed_cells,
            want_lines: !matches!(self.sink, Sink::Quiet),
            tails: tails.as_ref(),
        };
        let (bytes, lines) = lines.render(self.plan, self.cols, self.encoding, &outcomes)?;
        self.out.write_all(&bytes).map_err(io_err)?;
        span.rows += records.len() as i64;
        span.len += bytes.len() as i64;
        span.applied.merge(Applied::of(&prepared, &outcomes));
        span.held.push(Held::of(&records)?);
        if self.parts {
            span.bytes.extend_from_slice(&bytes);
        }
        if !matches!(self.sink, Sink::Quiet) {
            span.lines.extend(lines);
        }
        let full = span.held.len() >= self.limit || span.began.elapsed() >= SPAN_TIME;
        stage.recycle(Spent {
            records,
            prepared,
            outcomes,
        });
        if full {
            return self.commit(stage).await;
        }
        Ok(Step::Ran)
    }

    /// Commits the open span with the progress, which also reads the cancel flag in the
    /// span's own transaction: a cancel committed before it is seen here (the span is rolled
    /// back, its rows written as not run), and one after it waits for the span.
    pub async fn commit(&mut self, stage: &Stage) -> Result<Step, StorageError> {
        let Some(mut span) = self.span.take() else {
            return Ok(Step::Ran);
        };
        self.out.flush().map_err(io_err)?;
        let done = self.done + span.rows;
        let cursor = self.cursor + span.len;
        let d = self.jobs.storage.dialect();
        let changes = std::mem::take(&mut span.changes);
        let recorded = async {
            if matches!(self.sink, Sink::Details) && !span.lines.is_empty() {
                add_details(span.tx.as_mut(), d, &self.req.rid, &span.lines).await?;
            }
            changes
                .write(&self.req.recorder(), span.tx.as_mut(), d)
                .await?;
            let advance = self
                .jobs
                .advance_unless_cancelled(span.tx.as_mut(), self.req, done, Some(cursor))
                .await?;
            if advance == Advance::Recorded && self.parts {
                let part = [self.unsaved.as_slice(), span.bytes.as_slice()].concat();
                let at = cursor - part.len() as i64;
                keep::add_part(span.tx.as_mut(), d, &self.req.rid, at, &part).await?;
            }
            Ok::<_, StorageError>(advance)
        }
        .await;
        let recorded = match recorded {
            Ok(Advance::Recorded) => span.tx.commit().await.map(|_| Advance::Recorded),
            Ok(other) => {
                let _ = span.tx.rollback().await;
                Ok(other)
            }
            Err(e) => {
                let _ = span.tx.rollback().await;
                Err(e)
            }
        };
        match recorded {
            Ok(Advance::Recorded) => {}
            Ok(Advance::LeaseLost) => {
                self.lost = true;
                tracing::warn!(rid = %self.req.rid, "lost the lease of an upload; another worker has it");
                return Ok(Step::LeaseLost);
            }
            Ok(Advance::Cancelled) => {
                // The span's rows and every later one are written as not run.
                self.cut_back()?;
                self.cancelled_at = Some(self.done);
                stage.skip_rest();
                for at in span.held {
                    let records = self.reread(at)?;
                    self.not_run(&records, crate::jobs::NOT_RUN)?;
                }
                return Ok(Step::Cancelled);
            }
            Err(e) => {
                // The transaction is gone: its chunks run again.
                self.requeue(span.held);
                self.cut_back()?;
                return self.retry(e).await;
            }
        }
        self.done = done;
        self.cursor = cursor;
        self.unsaved.clear();
        self.retry = Retry::new("upload chunk");
        self.jobs.engine.announce(span.applied);
        if let Sink::Stream(s) = self.sink {
            for l in span.lines {
                let _ = s.send(l).await;
            }
        }
        Ok(Step::Ran)
    }

    /// After `e` in the open span (or in the chunk `records` that began none): rolls it back
    /// and, after contention, runs its chunks and `records` again.
    async fn give_back(
        &mut self,
        records: Vec<csv::StringRecord>,
        e: StorageError,
    ) -> Result<Step, StorageError> {
        if !records.is_empty() {
            self.again.push_front(Again {
                at: Held::of(&records)?,
                first: false,
            });
        }
        self.roll_back().await?;
        self.retry(e).await
    }

    /// Pauses and goes on after contention; any other error ends the run.
    async fn retry(&mut self, e: StorageError) -> Result<Step, StorageError> {
        if self.retry.again(&e).await {
            Ok(Step::Ran)
        } else {
            Err(e)
        }
    }

    /// Rolls the open span back: its chunks run again, first, and the result file is cut
    /// back to its committed length.
    async fn roll_back(&mut self) -> Result<(), StorageError> {
        if let Some(span) = self.span.take() {
            let _ = span.tx.rollback().await;
            self.requeue(span.held);
        }
        self.cut_back()
    }

    /// Puts the chunks of a span that did not commit back in front of what runs next.
    fn requeue(&mut self, held: Vec<Held>) {
        for at in held.into_iter().rev() {
            self.again.push_front(Again { at, first: false });
        }
    }

    /// The rows of a chunk read again from the working copy, with their positions in it.
    fn reread(&self, at: Held) -> Result<Vec<csv::StringRecord>, StorageError> {
        let mut file = std::fs::File::open(&self.source).map_err(io_err)?;
        file.seek(std::io::SeekFrom::Start(at.offset))
            .map_err(io_err)?;
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(self.plan.layout.separator)
            .has_headers(false)
            .flexible(false)
            .from_reader(file);
        let mut records = Vec::with_capacity(at.rows);
        for r in reader.records().take(at.rows) {
            let mut r = r.map_err(io_err)?;
            if let Some(p) = r.position() {
                let mut p = p.clone();
                p.set_byte(p.byte() + at.offset);
                r.set_position(Some(p));
            }
            records.push(r);
        }
        if records.len() != at.rows {
            return Err(io_err("the working copy ends before the rows of a chunk"));
        }
        Ok(records)
    }

    /// Cuts the result file back to its committed length.
    fn cut_back(&mut self) -> Result<(), StorageError> {
        self.out.set_len(self.cursor as u64).map_err(io_err)?;
        self.out.seek(std::io::SeekFrom::End(0)).map_err(io_err)?;
        Ok(())
    }

    /// Whether another worker took the request over: this run stops.
    pub fn lease_lost(&self) -> bool {
        self.lost
    }

    /// Flushes the result file and hands it back, with the rows done.
    pub fn finish(mut self) -> Result<(std::fs::File, i64), StorageError> {
        self.out.flush().map_err(io_err)?;
        Ok((self.out, self.done))
    }
}
