//! `entiserve hook-types`: the compiled entities as a TypeScript declaration file, so that an
//! editor (or `tsc --checkJs`) checks a JavaScript hook file that says `// @ts-check` and
//! names the file (`/// <reference path="entiserve.d.ts" />`).
//!
//! For each entity the file declares the object as GET returns it (`Campaigns`) and what a
//! create sends (`CampaignsInput`), and maps entity names to both (`Entities`, `Inputs`).
//! The rest is the same for every catalog: `ctx` typed by entity name (`ReadCtx` for the
//! `before*` hooks, `Ctx` for the `after*` hooks), the `Refuse` class and the types of the six
//! hooks (`BeforeCreate<"campaigns">`, ...), which a hook file gives its functions with JSDoc.

use crate::schema::{Catalog, Entity, Field, FieldType};
use std::collections::HashSet;
use std::fmt::Write;

/// The declaration file's name, next to the entity files.
pub const FILE_NAME: &str = "entiserve.d.ts";

/// What the file begins with.
const HEADER: &str = r#"// Types of the entities and of their JavaScript hooks, for editors and `tsc --checkJs`.
// Written by `entiserve hook-types` from the entity files: run it again after changing them.
//
// A hook file checks itself against this file when it begins with
//
//   // @ts-check
//   /// <reference path="entiserve.d.ts" />
//
// and gives each hook its type:
//
//   /** @type {BeforeCreate<"campaigns">} */
//   function beforeCreate(record, ctx) { ... }
//
// Hooks run with the ECMAScript built-ins alone (no DOM, no Node.js, no timers), and so the
// checker knows only those:
/// <reference no-default-lib="true" />
/// <reference lib="es2023" />
"#;

/// The part of the file that is the same for every catalog: the names below, and the
/// entities' interfaces above it, which must not take them.
const FIXED: &str = r#"
/** The name of an entity. */
type EntityName = keyof Entities;

/** What an update of entity `K` sends: any of its fields; a field left out keeps its value. */
type Changes<K extends EntityName> = Partial<Inputs[K]>;

/** What `ctx.list` looks for: fields of entity `K` and the values they must equal. */
type Where<K extends EntityName> = { [F in keyof Entities[K]]?: Entities[K][F] };

/** Who makes the change (`ctx.caller`). */
interface Caller {
  /** The user's id. */
  id: number;
  /** The user's login. */
  login: string;
  /** The user's role: a value of the users entity's `role` field, such as `admin` or `user`. */
  role: string;
}

/**
 * The `ctx` of a `before*` hook: reads inside the change's transaction, under the caller's
 * access rules.
 */
interface ReadCtx {
  /** Who makes the change. */
  readonly caller: Caller;
  /** The object of `entity` with this id, or `null` when there is none that the caller may view. */
  get<K extends EntityName>(entity: K, id: number): Entities[K] | null;
  /** The objects of `entity` that the caller may list whose fields equal those of `where`. */
  list<K extends EntityName>(entity: K, where: Where<K>): Entities[K][];
}

/**
 * The `ctx` of an `after*` hook: reads, and changes other objects inside the change's
 * transaction through the same call path as any change (access rules, validation, hooks), at
 * most 4 levels deep. A refusal or an error there fails the change that ran the hook.
 */
interface Ctx extends ReadCtx {
  /** Creates an object of `entity`; returns it as stored. */
  create<K extends EntityName>(entity: K, object: Inputs[K]): Entities[K];
  /** Changes the object of `entity` with this id; returns it as stored. */
  update<K extends EntityName>(entity: K, id: number, changes: Changes<K>): Entities[K];
  /** Deletes the object of `entity` with this id. */
  delete<K extends EntityName>(entity: K, id: number): Entities[K];
}

/**
 * Thrown by a hook, refuses the change: it fails with `status` (400 by default; 400 to 499)
 * and `{"error": "refused", "description": message}`.
 */
declare class Refuse extends Error {
  constructor(message: string, status?: number);
  /** The status the change fails with. */
  readonly status: number;
}

/**
 * `beforeCreate(record, ctx)`, before an object of `K` is created: returns the record to
 * store, or changes `record` and returns nothing; or throws `Refuse`.
 */
type BeforeCreate<K extends EntityName> = (record: Inputs[K], ctx: ReadCtx) => Inputs[K] | void;

/**
 * `beforeUpdate(record, old, ctx)`, before an object of `K` is changed: `record` is the object
 * as it will be (the stored object with the update's values applied), `old` the object as
 * stored. Returns the record to store, or changes `record` and returns nothing; or throws
 * `Refuse`.
 */
