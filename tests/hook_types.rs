//! `entiserve hook-types` and the example hooks `entiserve init` writes, checked by the
//! TypeScript compiler as an editor would check them: a hook file that uses the types right
//! passes, one that stores a number in a text field fails. The compiler is clients/typescript's
//! (`npm ci --prefix clients/typescript`), else `npx -p typescript`; these tests fail without
//! either. The example hooks also compile in the sandbox, and their `before*` hooks run there.

use entiserve::script::{CallerInfo, Hook, HookError, HookFile, HookOutcome, Limits, Runtime};
use serde_json::{Map, Value as Json, json};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The version `npx` fetches when clients/typescript has none installed: the one its lock
/// file names.
const TYPESCRIPT: &str = "typescript@5.9.3";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_entiserve"))
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The command that runs `tsc`, found once: the first of the candidates whose `--version`
/// answers.
fn tsc() -> Command {
    static FOUND: OnceLock<Vec<String>> = OnceLock::new();
    let argv = FOUND.get_or_init(|| {
        let local = repo().join("clients/typescript/node_modules/.bin/tsc");
        let candidates = [
            vec![local.display().to_string()],
            ["npx", "--yes", "--package", TYPESCRIPT, "tsc"]
                .map(String::from)
                .to_vec(),
        ];
        for argv in candidates {
            let answered = Command::new(&argv[0])
                .args(&argv[1..])
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success());
            if answered {
                return argv;
            }
        }
        panic!(
            "no TypeScript compiler: run `npm ci --prefix clients/typescript`, or give npx \
             (Node.js) access to the npm registry"
        );
    });
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]);
    command
}

/// `tsc` on the one hook file `file`, as strict as it gets, with the built-ins the file's
/// declarations allow.
fn type_check(file: &Path) -> Output {
    tsc()
        .args([
            "--noEmit",
            "--allowJs",
            "--checkJs",
            "--strict",
            "--target",
            "es2022",
            "--pretty",
            "false",
        ])
        .arg(file)
        .current_dir(file.parent().unwrap())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A copy of the shipped entities in a new directory.
fn shipped_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(repo().join("entities")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    dir
}

/// Runs `hook-types` with `args`; its output.
fn hook_types(args: &[&str], dir: &Path) -> Output {
    bin()
        .arg("hook-types")
        .arg("--entities")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn hook_types_writes_next_to_the_entities_or_where_it_is_told() {
    let dir = shipped_copy();
    let out = hook_types(&[], dir.path());
    assert!(out.status.success(), "{out:?}");
    let file = dir.path().join("entiserve.d.ts");
    assert_eq!(text(&out.stdout), format!("wrote {}\n", file.display()));
    let written = std::fs::read_to_string(&file).unwrap();
    for name in ["Campaigns", "Markers", "Assets", "Users"] {
        assert!(
            written.contains(&format!("\ninterface {name} {{\n")),
            "{name}"
        );
        assert!(
            written.contains(&format!("\ninterface {name}Input {{\n")),
            "{name}"
        );
    }
    assert!(written.contains("  role: \"admin\" | \"user\" | null;\n"));
    assert!(written.contains("  campaign_id: number;\n"));
    assert!(
        !written.contains("  password: "),
        "a secret is never returned"
    );
    assert!(
        written.contains("  password?: string | null;\n"),
        "but may be sent"
    );

    let printed = hook_types(&["--out", "-"], dir.path());
    assert!(printed.status.success(), "{printed:?}");
    assert_eq!(text(&printed.stdout), written);

    let elsewhere = dir.path().join("types.d.ts");
    let out = hook_types(&["--out", elsewhere.to_str().unwrap()], dir.path());
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), written);
}

#[test]
fn hook_types_prints_the_errors_of_the_entities_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.yaml"),
        "name: broken\nfields:\n  a: { type: strng }\n",
    )
    .unwrap();
    let out = hook_types(&[], dir.path());
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let broken = dir.path().join("broken.yaml").display().to_string();
    assert!(
        text(&out.stdout).contains(&format!("{broken}:3: ")),
        "{out:?}"
    );
    assert!(!dir.path().join("entiserve.d.ts").exists());
}

/// A hook file for markers that uses every part of the declarations as they mean it.
const TYPED_HOOKS: &str = r#"// @ts-check
/// <reference path="entiserve.d.ts" />

/** @type {BeforeCreate<"markers">} */
function beforeCreate(record, ctx) {
  const campaign = ctx.get("campaigns", record.campaign_id);
  if (campaign === null || campaign.is_active === false) {
    throw new Refuse("the campaign is not active", 409);
  }
  const same = ctx.list("markers", { campaign_id: campaign.id, name: record.name });
  if (same.length > 0) {
    throw new Refuse(`${campaign.name} has a marker ${same[0].name} already`);
  }
  record.page = record.page ?? 1;
  return record;
}

/** @type {BeforeUpdate<"markers">} */
function beforeUpdate(record, old) {
  if (record.name !== undefined) {
    record.name = record.name.trim() || old.name;
  }
}

/** @type {BeforeDelete<"markers">} */
function beforeDelete(old, ctx) {
  if (ctx.caller.role !== "admin" && old.page === 1) {
    throw new Refuse("only admins delete a first page", 403);
  }
}

/** @type {AfterCreate<"markers">} */
function afterCreate(record, ctx) {
  const asset = ctx.create("assets", { name: `page ${record.page}`, marker_id: record.id });
  ctx.update("assets", asset.id, { content: `${ctx.caller.login} made ${record.name}` });
}

/** @type {AfterUpdate<"markers">} */
function afterUpdate(record, old, ctx) {
  if (record.campaign_id !== old.campaign_id) {
    ctx.update("campaigns", old.campaign_id, { description: null });
  }
}

