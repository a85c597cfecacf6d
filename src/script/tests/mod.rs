//! Tests of the hook runtime: compiling files ([`compile`]), each hook ([`hooks`]), refusals
//! ([`refuse`]), values crossing over ([`values`]), the sandbox ([`sandbox`]) and the limits
//! ([`limits`]). Helpers shared by them are here.

mod compile;
mod hooks;
mod limits;
mod refuse;
mod sandbox;
mod values;

use super::{CallerInfo, Hook, HookError, HookFile, HookOutcome, Limits, Runtime};
use serde_json::{Map, Value as Json};
use std::path::Path;

/// The name every test file is compiled under.
const FILE: &str = "entities/campaigns.js";

/// `source` compiled as [`FILE`]; panics on a compile error.
fn file(source: &str) -> HookFile {
    HookFile::compile(Path::new(FILE), source)
        .unwrap_or_else(|e| panic!("the test file should compile: {e}"))
}

/// The compile error of `source`, as people read it.
fn compile_error(source: &str) -> String {
    match HookFile::compile(Path::new(FILE), source) {
        Ok(_) => panic!("the test file should not compile"),
        Err(e) => e.to_string(),
    }
}

/// A runtime with the default limits.
fn runtime() -> Runtime {
    Runtime::new(Limits::default()).expect("a runtime starts")
}

/// The caller of every test call.
fn caller() -> CallerInfo {
    CallerInfo {
        id: 7,
        login: "ada".into(),
        role: "editor".into(),
    }
}

/// `json`, which must be an object, as a record.
fn record(json: Json) -> Map<String, Json> {
    match json {
        Json::Object(map) => map,
        other => panic!("a record is an object, not {other}"),
    }
}

/// Calls `hook` of `file` on `rec` (and `old`) as [`caller`].
fn call(
    rt: &mut Runtime,
    file: &HookFile,
    hook: Hook,
    rec: Json,
    old: Option<Json>,
) -> Result<HookOutcome, HookError> {
    rt.call(file, hook, record(rec), old.map(record), &caller())
}

/// The record a `before*` hook gave; panics on anything else.
fn stored(outcome: Result<HookOutcome, HookError>) -> Json {
    match outcome {
        Ok(HookOutcome::Record(map)) => Json::Object(map),
        other => panic!("the hook should give a record, not {other:?}"),
    }
}

/// The message of a failed call; panics on anything else.
fn failed(outcome: Result<HookOutcome, HookError>) -> String {
    match outcome {
        Err(HookError::Failed(message)) => message,
        other => panic!("the hook should fail, not {other:?}"),
    }
}
