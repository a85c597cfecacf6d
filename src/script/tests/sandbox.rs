//! The sandbox: nothing but ECMAScript's built-ins and `Refuse`; no module loader, no host
//! objects.

use super::{FILE, call, compile_error, failed, file, runtime, stored};
use crate::script::Hook;
use serde_json::json;

/// The global names a context may hold: ECMAScript's built-ins as QuickJS gives them
/// (explicit resource management's `DisposableStack` and `SuppressedError` among them, and
/// `DOMException`, an error class with no powers), and `Refuse`.
const ALLOWED: &[&str] = &[
    "AggregateError",
    "Array",
    "ArrayBuffer",
    "AsyncDisposableStack",
    "Atomics",
    "BigInt",
    "BigInt64Array",
    "BigUint64Array",
    "Boolean",
    "DOMException",
    "DataView",
    "Date",
    "DisposableStack",
    "Error",
    "EvalError",
    "FinalizationRegistry",
    "Float16Array",
    "Float32Array",
    "Float64Array",
    "Function",
    "Infinity",
    "Int16Array",
    "Int32Array",
    "Int8Array",
    "InternalError",
    "Iterator",
    "JSON",
    "Map",
    "Math",
    "NaN",
    "Number",
    "Object",
    "Promise",
    "Proxy",
    "RangeError",
    "ReferenceError",
    "Reflect",
    "RegExp",
    "Refuse",
    "Set",
    "SharedArrayBuffer",
    "String",
    "SuppressedError",
    "Symbol",
    "SyntaxError",
    "TypeError",
    "URIError",
    "Uint16Array",
    "Uint32Array",
    "Uint8Array",
    "Uint8ClampedArray",
    "WeakMap",
    "WeakRef",
    "WeakSet",
    "atob",
    "btoa",
    "decodeURI",
    "decodeURIComponent",
    "encodeURI",
    "encodeURIComponent",
    "escape",
    "eval",
    "globalThis",
    "isFinite",
    "isNaN",
    "parseFloat",
    "parseInt",
    "performance",
    "queueMicrotask",
    "undefined",
    "unescape",
];

#[test]
fn host_objects_are_absent() {
    let f = file(
        "function beforeCreate(r) {\n  r.types = [typeof require, typeof fetch, typeof process, typeof std, typeof os, typeof module, typeof exports, typeof setTimeout, typeof console, typeof print, typeof scriptArgs, typeof Deno, typeof Bun];\n}\n",
    );
    let mut rt = runtime();
    let out = stored(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert_eq!(out["types"], json!(vec!["undefined"; 13]));
}

#[test]
fn calling_host_functions_fails_at_the_line() {
    let mut rt = runtime();
    for (name, code) in [
        ("require", "require('fs')"),
        ("fetch", "fetch('http://127.0.0.1/')"),
        ("process", "process.env.HOME"),
        ("std", "std.open('/etc/passwd', 'r')"),
        ("os", "os.exec(['true'])"),
    ] {
        let f = file(&format!(
            "function beforeCreate(r) {{\n  r.x = {code};\n}}\n"
        ));
        let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
        assert_eq!(
            message,
            format!("{FILE}:2: ReferenceError: {name} is not defined")
        );
    }
}

#[test]
fn a_static_import_does_not_compile() {
    let message = compile_error("import fs from 'fs';\nfunction beforeCreate(r) {}\n");
    assert!(
        message.starts_with(&format!("{FILE}:1: SyntaxError: ")),
        "{message}"
    );
}

#[test]
fn a_dynamic_import_is_refused() {
    let f = file(
        "let outcome = 'pending';\n\
         function beforeCreate(r) {\n  import('fs').then(() => { outcome = 'loaded'; }, (e) => { outcome = 'refused: ' + e.message; });\n}\n\
         function afterCreate(r) { if (outcome !== 'pending') throw new Error(outcome); }\n",
    );
    let mut rt = runtime();
    stored(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    let message = failed(call(&mut rt, &f, Hook::AfterCreate, json!({}), None));
    assert!(
        message.starts_with(&format!("{FILE}:5: refused: ")),
        "{message}"
    );
}

#[test]
fn the_global_object_holds_ecmascript_and_refuse_only() {
    let f = file("function beforeCreate(r) { r.names = Object.getOwnPropertyNames(globalThis); }");
    let mut rt = runtime();
    let out = stored(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    let names: Vec<String> = serde_json::from_value(out["names"].clone()).expect("a list of names");
    let extra: Vec<&String> = names
        .iter()
        .filter(|n| !ALLOWED.contains(&n.as_str()) && n.as_str() != "beforeCreate")
        .collect();
    assert!(extra.is_empty(), "globals outside ECMAScript: {extra:?}");
    assert!(names.iter().any(|n| n == "Refuse"));
}

#[test]
fn eval_runs_inside_the_same_sandbox() {
    let f = file("function beforeCreate(r) { r.t = eval('typeof require + typeof fetch'); }");
    let mut rt = runtime();
    let out = stored(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert_eq!(out["t"], json!("undefinedundefined"));
}