type BeforeUpdate<K extends EntityName> = (
  record: Entities[K],
  old: Entities[K],
  ctx: ReadCtx,
) => Changes<K> | void;

/** `beforeDelete(old, ctx)`, before an object of `K` is deleted: may throw `Refuse`. */
type BeforeDelete<K extends EntityName> = (old: Entities[K], ctx: ReadCtx) => void;

/** `afterCreate(record, ctx)`, after an object of `K` was created: `record` as stored. */
type AfterCreate<K extends EntityName> = (record: Entities[K], ctx: Ctx) => void;

/**
 * `afterUpdate(record, old, ctx)`, after an object of `K` was changed: `record` as stored now,
 * `old` as it was.
 */
type AfterUpdate<K extends EntityName> = (record: Entities[K], old: Entities[K], ctx: Ctx) => void;

/** `afterDelete(old, ctx)`, after an object of `K` was deleted: `old` as it was stored. */
type AfterDelete<K extends EntityName> = (old: Entities[K], ctx: Ctx) => void;
"#;

/// Names an entity's interfaces must not take: those of [`FIXED`], and the global names of
/// TypeScript's standard library that an entity's name could spell (an interface of the same
/// name would merge with it or clash).
const TAKEN: &[&str] = &[
    "Entities",
    "Inputs",
    "EntityName",
    "Changes",
    "Where",
    "Caller",
    "ReadCtx",
    "Ctx",
    "Refuse",
    "BeforeCreate",
    "BeforeUpdate",
    "BeforeDelete",
    "AfterCreate",
    "AfterUpdate",
    "AfterDelete",
    "Array",
    "ArrayBuffer",
    "ArrayLike",
    "Awaited",
    "BigInt",
    "Boolean",
    "Capitalize",
    "DataView",
    "Date",
    "Error",
    "EvalError",
    "Exclude",
    "Extract",
    "Function",
    "Generator",
    "Infinity",
    "InstanceType",
    "Intl",
    "Iterable",
    "Iterator",
    "JSON",
    "Lowercase",
    "Map",
    "Math",
    "NaN",
    "NonNullable",
    "Number",
    "Object",
    "Omit",
    "Parameters",
    "Partial",
    "Pick",
    "Promise",
    "PromiseLike",
    "PropertyKey",
    "Proxy",
    "RangeError",
    "Readonly",
    "ReadonlyArray",
    "Record",
    "Reflect",
    "RegExp",
    "Required",
    "ReturnType",
    "Set",
    "String",
    "Symbol",
    "SyntaxError",
    "TemplateStringsArray",
    "ThisType",
    "TypeError",
    "Uncapitalize",
    "Uppercase",
    "WeakMap",
    "WeakRef",
    "WeakSet",
];

/// The declaration file of `catalog`'s entities.
pub fn declarations(catalog: &Catalog) -> String {
    let names = interface_names(catalog);
    let mut out = String::from(HEADER);
    for (e, name) in catalog.entities.values().zip(&names) {
        out.push('\n');
        out.push_str(&object_interface(e, name));
        out.push('\n');
        out.push_str(&input_interface(e, name));
    }
    out.push_str("\n/** Every entity by name: the objects `ctx.get` and `ctx.list` return. */\n");
    out.push_str(&name_map("Entities", catalog, &names, ""));
    out.push_str("\n/** Every entity by name: what a create sends. */\n");
    out.push_str(&name_map("Inputs", catalog, &names, "Input"));
    out.push_str(FIXED);
    out
}

/// The interface name of each entity, in the catalog's order: its name in PascalCase
/// (`order_items` -> `OrderItems`), followed by `Entity` (and a number) while it or its
/// input's name is taken.
fn interface_names(catalog: &Catalog) -> Vec<String> {
    let mut taken: HashSet<String> = TAKEN.iter().map(|s| s.to_string()).collect();
    let mut names = Vec::with_capacity(catalog.entities.len());
    for name in catalog.entities.keys() {
        let base = pascal(name);
        let mut chosen = base.clone();
        let mut n = 1;
        while taken.contains(&chosen) || taken.contains(&format!("{chosen}Input")) {
            chosen = match n {
                1 => format!("{base}Entity"),
                _ => format!("{base}Entity{n}"),
            };
            n += 1;
        }
        taken.insert(format!("{chosen}Input"));
        taken.insert(chosen.clone());
        names.push(chosen);
    }
    names
}