/** @type {AfterDelete<"markers">} */
function afterDelete(old, ctx) {
  for (const asset of ctx.list("assets", { marker_id: old.id })) {
    ctx.delete("assets", asset.id);
  }
}
"#;

/// Type-checks `source` as `name` next to the declarations of the shipped entities.
fn check_hook(name: &str, source: &str) -> Output {
    let dir = shipped_copy();
    let out = hook_types(&[], dir.path());
    assert!(out.status.success(), "{out:?}");
    let file = dir.path().join(name);
    std::fs::write(&file, source).unwrap();
    type_check(&file)
}

#[test]
fn tsc_accepts_hooks_that_use_the_types_as_declared() {
    let out = check_hook("markers.js", TYPED_HOOKS);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // The declarations hold: the file runs in the sandbox, which defines the six hooks.
    let file = HookFile::compile(Path::new("markers.js"), TYPED_HOOKS).unwrap();
    assert_eq!(file.hooks().count(), 6);
}

#[test]
fn tsc_refuses_hooks_that_break_the_types() {
    let cases = [
        ("a number in a text field", "record.name = 5;", "TS2322"),
        (
            "a value outside an enum",
            "ctx.list(\"users\", { role: \"owner\" });",
            "TS2322",
        ),
        (
            "a field no entity has",
            "record.colour = \"red\";",
            "TS2339",
        ),
        (
            "an entity that does not exist",
            "ctx.get(\"campaign\", 1);",
            "TS2345",
        ),
        (
            "a write in a before hook",
            "ctx.delete(\"assets\", 1);",
            "TS2339",
        ),
        (
            "a global the sandbox lacks",
            "fetch(\"https://example.com\");",
            "TS2304",
        ),
        (
            "a Refuse without a message",
            "throw new Refuse();",
            "TS2554",
        ),
    ];
    for (what, line, code) in cases {
        let source = TYPED_HOOKS.replace(
            "  record.page = record.page ?? 1;\n",
            &format!("  record.page = record.page ?? 1;\n  {line}\n"),
        );
        assert_ne!(source, TYPED_HOOKS);
        let out = check_hook("markers.js", &source);
        let said = text(&out.stdout);
        assert!(!out.status.success(), "{what}: tsc accepted it");
        assert!(said.contains(code), "{what}: {said}");
        // Every error is on the line added, none elsewhere (explanations are indented).
        let at = source.lines().position(|l| l.contains(line)).unwrap() + 1;
        let errors: Vec<&str> = said.lines().filter(|l| !l.starts_with(' ')).collect();
        assert!(!errors.is_empty(), "{what}: {said}");
        for error in errors {
            assert!(
                error.starts_with(&format!("markers.js({at},")),
                "{what}: {said}"
            );
        }
    }
}

/// Runs `init` into a new directory.
fn init() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = bin().arg("init").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    dir
}

#[test]
fn the_example_hooks_of_init_type_check_against_the_declarations_init_writes() {
    let dir = init();
    let entities = dir.path().join("entities");
    let declared = std::fs::read_to_string(entities.join("entiserve.d.ts")).unwrap();
    assert!(declared.contains("\ninterface Audit {\n"), "{declared}");
    assert!(declared.contains("  audit: AuditInput;\n"), "{declared}");
    let hooks = entities.join("campaigns.js");
    let source = std::fs::read_to_string(&hooks).unwrap();
    assert!(source.starts_with("// @ts-check\n"));
    let out = type_check(&hooks);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // The same file with a wrong audit row: tsc says so.
    let wrong = source.replace("object_id: id", "object_id: String(id)");
    assert_ne!(wrong, source);
    std::fs::write(&hooks, wrong).unwrap();
    let out = type_check(&hooks);
    assert!(!out.status.success(), "tsc accepted a text object_id");
    assert!(text(&out.stdout).contains("TS2322"), "{out:?}");
}

/// `record` as a map.
fn record(value: Json) -> Map<String, Json> {
    match value {
        Json::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn the_example_hooks_trim_a_name_and_refuse_an_empty_one() {
    let dir = init();
    let path = dir.path().join("entities/campaigns.js");
    let source = std::fs::read_to_string(&path).unwrap();
    let file = HookFile::compile(&path, &source).unwrap();
    let defined: Vec<Hook> = file.hooks().collect();
    assert_eq!(
        defined,
        [
            Hook::BeforeCreate,
            Hook::BeforeUpdate,
            Hook::AfterCreate,
            Hook::AfterUpdate,
            Hook::AfterDelete
        ]
    );
    let caller = CallerInfo {
        id: 2,
        login: "ann".into(),
        role: "user".into(),
    };
    let mut runtime = Runtime::new(Limits::default()).unwrap();
    let mut call = |hook, value: Json| {
        let old = (hook == Hook::BeforeUpdate).then(|| record(json!({"id": 1, "name": "old"})));
        runtime.call(&file, hook, record(value), old, &caller)
    };
    let created = call(
        Hook::BeforeCreate,
        json!({"name": "  Spring sale \n", "type": 2}),
    );
    let expected = record(json!({"name": "Spring sale", "type": 2}));
    assert_eq!(created, Ok(HookOutcome::Record(expected)));
    let updated = call(Hook::BeforeUpdate, json!({"is_active": false}));
    let expected = record(json!({"is_active": false}));
    assert_eq!(updated, Ok(HookOutcome::Record(expected)));
    for hook in [Hook::BeforeCreate, Hook::BeforeUpdate] {
        let refused = Err(HookError::Refused {
            message: "name is empty".into(),
            status: 422,
        });
        assert_eq!(call(hook, json!({"name": " \t "})), refused, "{hook:?}");
    }
}
