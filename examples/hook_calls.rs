//! Hook call benchmark: how many calls a second one runtime makes to a `beforeCreate` hook
//! that upper-cases one field of a five-field record, values crossing both ways.
//!
//! ```text
//! cargo run --release --example hook_calls
//! cargo run --release --example hook_calls -- --calls 500000 --runs 7
//! cargo run --release --example hook_calls -- --chunk 1000   # as an upload's chunks do
//! ```
//!
//! The file is compiled once and called through one [`Runtime`] as a worker would: after a
//! warm-up, `--runs` runs of `--calls` calls each; every result is checked. Prints each run's
//! calls per second, their median, the time per call and the process's resident memory; then
//! how long compiling the file takes (a runtime and a context of its own, the file evaluated).

use anyhow::{Result, ensure};
use clap::Parser;
use entiserve::script::{CallerInfo, Hook, HookFile, HookOutcome, Limits, Runtime};
use serde_json::{Map, Value, json};
use std::path::Path;
use std::time::Instant;

/// The hook measured.
const HOOK: &str =
    "function beforeCreate(record, ctx) {\n  record.name = record.name.toUpperCase();\n}\n";

#[derive(Parser)]
struct Args {
    /// Calls per run.
    #[arg(long, default_value_t = 200_000)]
    calls: usize,
    /// Runs; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Records per entry into JavaScript ([`Runtime::call_many`]); 1 calls one at a time.
    #[arg(long, default_value_t = 1)]
    chunk: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let file = HookFile::compile(Path::new("campaigns.js"), HOOK)?;
    let mut runtime = Runtime::new(Limits::default())?;
    let caller = CallerInfo {
        id: 1,
        login: "admin".into(),
        role: "admin".into(),
    };
    let record = |i: usize| -> Map<String, Value> {
        let value = json!({
            "name": format!("spring sale {i}"),
            "budget": "1250.50",
            "active": true,
            "starts_at": "2025-03-01T09:00:00Z",
            "owner_id": 42,
        });
        match value {
            Value::Object(map) => map,
            _ => unreachable!("an object literal"),
        }
    };
    let mut one_run = |calls: usize| -> Result<f64> {
        let started = Instant::now();
        let chunk = args.chunk.max(1);
        for first in (0..calls).step_by(chunk) {
            let last = (first + chunk).min(calls);
            let outs = if chunk == 1 {
                vec![runtime.call(&file, Hook::BeforeCreate, record(first), None, &caller)]
            } else {
                let records = (first..last).map(record).collect();
                runtime.call_many(&file, Hook::BeforeCreate, records, &caller)
            };
            for (i, out) in (first..last).zip(outs) {
                let HookOutcome::Record(stored) = out? else {
                    anyhow::bail!("beforeCreate gave no record");
                };
                ensure!(stored["name"] == json!(format!("SPRING SALE {i}")));
            }
        }
        Ok(calls as f64 / started.elapsed().as_secs_f64())
    };
    one_run(args.calls / 10)?;
    let mut rates = Vec::with_capacity(args.runs);
    for run in 1..=args.runs {
        let rate = one_run(args.calls)?;
        eprintln!("run {run}: {rate:.0} calls/s");
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "beforeCreate upper-casing one field of a 5-field record: {median:.0} calls/s \
         (median of {} runs of {} calls), {:.2} µs per call, RSS {} MB",
        args.runs,
        args.calls,
        1e6 / median,
        resident_mb()
    );
    let started = Instant::now();
    for _ in 0..1000 {
        HookFile::compile(Path::new("campaigns.js"), HOOK)?;
    }
    println!(
        "compiling the file (a new runtime and context, the file evaluated): {:.0} µs",
        started.elapsed().as_secs_f64() * 1e6 / 1000.0
    );
    Ok(())
}

/// The process's resident memory in MB, from `/proc/self/statm` (0 where there is none).
fn resident_mb() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    pages * 4096 / 1_000_000
}
