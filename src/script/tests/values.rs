//! Values crossing into JavaScript and back: JSON's kinds as themselves, numbers kept exact
//! where the hook left them, and what JavaScript alone has made JSON as `JSON.stringify`
//! would.

use super::{FILE, call, failed, file, runtime, stored};
use crate::script::Hook;
use serde_json::json;

/// A hook that gives the record back untouched.
const SAME: &str = "function beforeCreate(record) {}";

#[test]
fn json_values_round_trip() {
    let value = json!({
        "name": "Grüße, 世界 🌍 \"quoted\" \\ \n tab\t",
        "empty": "",
        "null": null,
        "yes": true,
        "no": false,
        "int": 42,
        "negative": -7,
        "zero": 0,
        "big": 4_000_000_000_i64,
        "float": 12.5,
        "small": 1e-7,
        "decimal_text": "12.50",
        "nested": {"list": [1, "two", null, [3, {"deep": {"deeper": [true]}}]], "obj": {}},
        "array": [],
        "2": "a key that looks like an index"
    });
    let f = file(SAME);
    let mut rt = runtime();
    let out = stored(call(&mut rt, &f, Hook::BeforeCreate, value.clone(), None));
    assert_eq!(out, value);
    let f = file("function beforeCreate(record) { return JSON.parse(JSON.stringify(record)); }");
    let out = stored(call(&mut rt, &f, Hook::BeforeCreate, value.clone(), None));
    assert_eq!(out, value, "rebuilt in JavaScript, the record is the same");
}

#[test]
fn javascript_sees_the_types_it_expects() {
    let f = file(
        "function beforeCreate(r) {\n  return {types: Object.keys(r).map(k => Array.isArray(r[k]) ? 'array' : r[k] === null ? 'null' : typeof r[k]), len: r.s.length, sum: r.i + r.f};\n}\n",
    );
    let mut rt = runtime();
    let rec = json!({"s": "é🌍", "i": 2, "f": 0.5, "b": true, "n": null, "a": [1], "o": {}});
    let out = stored(call(&mut rt, &f, Hook::BeforeCreate, rec, None));
    assert_eq!(
        out,
        json!({"types": ["string", "number", "number", "boolean", "null", "array", "object"], "len": 3, "sum": 2.5})
    );
}

#[test]
fn numbers_the_hook_left_keep_their_exact_digits() {
    let f = file(SAME);
    let mut rt = runtime();
    let text = r#"{"big": 9007199254740993, "huge": 123456789012345678901234567890,
                   "precise": 0.1000000000000000000001, "list": [9007199254740993]}"#;
    let rec: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
    let out = stored(call(&mut rt, &f, Hook::BeforeCreate, rec.clone(), None));
    assert_eq!(out.to_string(), rec.to_string());
    let f = file("function beforeCreate(r) { r.big = r.big + 10; }");
    let out = stored(call(&mut rt, &f, Hook::BeforeCreate, rec, None));
    assert_eq!(
        out["big"],
        json!(9007199254741002_i64),
        "a changed number is the double's"
    );
}

#[test]
fn what_only_javascript_has_becomes_json_as_stringify_makes_it() {
    let f = file(
        "function beforeCreate(r) {\n  return {\n    u: undefined, f() {}, s: Symbol('x'), nan: NaN, inf: -Infinity,\n    date: new Date(Date.UTC(2024, 1, 29, 12, 0, 0)), whole: 3.0, product: 0.1 * 3,\n    big: 12345678901234567890123n, list: [undefined, () => 1, 1], custom: {toJSON() { return 'custom'; }},\n    map: new Map([[1, 2]]), neg0: -0\n  };\n}\n",
    );
    let mut rt = runtime();
    let out = stored(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    let expected: serde_json::Value = serde_json::from_str(
        r#"{"nan": null, "inf": null, "date": "2024-02-29T12:00:00.000Z", "whole": 3,
            "product": 0.30000000000000004, "big": 12345678901234567890123,
            "list": [null, null, 1], "custom": "custom", "map": {}, "neg0": 0}"#,
    )
    .expect("valid JSON");
    assert_eq!(out.to_string(), expected.to_string());
}