/// `order_items` -> `OrderItems`; a digit after `_` keeps the `_` (`a_1` -> `A_1`), so that
/// no two entity names give one interface name.
fn pascal(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = true;
    for c in name.chars() {
        if c == '_' {
            upper = true;
            continue;
        }
        if upper {
            if c.is_ascii_digit() {
                out.push('_');
            }
            out.push(c.to_ascii_uppercase());
        } else {
            out.push(c);
        }
        upper = false;
    }
    out
}

/// `interface Entities { campaigns: Campaigns; ... }`: each entity's interface (its name with
/// `suffix`) by entity name.
fn name_map(map: &str, catalog: &Catalog, names: &[String], suffix: &str) -> String {
    let mut out = format!("interface {map} {{\n");
    for (entity, name) in catalog.entities.keys().zip(names) {
        let _ = writeln!(out, "  {entity}: {name}{suffix};");
    }
    out.push_str("}\n");
    out
}

/// The interface of `e`'s objects as GET returns them: `id`, every field but secrets (`null`
/// when the field is not required), `created_dt` and `updated_dt`.
fn object_interface(e: &Entity, name: &str) -> String {
    let mut out = format!(
        "/** An object of {} as `GET /{}/{{id}}` returns it, and as hooks and `ctx` give it. */\n",
        e.name, e.name
    );
    let _ = writeln!(out, "interface {name} {{");
    member(&mut out, &["the object's id".into()], "id", "number");
    for f in e.fields.iter().filter(|f| !f.secret) {
        let mut ty = ts_type(&f.ty, true);
        if !f.required {
            ty.push_str(" | null");
        }
        member(&mut out, &about(f, true), &f.name, &ty);
    }
    let stamp = "`YYYY-MM-DD HH:MM:SS`, UTC";
    let created = format!("when the object was created: {stamp}");
    let updated = format!("when the object was last changed: {stamp}");
    member(&mut out, &[created], "created_dt", "string");
    member(&mut out, &[updated], "updated_dt", "string");
    out.push_str("}\n");
    out
}

/// The interface of what a create of `e` sends: a required field without a default must be
/// present; an optional field without a default may be `null`.
fn input_interface(e: &Entity, name: &str) -> String {
    let mut out = format!(
        "/**\n * What a create of {} sends (an update sends any of it: `Changes<\"{}\">`), and the\n * record `beforeCreate` receives.\n */\n",
        e.name, e.name
    );
    let _ = writeln!(out, "interface {name}Input {{");
    for f in &e.fields {
        let mut ty = ts_type(&f.ty, false);
        if f.nullable() {
            ty.push_str(" | null");
        }
        let key = if f.needed() {
            f.name.clone()
        } else {
            format!("{}?", f.name)
        };
        member(&mut out, &about(f, false), &key, &ty);
    }
    out.push_str("}\n");
    out
}

/// One member of an interface, after its doc comment when `about` says something.
fn member(out: &mut String, about: &[String], key: &str, ty: &str) {
    if !about.is_empty() {
        let text = about.join("; ").replace("*/", "*\\/");
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = writeln!(out, "  /** {} */", sentence(&text));
    }
    let _ = writeln!(out, "  {key}: {ty};");
}

