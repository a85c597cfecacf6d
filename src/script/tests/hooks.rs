//! Each hook kind: what it receives, and what its call gives back.

use super::{FILE, call, failed, file, runtime, stored};
use crate::script::{Hook, HookOutcome};
use serde_json::json;

#[test]
fn before_create_keeps_the_record_as_the_hook_left_it() {
    let f = file(
        "function beforeCreate(record, ctx) {\n  record.name = record.name.trim();\n  record.slug = record.name.toLowerCase();\n}\n",
    );
    let mut rt = runtime();
    let out = call(
        &mut rt,
        &f,
        Hook::BeforeCreate,
        json!({"name": "  Spring Sale "}),
        None,
    );
    assert_eq!(
        stored(out),
        json!({"name": "Spring Sale", "slug": "spring sale"})
    );
}

#[test]
fn a_returned_object_wins_over_the_changed_argument() {
    let f = file(
        "function beforeCreate(record) {\n  record.name = 'changed';\n  return {name: 'returned', n: 1};\n}\n",
    );
    let mut rt = runtime();
    let out = call(
        &mut rt,
        &f,
        Hook::BeforeCreate,
        json!({"name": "x", "other": 2}),
        None,
    );
    assert_eq!(stored(out), json!({"name": "returned", "n": 1}));
}

#[test]
fn a_removed_field_is_gone_from_the_record() {
    let f = file("function beforeCreate(record) { delete record.secret; }");
    let mut rt = runtime();
    let out = call(
        &mut rt,
        &f,
        Hook::BeforeCreate,
        json!({"a": 1, "secret": "s"}),
        None,
    );
    assert_eq!(stored(out), json!({"a": 1}));
}

#[test]
fn before_update_sees_the_old_object_and_changes_the_record() {
    let f = file(
        "function beforeUpdate(record, old, ctx) {\n  record.revision = old.revision + 1;\n  record.was = old.name;\n}\n",
    );
    let mut rt = runtime();
    let out = call(
        &mut rt,
        &f,
        Hook::BeforeUpdate,
        json!({"name": "new"}),
        Some(json!({"name": "old", "revision": 4})),
    );
    assert_eq!(
        stored(out),
        json!({"name": "new", "revision": 5, "was": "old"})
    );
    let f = file("function beforeUpdate(record, old) { record.old = old; }");
    let out = call(&mut rt, &f, Hook::BeforeUpdate, json!({"a": 1}), None);
    assert_eq!(
        stored(out),
        json!({"a": 1, "old": null}),
        "no old object is null"
    );
}

#[test]
fn before_delete_sees_the_stored_object_and_lets_the_delete_go_on() {
    let f = file(
        "function beforeDelete(old, ctx) {\n  if (old.id !== 3 || ctx.caller.login !== 'ada') throw new Error('wrong arguments');\n  return 'ignored';\n}\n",
    );
    let mut rt = runtime();
    let out = call(&mut rt, &f, Hook::BeforeDelete, json!({"id": 3}), None);
    assert_eq!(out, Ok(HookOutcome::Proceed));
}

#[test]
fn after_hooks_receive_their_arguments_and_their_result_is_ignored() {
    let f = file(
        "function check(cond, what) { if (!cond) throw new Error(what); }\n\
         function afterCreate(record, ctx) { check(record.id === 1 && ctx.caller.id === 7, 'create'); return {x: 1}; }\n\
         function afterUpdate(record, old, ctx) { check(record.v === 2 && old.v === 1, 'update'); record.v = 9; }\n\
         function afterDelete(old, ctx) { check(old.id === 5, 'delete'); }\n",
    );
    let mut rt = runtime();
    let out = call(&mut rt, &f, Hook::AfterCreate, json!({"id": 1}), None);
    assert_eq!(out, Ok(HookOutcome::Proceed));
    let out = call(
        &mut rt,
        &f,
        Hook::AfterUpdate,
        json!({"v": 2}),
        Some(json!({"v": 1})),
    );
    assert_eq!(out, Ok(HookOutcome::Proceed));
    let out = call(&mut rt, &f, Hook::AfterDelete, json!({"id": 5}), None);
    assert_eq!(out, Ok(HookOutcome::Proceed));
    let out = call(&mut rt, &f, Hook::AfterDelete, json!({"id": 6}), None);
    assert_eq!(
        failed(out),
        format!("{FILE}:1: delete"),
        "where the error was made"
    );
}