#[test]
fn a_cycle_fails_the_call() {
    let f = file("function beforeCreate(r) {\n  r.self = r;\n}\n");
    let mut rt = runtime();
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert_eq!(
        message,
        format!("{FILE}: the record beforeCreate returned is nested more than 64 levels deep")
    );
}

#[test]
fn a_getter_that_throws_fails_at_its_line() {
    let f = file(
        "function beforeCreate(r) {\n  return {get x() {\n    throw new Error('no x'); } };\n}\n",
    );
    let mut rt = runtime();
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert_eq!(message, format!("{FILE}:3: no x"));
}

#[test]
fn a_key_named_proto_is_a_field_like_any_other() {
    let f = file(
        "function beforeCreate(r) { r.seen = Object.keys(r.data); r.inherits = typeof r.data.polluted; }",
    );
    let mut rt = runtime();
    let rec = json!({"data": {"__proto__": {"polluted": true}, "a": 1}, "__proto__": 5});
    let out = stored(call(&mut rt, &f, Hook::BeforeCreate, rec, None));
    assert_eq!(
        out,
        json!({"data": {"__proto__": {"polluted": true}, "a": 1}, "__proto__": 5, "seen": ["__proto__", "a"], "inherits": "undefined"})
    );
}

#[test]
fn a_chunk_gives_back_each_record_as_its_call_left_it() {
    let f = file(
        "function beforeCreate(r) {\n  switch (r.do) {\n    case 'upper': r.name = r.name.toUpperCase(); break;\n    case 'undefined': r.name = undefined; break;\n    case 'delete': delete r.name; break;\n    case 'add': r.added = [r.n]; break;\n    case 'push': r.list.push(r.n); break;\n    case 'inner': r.obj.x = r.n; break;\n    case 'same': r.name = r.name.slice(0); break;\n    case 'spread': return {...r, name: 'spread'};\n    case 'reorder': return {n: r.n, do: r.do, name: r.name};\n    case 'infinity': r.n = 1 / 0; break;\n  }\n}\n",
    );
    let mut rt = runtime();
    let big = serde_json::from_str::<serde_json::Value>("9007199254740993").unwrap();
    let given = [
        json!({"name": "a", "do": "upper", "n": 1}),
        json!({"name": "b", "do": "undefined", "n": 2}),
        json!({"name": "c", "do": "delete", "n": 3}),
        json!({"name": "d", "do": "add", "n": big.clone()}),
        json!({"name": "e", "do": "push", "n": 5, "list": [1]}),
        json!({"do": "inner", "n": 6, "obj": {}, "name": "f"}),
        json!({"name": "g", "do": "same", "n": big.clone()}),
        json!({"name": "h", "do": "spread", "n": 8}),
        json!({"name": "i", "do": "reorder", "n": 9}),
        json!({"name": "j", "do": "infinity", "n": 10}),
        json!({"name": "k", "do": "none", "n": 1.5, "t": true, "z": null}),
    ];
    let records = given.iter().cloned().map(super::record).collect();
    let out = rt.call_many(&f, Hook::BeforeCreate, records, &super::caller());
    let out: Vec<String> = out.into_iter().map(|o| stored(o).to_string()).collect();
    let expected = [
        r#"{"name":"A","do":"upper","n":1}"#,
        r#"{"do":"undefined","n":2}"#,
        r#"{"do":"delete","n":3}"#,
        r#"{"name":"d","do":"add","n":9007199254740993,"added":[9007199254740992]}"#,
        r#"{"name":"e","do":"push","n":5,"list":[1,5]}"#,
        r#"{"do":"inner","n":6,"obj":{"x":6},"name":"f"}"#,
        r#"{"name":"g","do":"same","n":9007199254740993}"#,
        r#"{"name":"spread","do":"spread","n":8}"#,
        r#"{"n":9,"do":"reorder","name":"i"}"#,
        r#"{"name":"j","do":"infinity","n":null}"#,
        r#"{"name":"k","do":"none","n":1.5,"t":true,"z":null}"#,
    ];
    assert_eq!(out, expected);
}
