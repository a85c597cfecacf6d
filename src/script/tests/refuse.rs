//! `throw new Refuse(message[, status])`: a refusal with a 4xx status, 400 by default; a
//! status outside 400-499 is the hook's mistake and fails the call at the line that made it.

use super::{FILE, call, failed, file, runtime, stored};
use crate::script::{Hook, HookError};
use serde_json::json;

#[test]
fn refuse_without_a_status_is_400() {
    let f = file(
        "function beforeCreate(r) {\n  if (r.price < 0) throw new Refuse('the price cannot be negative');\n}\n",
    );
    let mut rt = runtime();
    let out = call(&mut rt, &f, Hook::BeforeCreate, json!({"price": -1}), None);
    assert_eq!(
        out,
        Err(HookError::Refused {
            message: "the price cannot be negative".into(),
            status: 400
        })
    );
    let out = call(&mut rt, &f, Hook::BeforeCreate, json!({"price": 1}), None);
    assert_eq!(stored(out), json!({"price": 1}));
}

#[test]
fn refuse_with_a_status_keeps_it() {
    let f =
        file("function beforeDelete(old) { throw new Refuse('archived campaigns stay', 409); }");
    let mut rt = runtime();
    let out = call(&mut rt, &f, Hook::BeforeDelete, json!({"id": 1}), None);
    assert_eq!(
        out,
        Err(HookError::Refused {
            message: "archived campaigns stay".into(),
            status: 409
        })
    );
}

#[test]
fn a_status_computed_as_a_double_counts() {
    let f = file("function beforeCreate(r) { throw new Refuse('gone', 821 / 2 + 0.5); }");
    let mut rt = runtime();
    let out = call(&mut rt, &f, Hook::BeforeCreate, json!({}), None);
    assert_eq!(
        out,
        Err(HookError::Refused {
            message: "gone".into(),
            status: 411
        })
    );
}

#[test]
fn refuse_is_an_error_and_caught_like_one() {
    let f = file(
        "function beforeCreate(r) {\n  const e = new Refuse('x');\n  r.isError = e instanceof Error;\n  r.name = e.name;\n  try { throw new Refuse('inner'); } catch (e) { r.caught = e.message; }\n}\n",
    );
    let mut rt = runtime();
    let out = call(&mut rt, &f, Hook::BeforeCreate, json!({}), None);
    assert_eq!(
        stored(out),
        json!({"isError": true, "name": "Refuse", "caught": "inner"})
    );
}

#[test]
fn a_status_outside_4xx_fails_at_the_line_that_made_it() {
    let f = file("function beforeCreate(r) {\n  throw new Refuse('no', 500);\n}\n");
    let mut rt = runtime();
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert_eq!(
        message,
        format!(
            "{FILE}:2: RangeError: Refuse: the status must be an integer from 400 to 499, not 500"
        )
    );
    let f = file("function beforeCreate(r) { throw new Refuse('no', '404'); }");
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert!(
        message.ends_with("not 404"),
        "a string is not a status: {message}"
    );
    let f = file(
        "function beforeCreate(r) {\n  const e = new Refuse('no');\n  e.status = 302;\n  throw e;\n}\n",
    );
    let message = failed(call(&mut rt, &f, Hook::BeforeCreate, json!({}), None));
    assert_eq!(
        message,
        format!("{FILE}:2: Refuse: the status must be an integer from 400 to 499, not 302")
    );
}

#[test]
fn refuse_cannot_be_replaced_or_changed() {
    let f = file(
        "Refuse = function () {};\n\
         try { Refuse.prototype.name = 'x'; } catch (e) {}\n\
         function beforeCreate(r) { throw new Refuse('still refused', 403); }\n",
    );
    let mut rt = runtime();
    let out = call(&mut rt, &f, Hook::BeforeCreate, json!({}), None);
    assert_eq!(
        out,
        Err(HookError::Refused {
            message: "still refused".into(),
            status: 403
        })
    );
}

#[test]
fn refuse_thrown_at_top_level_is_a_compile_error() {
    let message = super::compile_error("function beforeCreate(r) {}\nthrow new Refuse('no');\n");
    assert_eq!(
        message,
        format!("{FILE}: the file's top level threw Refuse: no")
    );
}
