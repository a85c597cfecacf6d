//! Compiling a hook file: the hooks it defines, and its errors as `file:line: message`.

use super::{FILE, compile_error, file};
use crate::script::Hook;

#[test]
fn records_the_hooks_a_file_defines_however_it_binds_them() {
    let f = file(
        "function beforeCreate(record, ctx) {}\n\
         const afterUpdate = (record, old, ctx) => {};\n\
         let beforeDelete = function (old, ctx) {};\n",
    );
    let hooks: Vec<Hook> = f.hooks().collect();
    assert_eq!(
        hooks,
        vec![Hook::BeforeCreate, Hook::BeforeDelete, Hook::AfterUpdate]
    );
    assert!(f.defines(Hook::AfterUpdate));
    assert!(!f.defines(Hook::AfterCreate));
    assert_eq!(f.name(), FILE);
}

#[test]
fn a_file_may_define_all_six() {
    let f = file(
        "function beforeCreate(r, c) {}\nfunction beforeUpdate(r, o, c) {}\n\
         function beforeDelete(o, c) {}\nfunction afterCreate(r, c) {}\n\
         function afterUpdate(r, o, c) {}\nfunction afterDelete(o, c) {}\n",
    );
    assert_eq!(f.hooks().count(), 6);
}

#[test]
fn a_syntax_error_names_the_file_and_its_line() {
    let message = compile_error(
        "// a comment\n\
         function beforeCreate(record) {\n  record.name = ;\n}\n",
    );
    assert!(
        message.starts_with(&format!("{FILE}:3: SyntaxError: ")),
        "{message}"
    );
}

#[test]
fn an_exception_at_top_level_names_the_file_and_its_line() {
    let message = compile_error(
        "function beforeCreate(record) {}\n\n\
         throw new Error('not configured');\n",
    );
    assert_eq!(message, format!("{FILE}:3: not configured"));
    let message = compile_error("function beforeCreate(record) {}\nundefinedHelper();\n");
    assert_eq!(
        message,
        format!("{FILE}:2: ReferenceError: undefinedHelper is not defined")
    );
}

#[test]
fn a_file_defining_no_hook_names_the_six() {
    let message = compile_error("function beforeSave(record) {}\n");
    assert_eq!(
        message,
        format!(
            "{FILE}: defines none of the hooks beforeCreate, beforeUpdate, beforeDelete, \
             afterCreate, afterUpdate, afterDelete"
        )
    );
}

#[test]
fn a_hook_name_bound_to_something_else_is_an_error() {
    let message = compile_error("function beforeCreate(r) {}\nvar afterCreate = 5;\n");
    assert_eq!(
        message,
        format!("{FILE}: afterCreate is a number, not a function")
    );
}

#[test]
fn an_endless_top_level_fails_within_the_time_limit() {
    let started = std::time::Instant::now();
    let message = compile_error("function beforeCreate(r) {}\nwhile (true) {}\n");
    assert_eq!(
        message,
        format!("{FILE}: the file's top level ran longer than 100 ms")
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn refuse_cannot_be_redefined() {
    let message = compile_error("class Refuse {}\nfunction beforeCreate(r) {}\n");
    assert!(
        message.starts_with(&format!("{FILE}:1: SyntaxError: ")),
        "{message}"
    );
}