/// `text` with a capital first letter and a full stop.
fn sentence(text: &str) -> String {
    let mut chars = text.chars();
    let mut out: String = match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

/// The TypeScript type of a value of `ty`, without `null`: as GET returns it (`read`), or as
/// a client may send it (a decimal may then be a string holding its digits).
fn ts_type(ty: &FieldType, read: bool) -> String {
    match ty {
        FieldType::String | FieldType::Text | FieldType::Date | FieldType::Datetime => {
            "string".into()
        }
        FieldType::Integer | FieldType::Reference(_) => "number".into(),
        FieldType::Decimal if read => "number".into(),
        FieldType::Decimal => "number | string".into(),
        FieldType::Boolean => "boolean".into(),
        FieldType::Enum(values) if values.is_empty() => "never".into(),
        FieldType::Enum(values) => values
            .iter()
            .map(|v| serde_json::Value::from(v.as_str()).to_string())
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

/// What a field's doc comment says: its description, and what its TypeScript type leaves
/// out (the kind of text or number, a length, a default, who may set it).
fn about(f: &Field, read: bool) -> Vec<String> {
    let mut out: Vec<String> = f.description.iter().cloned().collect();
    match &f.ty {
        FieldType::Text => out.push("text".into()),
        FieldType::Integer => out.push("an integer".into()),
        FieldType::Decimal if read => out.push("an exact decimal".into()),
        FieldType::Decimal => out.push(
            "an exact decimal: a number, or a string that holds it (\"12.50\") to keep every digit"
                .into(),
        ),
        FieldType::Date => out.push("a date, `YYYY-MM-DD`".into()),
        FieldType::Datetime => out.push("a date and time, `YYYY-MM-DD HH:MM:SS`".into()),
        FieldType::Reference(to) => out.push(format!("the id of an object of {to}")),
        _ => {}
    }
    if let Some(n) = f.max_length {
        out.push(format!("at most {n} characters"));
    }
    if !read {
        if let Some(d) = &f.default {
            out.push(format!("default {d}"));
        }
        if f.default_caller {
            out.push("default: the caller's id".into());
        }
        if f.secret {
            out.push("write-only: stored hashed and never returned".into());
        }
        if let Some(role) = &f.write_role {
            out.push(format!("set only by `{}` and admins", role.as_str()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_catalog;

    #[test]
    fn names_are_pascal_case_and_never_taken_twice() {
        assert_eq!(pascal("order_items"), "OrderItems");
        assert_eq!(pascal("a_1"), "A_1");
        assert_eq!(pascal("a1"), "A1");
        let c = test_catalog(&[
            ("record.yaml", "fields:\n  a: { type: string }\n"),
            ("ctx.yaml", "fields:\n  a: { type: string }\n"),
            ("ctx_entity.yaml", "fields:\n  a: { type: string }\n"),
            ("campaigns.yaml", "fields:\n  a: { type: string }\n"),
            ("campaigns_input.yaml", "fields:\n  a: { type: string }\n"),
        ]);
        let names = interface_names(&c);
        let by_entity: Vec<(&str, &str)> = c
            .entities
            .keys()
            .map(String::as_str)
            .zip(names.iter().map(String::as_str))
            .collect();
        for (entity, name) in &by_entity {
            let expected = match *entity {
                "record" => "RecordEntity",
                "ctx" => "CtxEntity",
                "campaigns" => "Campaigns",
                _ => continue,
            };
            assert_eq!(*name, expected, "{entity}");
        }
        let mut all: Vec<String> = names.clone();
        all.extend(names.iter().map(|n| format!("{n}Input")));
        let unique: HashSet<&String> = all.iter().collect();
        assert_eq!(unique.len(), all.len(), "{by_entity:?}");
    }

    #[test]
    fn fields_become_members_of_their_json_types() {
        let c = test_catalog(&[(
            "things.yaml",
            "fields:\n  title: { type: string, required: true, max_length: 80, description: \"The */ title\" }\n  n: { type: integer, default: 1 }\n  price: { type: decimal }\n  state: { type: enum, values: [draft, \"it's \\\"live\\\"\"], required: true, default: draft }\n  owner_id: { type: reference, entity: things }\n  pw: { type: string, secret: true }\n  on: { type: date }\n",
        )]);
        let d = declarations(&c);
        let object = d.split("interface Things {").nth(1).unwrap();
        let object = object.split('}').next().unwrap();
        for line in [
            "  id: number;",
            "  title: string;",
            "  n: number | null;",
            "  price: number | null;",
            "  state: \"draft\" | \"it's \\\"live\\\"\";",
            "  owner_id: number | null;",
            "  on: string | null;",
            "  created_dt: string;",
            "  updated_dt: string;",
            "  /** The *\\/ title; at most 80 characters. */",
        ] {
            assert!(object.contains(&format!("{line}\n")), "{line} in {object}");
        }
        assert!(!object.contains("pw"), "{object}");
        let input = d.split("interface ThingsInput {").nth(1).unwrap();
        let input = input.split('}').next().unwrap();
        for line in [
            "  title: string;",
            "  n?: number;",
            "  price?: number | string | null;",
            "  state?: \"draft\" | \"it's \\\"live\\\"\";",
            "  pw?: string | null;",
        ] {
            assert!(input.contains(&format!("{line}\n")), "{line} in {input}");
        }
        assert!(
            d.contains("interface Entities {\n  things: Things;\n  users: Users;\n}\n"),
            "{d}"
        );
        assert!(
            d.contains("interface Inputs {\n  things: ThingsInput;\n  users: UsersInput;\n}\n"),
            "{d}"
        );
    }
}