#[test]
fn ctx_names_the_caller() {
    let f = file(
        "function beforeCreate(record, ctx) { record.by = ctx.caller; record.keys = Object.keys(ctx); }",
    );
    let mut rt = runtime();
    let out = call(&mut rt, &f, Hook::BeforeCreate, json!({}), None);
    assert_eq!(
        stored(out),
        json!({"by": {"id": 7, "login": "ada", "role": "editor"}, "keys": ["caller"]})
    );
}

#[test]
fn a_hook_the_file_does_not_define_changes_nothing() {
    let f = file("function afterCreate(record) {}");
    let mut rt = runtime();
    let out = call(&mut rt, &f, Hook::BeforeCreate, json!({"a": 1}), None);
    assert_eq!(stored(out), json!({"a": 1}));
    let out = call(&mut rt, &f, Hook::BeforeDelete, json!({"a": 1}), None);
    assert_eq!(out, Ok(HookOutcome::Proceed));
}

#[test]
fn an_exception_fails_with_the_file_and_the_line() {
    let f = file("function beforeCreate(record) {\n  const n = record.missing.length;\n}\n");
    let mut rt = runtime();
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert!(
        message.starts_with(&format!("{FILE}:2: TypeError: ")),
        "{message}"
    );
    let f = file(
        "function helper() {\n  throw new Error('deep');\n}\nfunction beforeCreate(r) { helper(); }\n",
    );
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert_eq!(
        message,
        format!("{FILE}:2: deep"),
        "the line that threw, not the caller's"
    );
    let f = file("function beforeCreate(r) { throw 'plain text'; }");
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert_eq!(message, format!("{FILE}: plain text"));
}

#[test]
fn a_before_hook_must_give_an_object() {
    let mut rt = runtime();
    let f = file("function beforeCreate(r) { return 5; }");
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert_eq!(
        message,
        format!(
            "{FILE}: beforeCreate returned a number: return the record, or nothing to keep the record it was given"
        )
    );
    let f = file("function beforeCreate(r) { return [r]; }");
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert!(message.contains("returned an array"), "{message}");
    let f = file("async function beforeCreate(r) { r.a = 1; }");
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert!(message.contains("cannot be an async function"), "{message}");
}

#[test]
fn a_runtime_keeps_one_context_per_file_and_reloads_a_file_compiled_anew() {
    let mut rt = runtime();
    let counter =
        "let calls = 0;\nfunction beforeCreate(r) { r.calls = ++calls; r.v = VERSION; }\n";
    let first = file(&format!("const VERSION = 1;\n{counter}"));
    let other = super::HookFile::compile(
        std::path::Path::new("entities/other.js"),
        &format!("const VERSION = 'other';\n{counter}"),
    )
    .expect("compiles");
    for n in 1..=3 {
        let out = call(&mut rt, &first, Hook::BeforeCreate, json!({}), None);
        assert_eq!(stored(out), json!({"calls": n, "v": 1}));
    }
    let out = call(&mut rt, &other, Hook::BeforeCreate, json!({}), None);
    assert_eq!(stored(out), json!({"calls": 1, "v": "other"}));
    let second = file(&format!("const VERSION = 2;\n{counter}"));
    let out = call(&mut rt, &second, Hook::BeforeCreate, json!({}), None);
    assert_eq!(
        stored(out),
        json!({"calls": 1, "v": 2}),
        "the new compilation runs in a new context"
    );
}

#[test]
fn an_exception_that_throws_when_read_still_fails_the_call() {
    let f = file(
        "function beforeCreate(r) {\n  if (r.trap) throw new Proxy({}, {get() { throw new Error('trap'); }, getPrototypeOf() { throw new Error('trap'); }});\n  throw {};\n}\n",
    );
    let mut rt = runtime();
    for trap in [true, false] {
        let message = failed(call(
            &mut rt,
            &f,
            Hook::BeforeCreate,
            json!({"trap": trap}),
            None,
        ));
        assert_eq!(message, format!("{FILE}: an exception with no message"));
    }
}
