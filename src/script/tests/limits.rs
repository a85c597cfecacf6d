//! The limits: a call that runs too long or a runtime that grows too large fails that call
//! alone, and the runtime serves the next; a runtime is reused for many calls.

use super::{FILE, call, failed, file, runtime, stored};
use crate::script::{Hook, HookError, HookFile, HookOutcome, Limits, Runtime};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// A file whose `beforeCreate` does what `r.mode` asks: loop forever, eat memory, or mark the
/// record.
const MODES: &str = "\
let calls = 0;
function beforeCreate(r) {
  calls++;
  if (r.mode === 'loop') { while (true) {} }
  if (r.mode === 'caught loop') { try { while (true) {} } catch (e) {} finally { r.finally = true; } }
  if (r.mode === 'array') { globalThis.kept = []; while (true) globalThis.kept.push('x'.repeat(1000) + calls); }
  if (r.mode === 'string') { let s = 'xy'; while (true) s = s.repeat(2); }
  if (r.mode === 'recurse') { const f = (n) => f(n + 1) + 1; f(0); }
  if (r.mode === 'job loop') { Promise.resolve().then(() => { while (true) {} }); }
  r.calls = calls;
}
";

/// Calls [`MODES`]'s `beforeCreate` in `mode`.
fn run(rt: &mut Runtime, f: &HookFile, mode: &str) -> Result<super::HookOutcome, super::HookError> {
    call(rt, f, Hook::BeforeCreate, json!({"mode": mode}), None)
}

#[test]
fn an_endless_loop_fails_within_the_time_limit_and_the_next_call_works() {
    let f = file(MODES);
    let mut rt = runtime();
    assert_eq!(stored(run(&mut rt, &f, "ok"))["calls"], json!(1));
    let started = Instant::now();
    let message = failed(run(&mut rt, &f, "loop"));
    let took = started.elapsed();
    assert_eq!(message, format!("{FILE}: the hook ran longer than 100 ms"));
    assert!(took >= Duration::from_millis(100), "stopped after {took:?}");
    assert!(took < Duration::from_secs(5), "stopped after {took:?}");
    let next = stored(run(&mut rt, &f, "ok"));
    assert_eq!(
        next["calls"],
        json!(1),
        "the file was evaluated anew after the timeout"
    );
    assert_eq!(stored(run(&mut rt, &f, "ok"))["calls"], json!(2));
}

#[test]
fn catch_and_finally_do_not_stop_a_timeout() {
    let f = file(MODES);
    let mut rt = runtime();
    let message = failed(run(&mut rt, &f, "caught loop"));
    assert_eq!(message, format!("{FILE}: the hook ran longer than 100 ms"));
    assert_eq!(stored(run(&mut rt, &f, "ok"))["calls"], json!(1));
}

#[test]
fn an_endless_promise_job_counts_against_the_call() {
    let f = file(MODES);
    let mut rt = runtime();
    let message = failed(run(&mut rt, &f, "job loop"));
    assert_eq!(message, format!("{FILE}: the hook ran longer than 100 ms"));
    assert_eq!(stored(run(&mut rt, &f, "ok"))["calls"], json!(1));
}

#[test]
fn the_time_limit_is_the_runtimes() {
    let f = file(MODES);
    let mut rt = Runtime::new(Limits {
        timeout: Duration::from_millis(20),
        ..Limits::default()
    })
    .expect("a runtime starts");
    let message = failed(run(&mut rt, &f, "loop"));
    assert_eq!(message, format!("{FILE}: the hook ran longer than 20 ms"));
}

/// A runtime whose memory runs out well before its time does.
fn small_runtime() -> Runtime {
    Runtime::new(Limits {
        timeout: Duration::from_secs(10),
        memory: 16 << 20,
    })
    .expect("a runtime starts")
}

#[test]
fn a_memory_bomb_fails_and_the_next_call_works() {
    let f = file(MODES);
    let bystander = HookFile::compile(
        Path::new("entities/other.js"),
        "let n = 0;\nfunction beforeCreate(r) { r.n = ++n; }\n",
    )
    .expect("compiles");
    let mut rt = small_runtime();
    let out = call(&mut rt, &bystander, Hook::BeforeCreate, json!({}), None);
    assert_eq!(stored(out)["n"], json!(1));
    for mode in ["array", "string", "array"] {
        let started = Instant::now();
        let message = failed(run(&mut rt, &f, mode));
        assert_eq!(
            message,
            format!("{FILE}: the hook used more than 16 MiB"),
            "{mode}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{mode}");
        assert_eq!(stored(run(&mut rt, &f, "ok"))["calls"], json!(1), "{mode}");
    }
    let out = call(&mut rt, &bystander, Hook::BeforeCreate, json!({}), None);
    assert_eq!(
        stored(out)["n"],
        json!(2),
        "another file's context is untouched"
    );
}

#[test]
fn deep_recursion_is_an_exception_at_its_line() {
    let f = file(MODES);
    let mut rt = runtime();
    let message = failed(run(&mut rt, &f, "recurse"));
    assert_eq!(
        message,
        format!("{FILE}:8: RangeError: Maximum call stack size exceeded")
    );
    assert_eq!(stored(run(&mut rt, &f, "ok"))["calls"], json!(2));
}

#[test]
fn a_runtime_serves_ten_thousand_calls() {
    let f = file("function beforeCreate(r) { r.name = r.name.toUpperCase(); }");
    let mut rt = runtime();
    let started = Instant::now();
    for i in 0..10_000 {
        let out = call(
            &mut rt,
            &f,
            Hook::BeforeCreate,
            json!({"name": format!("campaign {i}"), "budget": i, "active": true}),
            None,
        );
        assert_eq!(stored(out)["name"], json!(format!("CAMPAIGN {i}")));
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "10,000 calls took {took:?}");
}

#[test]
fn a_backtracking_regular_expression_is_stopped_in_time() {
    let f =
        file("function beforeCreate(r) {\n  r.match = /^(a+)+$/.test('a'.repeat(40) + 'b');\n}\n");
    let mut rt = runtime();
    let started = Instant::now();
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert_eq!(message, format!("{FILE}: the hook ran longer than 100 ms"));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_chunk_goes_on_after_a_record_that_ran_out_of_time_or_threw() {
    let f = super::file(
        "let seen = 0;\nfunction beforeCreate(record) {\n  seen += 1;\n  if (record.n === 2) { for (;;) {} }\n  if (record.n === 4) throw new Refuse('four', 422);\n  record.seen = seen;\n}\n",
    );
    let mut rt = Runtime::new(Limits {
        timeout: std::time::Duration::from_millis(20),
        memory: 64 << 20,
    })
    .unwrap();
    let records = (1..=5)
        .map(|n| {
            let mut m = serde_json::Map::new();
            m.insert("n".into(), n.into());
            m
        })
        .collect();
    let out = rt.call_many(&f, Hook::BeforeCreate, records, &super::caller());
    assert_eq!(out.len(), 5);
    let seen = |o: &Result<HookOutcome, HookError>| match o {
        Ok(HookOutcome::Record(r)) => r["seen"].as_i64().unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(seen(&out[0]), 1);
    assert!(
        matches!(&out[1], Err(HookError::Failed(m)) if m.contains("longer than 20 ms")),
        "{:?}",
        out[1]
    );
    // The file ran again in a new context after the timeout: its counter starts over.
    assert_eq!(seen(&out[2]), 1);
    assert_eq!(
        out[3],
        Err(HookError::Refused {
            message: "four".into(),
            status: 422
        })
    );
    assert_eq!(seen(&out[4]), 3);
}
