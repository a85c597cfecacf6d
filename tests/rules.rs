//! Access rules per record (CONTRACT.md section 11, "Access rules per record"), against a real
//! server on the backend the suite runs on (SQLite, or PostgreSQL with `TEST_DATABASE_URL`).
//!
//! The entities of `tests/fixtures/rules` give the users four roles (`admin`, `user`, `editor`,
//! `guest`) and write access as rules: `notes` has the contract's example rules and an owner
//! that defaults to the caller, `comments` follows a reference (`note_id.owner_id`), `boards`
//! has lists of roles (`read: editor`, `write: [editor]`) and `users` lets a user see only
//! their own record. Every check compares what a caller gets with the rules evaluated here:
//!
//! - a row failing `list` is not listed, counted (`X-Total-Count`), exported (`t=csv`), walked
//!   by cursor or named by `changed_by`;
//! - a row failing `view` does not exist for that caller (404 on GET, PUT and DELETE, read
//!   exactly as an id no object has);
//! - a row passing `view` but failing `update` or `delete` is a 403, and so is a create failing
//!   `create`;
//! - the same holds for each item of a batch, each row of an upload (synchronous or in the
//!   background) and a background call, the other items applying;
//! - an undo leaves an object its caller may no longer change and names it as a conflict;
//! - a list of roles refuses the whole operation (403), lists included;
//! - `entiserve check` names a rule's own line and the nearest field name.

mod common;

use common::upload::{UPLOAD, form, rows};
use common::zips::zip_of;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::{Method, RequestBuilder};
use serde_json::{Value as Json, json};
use std::collections::BTreeSet;
use std::process::Command;

/// The entity files of these tests.
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/rules");
const ENTITY_FILES: [&str; 7] = [
    "users.yaml",
    "notes.yaml",
    "comments.yaml",
    "boards.yaml",
    "posts.yaml",
    "pictures.yaml",
    "tags.yaml",
];
/// An id no object has.
const MISSING: i64 = 999_999_999;

/// Who calls: the admin, or a user of one of the other three roles.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Who {
    Admin,
    User,
    Editor,
    Guest,
}

use Who::{Admin, Editor, Guest, User};

const EVERYONE: [Who; 4] = [Admin, User, Editor, Guest];

impl Who {
    fn login(self) -> &'static str {
        match self {
            Admin => "admin",
            User => "uma",
            Editor => "eddie",
            Guest => "gus",
        }
    }

    fn password(self) -> &'static str {
        match self {
            Admin => ADMIN_PASSWORD,
            User => "uma-password-1",
            Editor => "eddie-password-1",
            Guest => "gus-password-1",
        }
    }

    fn role(self) -> &'static str {
        match self {
            Admin => "admin",
            User => "user",
            Editor => "editor",
            Guest => "guest",
        }
    }
}

// The rules of tests/fixtures/rules/notes.yaml, evaluated here on who owns a note.

/// `list` and `view`: `owner_id = @caller.id || @caller.role = 'editor'`.
fn may_see(who: Who, owner: Who) -> bool {
    who == Admin || who == owner || who == Editor
}

/// `create`: `@caller.role != 'guest'`.
fn may_create(who: Who) -> bool {
    who != Guest
}

/// `update`: `owner_id = @caller.id`.
fn may_update(who: Who, owner: Who) -> bool {
    who == Admin || who == owner
}

/// `delete`: `owner_id = @caller.id && @caller.role = 'editor'`.
fn may_delete(who: Who, owner: Who) -> bool {
    who == Admin || (who == owner && who == Editor)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Update,
    Delete,
}

/// The status an update or delete of `owner`'s note by `who` answers.
fn expected(who: Who, owner: Who, op: Op) -> u16 {
    let allowed = match op {
        Op::Update => may_update(who, owner),
        Op::Delete => may_delete(who, owner),
    };
    match (may_see(who, owner), allowed) {
        (false, _) => 404,
        (true, false) => 403,
        (true, true) => 200,
    }
}

/// The status a create by `who` answers.
fn expected_create(who: Who) -> u16 {
    if may_create(who) { 200 } else { 403 }
}

/// Asserts a reply's status and, for a refusal, the contract's error shape and code.
fn assert_reply(what: &str, got: &(u16, Json), status: u16) {
    assert_eq!(got.0, status, "{what}: {}", got.1);
    let code = match status {
        403 => "forbidden",
        404 => "not_found",
        _ => return,
    };
    assert_eq!(error_code(&got.1), code, "{what}: {}", got.1);
}

/// A row hidden by `view` reads exactly as an id no object has: the same body, the id aside.
fn assert_reads_as_missing(what: &str, hidden: &Json, id: i64, missing: &Json) {
    assert_eq!(
        hidden.to_string().replace(&id.to_string(), "<id>"),
        missing.to_string().replace(&MISSING.to_string(), "<id>"),
        "{what}: a hidden row must not read otherwise than a missing one"
    );
}

fn backend() -> &'static str {
    match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => "PostgreSQL",
        _ => "SQLite",
    }
}

/// A server on the rules entities, with a user of each role besides the admin.
struct World {
    app: TestApp,
    /// Each caller's user id, in the order of [`Who`].
    ids: [i64; 4],
}

impl World {
    async fn start() -> World {
        eprintln!("rules on {}", backend());
        let dir = tempfile::tempdir().unwrap();
        let entities = dir.path().join("entities");
        std::fs::create_dir_all(&entities).unwrap();
        for f in ENTITY_FILES {
            std::fs::copy(std::path::Path::new(FIXTURES).join(f), entities.join(f)).unwrap();
        }
        let (s, db) = test_settings(dir.path(), &entities).await;
        let app = start(dir, entities, s, db).await;
        let (s, me) = json(app.admin(Method::GET, "/users/me").send().await.unwrap()).await;
        assert_eq!(s, 200, "{me}");
        let mut ids = [me["id"].as_i64().unwrap(), 0, 0, 0];
        for who in [User, Editor, Guest] {
            let u = app
                .create(
                    "users",
                    json!({"login": who.login(), "password": who.password(), "role": who.role()}),
                )
                .await;
            assert_eq!(u["role"], who.role(), "{u}");
            ids[who as usize] = u["id"].as_i64().unwrap();
        }
        World { app, ids }
    }

    fn id(&self, who: Who) -> i64 {
        self.ids[who as usize]
    }

    fn req(&self, who: Who, m: Method, path: &str) -> RequestBuilder {
        self.app.as_user(who.login(), who.password(), m, path)
    }

    /// Sends `body` (if any) as JSON as `who`: the status and the JSON reply.
    async fn send(&self, who: Who, m: Method, path: &str, body: Option<&Json>) -> (u16, Json) {
        let mut r = self.req(who, m, path);
        if let Some(b) = body {
            r = r.json(b);
        }
        json(r.send().await.unwrap()).await
    }

    /// A note of `owner`'s with `rank`, created by the admin: its id.
    async fn note(&self, owner: Who, rank: i64) -> i64 {
        let title = format!("{owner:?}'s note");
        let n = self
            .app
            .create(
                "notes",
                json!({"title": title, "owner_id": self.id(owner), "rank": rank}),
            )
            .await;
        assert_eq!(n["owner_id"], self.id(owner), "{n}");
        n["id"].as_i64().unwrap()
    }

    /// A note of each caller's with `rank`: (id, owner).
    async fn note_of_each(&self, rank: i64) -> Vec<(i64, Who)> {
        let mut out = Vec::new();
        for owner in EVERYONE {
            out.push((self.note(owner, rank).await, owner));
        }
        out
    }

    /// The stored object as the admin reads it; `None` when there is none.
    async fn stored(&self, entity: &str, id: i64) -> Option<Json> {
        let (s, b) = self
            .send(Admin, Method::GET, &format!("/{entity}/{id}"), None)
            .await;
        match s {
            200 => Some(b),
            404 => None,
            _ => panic!("GET /{entity}/{id} as admin: {s} {b}"),
        }
    }

    /// Gives note `id` to `owner`, as the admin.
    async fn give(&self, id: i64, owner: Who) {
        let body = json!({"owner_id": self.id(owner)});
        let (s, b) = self
            .send(Admin, Method::PUT, &format!("/notes/{id}"), Some(&body))
            .await;
        assert_eq!(s, 200, "{b}");
    }

    /// `GET path` as `who`, which must answer 200: the ids listed and `X-Total-Count`.
    async fn listed(&self, who: Who, path: &str) -> (Vec<i64>, i64) {
        let r = self.req(who, Method::GET, path).send().await.unwrap();
        let total = total_of(&r);
        let (s, b) = json(r).await;
        assert_eq!(s, 200, "{who:?} GET {path}: {b}");
        (ids_of(&b), total)
    }
}

/// The `id` of each object of a JSON array.
fn ids_of(list: &Json) -> Vec<i64> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|o| o["id"].as_i64().unwrap())
        .collect()
}

/// `X-Total-Count` of a reply.
fn total_of(r: &reqwest::Response) -> i64 {
    r.headers()
        .get("x-total-count")
        .unwrap_or_else(|| panic!("no X-Total-Count ({})", r.status()))
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// The target of a `Link: <...>; rel="next"` header, if the reply has one.
fn next_link(r: &reqwest::Response) -> Option<String> {
    let v = r.headers().get("link")?.to_str().unwrap().to_string();
    let (target, rel) = v.split_once(';').expect("a link has parameters");
    assert_eq!(rel.trim(), "rel=\"next\"", "{v}");
    let target = target.trim();
    assert!(target.starts_with('<') && target.ends_with('>'), "{v}");
    Some(target[1..target.len() - 1].to_string())
}

/// Follows the `Link` headers from `path` as `who`: every object of every page, and each
/// page's `X-Total-Count`.
async fn walk(w: &World, who: Who, path: &str) -> (Vec<Json>, Vec<i64>) {
    let (mut objects, mut totals) = (Vec::new(), Vec::new());
    let mut next = Some(path.to_string());
    while let Some(p) = next {
        let r = w.req(who, Method::GET, &p).send().await.unwrap();
        assert_eq!(r.status(), 200, "{who:?} GET {p}");
        next = next_link(&r);
        totals.push(total_of(&r));
        let page: Json = r.json().await.unwrap();
        objects.extend(page.as_array().unwrap().iter().cloned());
    }
    (objects, totals)
}

/// The result items of a batch: (status, parsed body) each, as the batch reply or its stored
/// result holds them.
fn items_of(reply: &Json) -> Vec<(u16, Json)> {
    reply
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {reply}"))
        .iter()
        .map(|i| {
            let body = serde_json::from_str(i["body"].as_str().expect("body is a string")).unwrap();
            (i["status"].as_u64().expect("integer status") as u16, body)
        })
        .collect()
}

/// A batch on notes as `who`: synchronously (`bgrs=false`), or in the background (the
/// default), then its stored result once finished, read by `who`, whose request it is.
async fn notes_batch(w: &World, who: Who, m: Method, items: &Json, bg: bool) -> Vec<(u16, Json)> {
    let n = items.as_array().unwrap().len();
    if !bg {
        let (s, b) = w.send(who, m, "/v2.5/notes?bgrs=false", Some(items)).await;
        assert_eq!(s, 200, "{who:?}'s batch: {b}");
        let got = items_of(&b);
        assert_eq!(got.len(), n, "an item per item: {b}");
        return got;
    }
    let (s, b) = w.send(who, m, "/v2.5/notes", Some(items)).await;
    assert_eq!(s, 202, "{who:?}'s background batch: {b}");
    let rid = b["request"].as_str().unwrap().to_string();
    let rec = w.app.wait_finished(&rid).await;
    assert_eq!(rec["user_id"], w.id(who).to_string(), "{rec}");
    assert_eq!(
        rec["status"], "200",
        "a batch of refused items is a batch: {rec}"
    );
    let path = format!("/v2.5/bgrs/{rid}/result");
    let (s, b) = w.send(who, Method::GET, &path, None).await;
    assert_eq!(s, 200, "{who:?} reads their own result: {b}");
    let got = items_of(&b);
    assert_eq!(got.len(), n, "an item per item: {b}");
    got
}

/// Creates of two notes, as one batch of `who`'s.
async fn check_batch_creates(w: &World, who: Who, bg: bool) {
    let items = json!([{"title": "b1"}, {"title": "b2", "rank": 4}]);
    let before = count(&w.app, "notes").await;
    let got = notes_batch(w, who, Method::POST, &items, bg).await;
    for (i, item) in got.iter().enumerate() {
        let what = format!("{who:?}'s create item {i} (background: {bg})");
        assert_reply(&what, item, expected_create(who));
        if item.0 == 200 {
            assert_eq!(item.1["owner_id"], w.id(who), "{what}: the default owner");
            let stored = w.stored("notes", item.1["id"].as_i64().unwrap()).await;
            assert_eq!(stored.unwrap()["owner_id"], w.id(who), "{what}");
        }
    }
    let made = got.iter().filter(|i| i.0 == 200).count() as i64;
    assert_eq!(count(&w.app, "notes").await, before + made, "{who:?}");
}

/// An update of a note of each caller's and of an id no object has, as one batch.
async fn check_batch_updates(w: &World, who: Who, bg: bool) {
    let targets = w.note_of_each(1).await;
    let mut items: Vec<Json> = targets
        .iter()
        .map(|(id, _)| json!({"id": id, "rank": 9}))
        .collect();
    items.push(json!({"id": MISSING, "rank": 9}));
    let got = notes_batch(w, who, Method::PUT, &Json::Array(items), bg).await;
    for (&(id, owner), item) in targets.iter().zip(&got) {
        let what = format!("{who:?} updates {owner:?}'s note in a batch (background: {bg})");
        let want = expected(who, owner, Op::Update);
        assert_reply(&what, item, want);
        let rank = w.stored("notes", id).await.unwrap()["rank"].clone();
        assert_eq!(rank, if want == 200 { 9 } else { 1 }, "{what}");
    }
    assert_reply(&format!("{who:?}: a missing id"), &got[4], 404);
}

/// A delete of a note of each caller's, as one batch.
async fn check_batch_deletes(w: &World, who: Who, bg: bool) {
    let targets = w.note_of_each(1).await;
    let items: Vec<Json> = targets.iter().map(|(id, _)| json!(id)).collect();
    let got = notes_batch(w, who, Method::DELETE, &Json::Array(items), bg).await;
    for (&(id, owner), item) in targets.iter().zip(&got) {
        let what = format!("{who:?} deletes {owner:?}'s note in a batch (background: {bg})");
        let want = expected(who, owner, Op::Delete);
        assert_reply(&what, item, want);
        let kept = w.stored("notes", id).await.is_some();
        assert_eq!(kept, want != 200, "{what}");
    }
}

/// Uploads `csv` to `entity` as `who`, synchronously or in the background: the request id
/// (background only) and the result file's rows, header first.
async fn upload_as(
    w: &World,
    who: Who,
    entity: &str,
    csv: &str,
    bg: bool,
) -> (Option<String>, Vec<Vec<String>>) {
    let fields: &[(&str, &str)] = if bg { &[("bgrs", "1")] } else { &[] };
    let f = form(entity, "rules.csv", csv.as_bytes().to_vec(), fields);
    let r = w.req(who, Method::POST, UPLOAD).multipart(f).send().await;
    let r = r.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    if !bg {
        assert_eq!(status, 200, "{who:?} uploads: {text}");
        return (None, rows(&text));
    }
    assert_eq!(status, 202, "{who:?} uploads in the background: {text}");
    let rid = serde_json::from_str::<Json>(&text).unwrap()["request"]
        .as_str()
        .unwrap()
        .to_string();
    let rec = w.app.wait_finished(&rid).await;
    assert_eq!(rec["user_id"], w.id(who).to_string(), "{rec}");
    let result = rows(&w.app.result_text(&rid).await);
    (Some(rid), result)
}

/// The position of column `name` in a result file's header.
fn col(rows: &[Vec<String>], name: &str) -> usize {
    rows[0]
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name}: {:?}", rows[0]))
}

/// The ids of an upload's created rows, every row having to be `OK`.
fn created_ids(rows: &[Vec<String>]) -> Vec<i64> {
    let (res, id) = (col(rows, "res"), col(rows, "id"));
    rows[1..]
        .iter()
        .map(|r| {
            assert_eq!(r[res], "OK", "{rows:?}");
            r[id].parse().unwrap()
        })
        .collect()
}

/// One row of an upload and what it must do: the CSV row, the status, and for a refusal the
/// text the same REST call answers (which a row's `res` carries).
struct Row {
    line: String,
    status: u16,
    text: String,
}

/// The rows of an upload of `who`'s: a create, then an update and a delete of a note of each
/// caller's. Each refused row's REST call is made first (it changes nothing) for its text.
async fn upload_rows(w: &World, who: Who) -> (Vec<Row>, Vec<(i64, Who)>, Vec<(i64, Who)>) {
    let (updated, deleted) = (w.note_of_each(1).await, w.note_of_each(1).await);
    let mut calls = vec![(
        "c;;made by upload;1".to_string(),
        expected_create(who),
        Method::POST,
        "/notes".to_string(),
        Some(json!({"title": "made by upload", "rank": 1})),
    )];
    for &(id, owner) in &updated {
        let (line, path) = (format!("u;{id};;5"), format!("/notes/{id}"));
        let want = expected(who, owner, Op::Update);
        calls.push((line, want, Method::PUT, path, Some(json!({"rank": 5}))));
    }
    for &(id, owner) in &deleted {
        let (line, path) = (format!("d;{id};;"), format!("/notes/{id}"));
        calls.push((
            line,
            expected(who, owner, Op::Delete),
            Method::DELETE,
            path,
            None,
        ));
    }
    let mut rows = Vec::new();
    for (line, status, m, path, body) in calls {
        let mut text = "OK".to_string();
        if status != 200 {
            let got = w.send(who, m, &path, body.as_ref()).await;
            assert_reply(&format!("{who:?}: {line} as a REST call"), &got, status);
            text = got.1["description"].as_str().unwrap().to_string();
        }
        rows.push(Row { line, status, text });
    }
    (rows, updated, deleted)
}

/// An upload of `who`'s with rows the rules allow and rows they refuse: each row's `res` (and,
/// in the background, its detail line) as the row's own call answers; the allowed rows apply.
async fn check_upload(w: &World, who: Who, bg: bool) {
    let (expect, updated, deleted) = upload_rows(w, who).await;
    let mut csv = String::from("op;id;title;rank\n");
    for r in &expect {
        csv.push_str(&r.line);
        csv.push('\n');
    }
    let (rid, result) = upload_as(w, who, "notes", &csv, bg).await;
    assert_eq!(result.len(), expect.len() + 1, "{result:?}");
    let (res, id) = (col(&result, "res"), col(&result, "id"));
    for (n, (row, want)) in result[1..].iter().zip(&expect).enumerate() {
        let what = format!("{who:?}, line {} `{}` (background: {bg})", n + 1, want.line);
        assert_eq!(row[res], want.text, "{what}");
        if n == 0 && want.status == 200 {
            let new: i64 = row[id].parse().expect("the new id filled in");
            let stored = w.stored("notes", new).await.expect("created");
            assert_eq!(stored["owner_id"], w.id(who), "{what}: the default owner");
        }
    }
    for (i, &(id, _)) in updated.iter().enumerate() {
        let rank = w.stored("notes", id).await.unwrap()["rank"].clone();
        let want = if expect[1 + i].status == 200 { 5 } else { 1 };
        assert_eq!(rank, want, "{who:?}: `{}`", expect[1 + i].line);
    }
    for (i, &(id, _)) in deleted.iter().enumerate() {
        let kept = w.stored("notes", id).await.is_some();
        assert_eq!(
            kept,
            expect[5 + i].status != 200,
            "`{}`",
            expect[5 + i].line
        );
    }
    let Some(rid) = rid else { return };
    let lines: Vec<String> = all_details(&w.app, &rid)
        .await
        .iter()
        .map(|d| d["details"].as_str().unwrap().to_string())
        .filter(|d| d.starts_with("Line: "))
        .collect();
    assert_eq!(lines.len(), expect.len(), "{lines:?}");
    for (n, (line, want)) in lines.iter().zip(&expect).enumerate() {
        let start = format!("Line: {} done. Result: {}. ", n + 1, want.status);
        assert_eq!(
            line,
            &format!("{start}{}", want.text),
            "{who:?} (background)"
        );
    }
}

#[tokio::test]
async fn lists_and_counts_hold_only_the_rows_the_list_rule_admits() {
    let w = World::start().await;
    let mut notes: Vec<(i64, Who, i64)> = Vec::new();
    for owner in EVERYONE {
        for rank in [1, 2] {
            notes.push((w.note(owner, rank).await, owner, rank));
        }
    }
    for who in EVERYONE {
        let seen = |rank: Option<i64>| -> Vec<i64> {
            let of = |r: i64| rank.is_none_or(|x| x == r);
            notes
                .iter()
                .filter(|&&(_, owner, r)| may_see(who, owner) && of(r))
                .map(|n| n.0)
                .collect()
        };
        let want = seen(None);
        for prefix in ["", "/v2.5"] {
            let path = format!("{prefix}/notes?sort=id&limit=1000");
            let (ids, total) = w.listed(who, &path).await;
            assert_eq!(ids, want, "{who:?} GET {path}");
            assert_eq!(
                total,
                want.len() as i64,
                "{who:?} GET {path}: X-Total-Count"
            );
        }
        // A page of one counts them all; a filter counts within them.
        let (ids, total) = w.listed(who, "/notes?limit=1&sort=id").await;
        assert_eq!(ids, want[..1], "{who:?}");
        assert_eq!(total, want.len() as i64, "{who:?}: X-Total-Count of a page");
        let (ids, total) = w.listed(who, "/notes?rank=2&sort=id").await;
        assert_eq!((ids, total), (seen(Some(2)), seen(Some(2)).len() as i64));
        // Asking for another's notes by a filter finds nothing the rule hides: 200, empty.
        for owner in EVERYONE {
            let path = format!("/notes?owner_id={}&sort=id", w.id(owner));
            let mine: Vec<i64> = notes
                .iter()
                .filter(|n| n.1 == owner && may_see(who, owner))
                .map(|n| n.0)
                .collect();
            let (ids, total) = w.listed(who, &path).await;
            assert_eq!((&ids, total), (&mine, mine.len() as i64), "{who:?} {path}");
        }
    }
    w.app.stop().await;
}

#[tokio::test]
async fn a_row_the_view_rule_hides_is_a_404_read_as_a_missing_id() {
    let w = World::start().await;
    let notes = w.note_of_each(1).await;
    for who in EVERYONE {
        let missing = w
            .send(who, Method::GET, &format!("/notes/{MISSING}"), None)
            .await;
        assert_reply(&format!("{who:?} reads a missing id"), &missing, 404);
        for &(id, owner) in &notes {
            let what = format!("{who:?} reads {owner:?}'s note");
            let got = w
                .send(who, Method::GET, &format!("/notes/{id}"), None)
                .await;
            if may_see(who, owner) {
                assert_eq!(got.0, 200, "{what}: {}", got.1);
                assert_eq!(
                    (&got.1["id"], &got.1["owner_id"]),
                    (&json!(id), &json!(w.id(owner)))
                );
            } else {
                assert_reply(&what, &got, 404);
                assert_reads_as_missing(&what, &got.1, id, &missing.1);
            }
        }
    }
    w.app.stop().await;
}

#[tokio::test]
async fn creates_follow_the_create_rule_and_the_owner_defaults_to_the_caller() {
    let w = World::start().await;
    for who in EVERYONE {
        let what = format!("{who:?} creates a note");
        let before = count(&w.app, "notes").await;
        let body = json!({"title": format!("by {who:?}"), "rank": 3});
        let got = w.send(who, Method::POST, "/notes", Some(&body)).await;
        assert_reply(&what, &got, expected_create(who));
        if got.0 != 200 {
            assert_eq!(count(&w.app, "notes").await, before, "{what}: nothing made");
            continue;
        }
        assert_eq!(got.1["owner_id"], w.id(who), "{what}: {}", got.1);
        let id = got.1["id"].as_i64().unwrap();
        let stored = w.stored("notes", id).await.expect("stored");
        assert_eq!(stored["owner_id"], w.id(who), "{what}");
        let (s, b) = w
            .send(who, Method::GET, &format!("/notes/{id}"), None)
            .await;
        assert_eq!(s, 200, "{what}: the owner sees it: {b}");
    }
    // The default holds for query parameters too.
    let (s, b) = w
        .send(Editor, Method::POST, "/notes?title=by%20query&rank=2", None)
        .await;
    assert_eq!((s, &b["owner_id"]), (200, &json!(w.id(Editor))), "{b}");
    // An owner given is kept; a guest naming themselves is still refused.
    let body = json!({"title": "for the user", "owner_id": w.id(User)});
    let (s, b) = w.send(Admin, Method::POST, "/notes", Some(&body)).await;
    assert_eq!((s, &b["owner_id"]), (200, &json!(w.id(User))), "{b}");
    let body = json!({"title": "mine", "owner_id": w.id(Guest)});
    let got = w.send(Guest, Method::POST, "/notes", Some(&body)).await;
    assert_reply("a guest names themselves as owner", &got, 403);
    w.app.stop().await;
}

#[tokio::test]
async fn updates_are_404_where_hidden_403_where_only_seen_200_for_the_owner() {
    let w = World::start().await;
    let change = json!({"rank": 2});
    for who in EVERYONE {
        let path = format!("/notes/{MISSING}");
        let missing = w.send(who, Method::PUT, &path, Some(&change)).await;
        assert_reply(&format!("{who:?} updates a missing id"), &missing, 404);
        for owner in EVERYONE {
            let id = w.note(owner, 1).await;
            let what = format!("{who:?} updates {owner:?}'s note");
            let want = expected(who, owner, Op::Update);
            let path = format!("/notes/{id}");
            let got = w.send(who, Method::PUT, &path, Some(&change)).await;
            assert_reply(&what, &got, want);
            match want {
                200 => assert_eq!(got.1["rank"], 2, "{what}"),
                404 => assert_reads_as_missing(&what, &got.1, id, &missing.1),
                _ => {}
            }
            let stored = w.stored("notes", id).await.expect("still there");
            assert_eq!(stored["rank"], if want == 200 { 2 } else { 1 }, "{what}");
            assert_eq!(stored["owner_id"], w.id(owner), "{what}");
        }
    }
    w.app.stop().await;
}

#[tokio::test]
async fn deletes_are_404_where_hidden_403_where_only_seen_200_for_an_owning_editor() {
    let w = World::start().await;
    for who in EVERYONE {
        let path = format!("/notes/{MISSING}");
        let missing = w.send(who, Method::DELETE, &path, None).await;
        assert_reply(&format!("{who:?} deletes a missing id"), &missing, 404);
        for owner in EVERYONE {
            let id = w.note(owner, 1).await;
            let what = format!("{who:?} deletes {owner:?}'s note");
            let want = expected(who, owner, Op::Delete);
            let got = w
                .send(who, Method::DELETE, &format!("/notes/{id}"), None)
                .await;
            assert_reply(&what, &got, want);
            match want {
                200 => assert_eq!(got.1["id"], id, "{what}: the deleted object"),
                404 => assert_reads_as_missing(&what, &got.1, id, &missing.1),
                _ => {}
            }
            let kept = w.stored("notes", id).await.is_some();
            assert_eq!(kept, want != 200, "{what}");
        }
    }
    // The cases the contract's example turns on, spelt out.
    assert_eq!(expected(User, Editor, Op::Update), 404);
    assert_eq!(expected(Editor, User, Op::Update), 403);
    assert_eq!(expected(User, User, Op::Delete), 403);
    assert_eq!(expected(Editor, Editor, Op::Delete), 200);
    w.app.stop().await;
}

#[tokio::test]
async fn batch_items_each_get_the_status_of_their_own_call() {
    let w = World::start().await;
    for who in EVERYONE {
        check_batch_creates(&w, who, false).await;
        check_batch_updates(&w, who, false).await;
        check_batch_deletes(&w, who, false).await;
    }
    w.app.stop().await;
}

#[tokio::test]
async fn an_atomic_batch_with_a_refused_item_applies_nothing() {
    let w = World::start().await;
    for (who, other, refused) in [(User, Editor, 404), (Editor, User, 403)] {
        let (own, theirs) = (w.note(who, 1).await, w.note(other, 1).await);
        let items = json!([{"id": own, "rank": 7}, {"id": theirs, "rank": 7}]);
        let path = "/v2.5/notes?bgrs=false&atomic=1";
        let (s, b) = w.send(who, Method::PUT, path, Some(&items)).await;
        assert_eq!(s, 200, "{b}");
        let got = items_of(&b);
        let what = format!("{who:?}'s atomic batch");
        assert_eq!(
            got[0].0, 409,
            "{what}: the allowed item is not applied: {b}"
        );
        assert_eq!(error_code(&got[0].1), "not_applied", "{what}");
        assert_reply(&what, &got[1], refused);
        for id in [own, theirs] {
            assert_eq!(w.stored("notes", id).await.unwrap()["rank"], 1, "{what}");
        }
    }
    w.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_rows_each_get_the_status_of_their_own_call() {
    let w = World::start().await;
    for who in EVERYONE {
        check_upload(&w, who, false).await;
    }
    w.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_upload_rows_each_get_the_status_of_their_own_call() {
    let w = World::start().await;
    for who in EVERYONE {
        check_upload(&w, who, true).await;
    }
    w.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_batches_run_with_their_callers_rules() {
    let w = World::start().await;
    for who in EVERYONE {
        check_batch_creates(&w, who, true).await;
        check_batch_updates(&w, who, true).await;
        check_batch_deletes(&w, who, true).await;
    }
    w.app.stop().await;
}

/// A single call with `bgrs=1` as `who`: the status it ends with and its body. The refusal may
/// come at once or from the queued call when it runs (then the record holds the status and the
/// result the body); either way it is the status of the call made without `bgrs`.
async fn single_in_background(w: &World, who: Who, m: Method, path: &str) -> (u16, Json) {
    let body = json!({"rank": 8});
    let body = (m == Method::PUT).then_some(&body);
    let (s, b) = w.send(who, m, &format!("{path}?bgrs=1"), body).await;
    if s != 202 {
        return (s, b);
    }
    let rid = b["request"].as_str().unwrap().to_string();
    let rec = w.app.wait_finished(&rid).await;
    assert_eq!(rec["user_id"], w.id(who).to_string(), "{rec}");
    let status = rec["status"].as_str().unwrap().parse().unwrap();
    let result = serde_json::from_str(&w.app.result_text(&rid).await).unwrap();
    (status, result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_background_calls_run_with_their_callers_rules() {
    let w = World::start().await;
    for who in EVERYONE {
        for owner in EVERYONE {
            for (m, op) in [(Method::PUT, Op::Update), (Method::DELETE, Op::Delete)] {
                let id = w.note(owner, 1).await;
                let what = format!("{who:?}: {m} of {owner:?}'s note with bgrs=1");
                let want = expected(who, owner, op);
                let got = single_in_background(&w, who, m, &format!("/notes/{id}")).await;
                assert_reply(&what, &got, want);
                let stored = w.stored("notes", id).await;
                match (op, want) {
                    (Op::Update, _) => {
                        let rank = if want == 200 { 8 } else { 1 };
                        assert_eq!(stored.unwrap()["rank"], rank, "{what}");
                    }
                    (Op::Delete, _) => assert_eq!(stored.is_some(), want != 200, "{what}"),
                }
            }
        }
    }
    w.app.stop().await;
}

#[tokio::test]
async fn csv_exports_and_cursor_walks_hold_only_the_listed_rows() {
    let w = World::start().await;
    let mut notes = Vec::new();
    for (i, owner) in EVERYONE.iter().cycle().take(12).enumerate() {
        notes.push((w.note(*owner, (i as i64 * 7) % 5).await, *owner));
    }
    for who in EVERYONE {
        let want: Vec<i64> = notes
            .iter()
            .filter(|n| may_see(who, n.1))
            .map(|n| n.0)
            .collect();
        let path = "/notes?t=csv&sort=id&fields=id,owner_id";
        let r = w.req(who, Method::GET, path).send().await.unwrap();
        assert_eq!(r.status(), 200, "{who:?} {path}");
        assert_eq!(
            total_of(&r),
            want.len() as i64,
            "{who:?} {path}: X-Total-Count"
        );
        let exported = common::upload::rows_split_by(&r.text().await.unwrap(), b',');
        assert_eq!(exported[0], ["id", "owner_id"], "{who:?}");
        let ids: Vec<i64> = exported[1..]
            .iter()
            .map(|r| r[0].parse().unwrap())
            .collect();
        assert_eq!(ids, want, "{who:?} exports");
        for (limit, sort) in [
            (1, ""),
            (2, "&sort=-rank"),
            (5, "&sort=rank"),
            (3, "&sort=id"),
        ] {
            let path = format!("/notes?limit={limit}{sort}");
            let (objects, totals) = walk(&w, who, &path).await;
            let walked = ids_of(&Json::Array(objects));
            let set: BTreeSet<i64> = walked.iter().copied().collect();
            assert_eq!(set.len(), walked.len(), "{who:?} {path}: a row twice");
            assert_eq!(set, want.iter().copied().collect(), "{who:?} {path}");
            let n = want.len() as i64;
            assert!(totals.iter().all(|t| *t == n), "{who:?} {path}: {totals:?}");
        }
    }
    w.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_by_names_only_the_rows_its_caller_may_list() {
    let w = World::start().await;
    let csv = "op;title;rank\nc;a;1\nc;b;2\nc;c;3\nc;d;4\n";
    let (rid, result) = upload_as(&w, User, "notes", csv, true).await;
    let (rid, made) = (rid.unwrap(), created_ids(&result));
    assert_eq!(made.len(), 4);
    // Two of them are given to the editor afterwards.
    for &id in &made[..2] {
        w.give(id, Editor).await;
    }
    let path = format!("/notes?changed_by={rid}&sort=id");
    let (ids, total) = w.listed(User, &path).await;
    assert_eq!((ids, total), (made[2..].to_vec(), 2), "the user's own");
    let (ids, total) = w.listed(Admin, &path).await;
    assert_eq!((ids, total), (made.clone(), 4), "the admin lists all");
    let r = w
        .req(User, Method::GET, &format!("{path}&t=csv&fields=id"))
        .send()
        .await
        .unwrap();
    assert_eq!(total_of(&r), 2);
    let exported = common::upload::rows_split_by(&r.text().await.unwrap(), b',');
    let ids: Vec<i64> = exported[1..]
        .iter()
        .map(|r| r[0].parse().unwrap())
        .collect();
    assert_eq!(ids, made[2..], "t=csv with changed_by");
    // The editor may list all four notes, but the request is not theirs.
    let got = w.send(Editor, Method::GET, &path, None).await;
    assert_reply("the editor names the user's request", &got, 404);
    w.app.stop().await;
}

/// Undoes `rid` as `who` and waits: the conflicts its result names, as (entity, id), sorted.
async fn undo_as(w: &World, who: Who, rid: &str) -> Vec<(String, i64)> {
    let (s, b) = w
        .send(who, Method::POST, &format!("/bgrs/{rid}/undo"), None)
        .await;
    assert_eq!(s, 202, "{who:?} undoes their request: {b}");
    let u = b["request"].as_str().unwrap().to_string();
    w.app.wait_finished(&u).await;
    let result: Json = serde_json::from_str(&w.app.result_text(&u).await).unwrap();
    let mut named: Vec<(String, i64)> = items_of(&result)
        .into_iter()
        .map(|(_, c)| {
            assert_eq!(c["error"], "conflict", "{c}");
            (
                c["entity"].as_str().unwrap().to_string(),
                c["id"].as_i64().unwrap(),
            )
        })
        .collect();
    named.sort();
    named
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_leaves_a_note_given_away_since_and_reverts_the_rest() {
    let w = World::start().await;
    // The editor may update and delete their own notes, so may undo creating them.
    let csv = "op;title;rank\nc;one;1\nc;two;2\nc;three;3\n";
    let (rid, result) = upload_as(&w, Editor, "notes", csv, true).await;
    let made = created_ids(&result);
    w.give(made[1], User).await;
    let conflicts = undo_as(&w, Editor, &rid.unwrap()).await;
    assert_eq!(conflicts, [("notes".to_string(), made[1])]);
    assert!(w.stored("notes", made[0]).await.is_none(), "reverted");
    assert!(w.stored("notes", made[2]).await.is_none(), "reverted");
    let kept = w.stored("notes", made[1]).await.expect("left alone");
    assert_eq!(kept["owner_id"], w.id(User));
    w.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_leaves_what_its_caller_may_no_longer_change() {
    let w = World::start().await;
    let gone = [w.note(Editor, 1).await, w.note(Editor, 1).await];
    let updated = w.note(Editor, 1).await;
    let csv = format!(
        "op;id;title;rank\nd;{};;\nd;{};;\nu;{updated};;2\n",
        gone[0], gone[1]
    );
    let (rid, result) = upload_as(&w, Editor, "notes", &csv, true).await;
    let res = col(&result, "res");
    assert!(result[1..].iter().all(|r| r[res] == "OK"), "{result:?}");
    // The editor becomes a guest. Nobody touches the notes, but a guest may not create a note
    // (which undoing a delete is); a guest may still update a note of their own.
    let path = format!("/users/{}", w.id(Editor));
    let guest = json!({"role": "guest"});
    let (s, b) = w.send(Admin, Method::PUT, &path, Some(&guest)).await;
    assert_eq!(s, 200, "{b}");
    let conflicts = undo_as(&w, Editor, &rid.unwrap()).await;
    let mut want: Vec<(String, i64)> = gone.iter().map(|id| ("notes".into(), *id)).collect();
    want.sort();
    assert_eq!(conflicts, want);
    for id in gone {
        assert!(
            w.stored("notes", id).await.is_none(),
            "note {id} left deleted"
        );
    }
    let stored = w.stored("notes", updated).await.unwrap();
    assert_eq!(stored["rank"], 1, "the update reverted");
    w.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_of_comments_leaves_those_whose_note_was_given_away() {
    let w = World::start().await;
    let (n1, n2) = (w.note(User, 1).await, w.note(User, 2).await);
    let csv = format!("op;body;note_id\nc;first;{n1}\nc;second;{n1}\nc;third;{n2}\n");
    let (rid, result) = upload_as(&w, User, "comments", &csv, true).await;
    let made = created_ids(&result);
    // The comment itself is unchanged, but through its note it is no longer the user's.
    w.give(n2, Editor).await;
    let path = format!("/comments/{}", made[2]);
    let got = w.send(User, Method::GET, &path, None).await;
    assert_reply("the user reads a comment on the editor's note", &got, 404);
    let conflicts = undo_as(&w, User, &rid.unwrap()).await;
    assert_eq!(conflicts, [("comments".to_string(), made[2])]);
    assert!(w.stored("comments", made[0]).await.is_none(), "reverted");
    assert!(w.stored("comments", made[1]).await.is_none(), "reverted");
    assert!(w.stored("comments", made[2]).await.is_some(), "left alone");
    w.app.stop().await;
}

/// A comment on `note`, made by the admin: its id.
async fn comment(w: &World, note: i64, body: &str) -> i64 {
    let c = w
        .app
        .create("comments", json!({"body": body, "note_id": note}))
        .await;
    c["id"].as_i64().unwrap()
}

#[tokio::test]
async fn comment_rules_follow_the_note_a_comment_is_on() {
    let w = World::start().await;
    let mut on = Vec::new();
    for owner in EVERYONE {
        let note = w.note(owner, 1).await;
        on.push((
            note,
            comment(&w, note, &format!("on {owner:?}'s")).await,
            owner,
        ));
    }
    for who in EVERYONE {
        let want: Vec<i64> = on
            .iter()
            .filter(|c| who == Admin || c.2 == who)
            .map(|c| c.1)
            .collect();
        let (ids, total) = w.listed(who, "/comments?sort=id").await;
        assert_eq!((&ids, total), (&want, want.len() as i64), "{who:?} lists");
    }
    let [
        (n_admin, _, _),
        (n_user, c_user, _),
        (n_editor, c_editor, _),
        (n_guest, c_guest, _),
    ] = on[..]
    else {
        unreachable!()
    };
    for (m, body) in [
        (Method::GET, None),
        (Method::PUT, Some(json!({"body": "x"}))),
        (Method::DELETE, None),
    ] {
        let path = format!("/comments/{c_editor}");
        let got = w.send(User, m.clone(), &path, body.as_ref()).await;
        assert_reply(
            &format!("the user: {m} of a comment on the editor's note"),
            &got,
            404,
        );
    }
    let edit = json!({"body": "edited"});
    let path = format!("/comments/{c_user}");
    let (s, b) = w.send(User, Method::PUT, &path, Some(&edit)).await;
    assert_eq!((s, &b["body"]), (200, &json!("edited")), "{b}");
    // Creates: `@new.note_id.owner_id = @caller.id`; no note compares as null.
    for (who, body, status) in [
        (User, json!({"body": "mine", "note_id": n_user}), 200),
        (User, json!({"body": "theirs", "note_id": n_editor}), 403),
        (User, json!({"body": "nowhere"}), 403),
        (Editor, json!({"body": "not mine", "note_id": n_user}), 403),
        (Guest, json!({"body": "mine", "note_id": n_guest}), 200),
        (Admin, json!({"body": "anywhere", "note_id": n_user}), 200),
        (Editor, json!({"body": "not mine", "note_id": n_admin}), 403),
    ] {
        let before = count(&w.app, "comments").await;
        let got = w.send(who, Method::POST, "/comments", Some(&body)).await;
        assert_reply(&format!("{who:?} comments {body}"), &got, status);
        let after = count(&w.app, "comments").await;
        assert_eq!(after - before, i64::from(status == 200), "{who:?} {body}");
    }
    let items = json!([{"body": "ok", "note_id": n_user}, {"body": "no", "note_id": n_guest}]);
    let (s, b) = w
        .send(
            User,
            Method::POST,
            "/v2.5/comments?bgrs=false",
            Some(&items),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let got: Vec<u16> = items_of(&b).iter().map(|i| i.0).collect();
    assert_eq!(got, [200, 403], "{b}");
    let (s, _) = w
        .send(Guest, Method::DELETE, &format!("/comments/{c_guest}"), None)
        .await;
    assert_eq!(s, 200, "the guest deletes a comment on their own note");
    // Giving the note away takes its comments along.
    w.give(n_user, Editor).await;
    let got = w.send(User, Method::GET, &path, None).await;
    assert_reply("the user reads a comment on a note given away", &got, 404);
    let (ids, _) = w.listed(Editor, "/comments?sort=id").await;
    assert!(ids.contains(&c_user), "the editor lists it now: {ids:?}");
    w.app.stop().await;
}

#[tokio::test]
async fn a_list_of_roles_refuses_the_whole_operation() {
    let w = World::start().await;
    let board = w.app.create("boards", json!({"name": "plan"})).await["id"]
        .as_i64()
        .unwrap();
    let name = json!({"name": "renamed"});
    for who in [User, Guest] {
        for (m, path, body) in [
            (Method::GET, "/boards".to_string(), None),
            (Method::GET, "/boards?t=csv".to_string(), None),
            (Method::GET, format!("/boards/{board}"), None),
            (Method::GET, format!("/boards/{MISSING}"), None),
            (Method::POST, "/boards".to_string(), Some(&name)),
            (Method::PUT, format!("/boards/{board}"), Some(&name)),
            (Method::DELETE, format!("/boards/{board}"), None),
        ] {
            let r = w.req(who, m.clone(), &path);
            let r = match body {
                Some(b) => r.json(b),
                None => r,
            };
            let got = json(r.send().await.unwrap()).await;
            assert_reply(&format!("{who:?}: {m} {path}"), &got, 403);
        }
        // In a batch, each item is refused as its single call is.
        let items = json!([{"name": "a"}, {"name": "b"}]);
        let (s, b) = w
            .send(who, Method::POST, "/v2.5/boards?bgrs=false", Some(&items))
            .await;
        assert_eq!(s, 200, "{b}");
        for item in items_of(&b) {
            assert_reply(&format!("{who:?}'s batch item"), &item, 403);
        }
    }
    let stored = w.stored("boards", board).await.unwrap();
    assert_eq!(
        (count(&w.app, "boards").await, &stored["name"]),
        (1, &json!("plan"))
    );
    for who in [Editor, Admin] {
        let (ids, total) = w.listed(who, "/boards?sort=id").await;
        assert_eq!(
            (ids[0], total),
            (board, count(&w.app, "boards").await),
            "{who:?}"
        );
        let (s, b) = w
            .send(who, Method::GET, &format!("/boards/{board}"), None)
            .await;
        assert_eq!((s, &b["name"]), (200, &json!("plan")), "{who:?}: {b}");
        let body = json!({"name": format!("by {who:?}")});
        let (s, b) = w.send(who, Method::POST, "/boards", Some(&body)).await;
        assert_eq!(s, 200, "{who:?} creates: {b}");
        let path = format!("/boards/{}", b["id"]);
        let (s, b) = w.send(who, Method::PUT, &path, Some(&name)).await;
        assert_eq!((s, &b["name"]), (200, &json!("renamed")), "{who:?}: {b}");
        let (s, b) = w.send(who, Method::DELETE, &path, None).await;
        assert_eq!(s, 200, "{who:?} deletes: {b}");
    }
    w.app.stop().await;
}

#[tokio::test]
async fn a_user_lists_sees_and_updates_only_their_own_record() {
    let w = World::start().await;
    let (ids, total) = w.listed(Admin, "/users?sort=id").await;
    assert_eq!(
        (ids, total),
        (w.ids.to_vec(), 4),
        "the admin lists everyone"
    );
    for who in [User, Editor, Guest] {
        let (ids, total) = w.listed(who, "/users?sort=id").await;
        assert_eq!(
            (ids, total),
            (vec![w.id(who)], 1),
            "{who:?} lists themselves"
        );
        let own = format!("/users/{}", w.id(who));
        let (s, b) = w.send(who, Method::GET, &own, None).await;
        assert_eq!((s, &b["login"]), (200, &json!(who.login())), "{b}");
        let (s, b) = w.send(who, Method::GET, "/users/me", None).await;
        assert_eq!((s, &b["id"]), (200, &json!(w.id(who))), "{b}");
        let name = json!({"first_name": format!("{who:?}")});
        let (s, b) = w.send(who, Method::PUT, &own, Some(&name)).await;
        assert_eq!((s, &b["first_name"]), (200, &name["first_name"]), "{b}");
        // The role is the admin's to set.
        let promote = json!({"role": "admin"});
        let got = w.send(who, Method::PUT, &own, Some(&promote)).await;
        assert_reply(&format!("{who:?} sets their own role"), &got, 403);
        let stored = w.stored("users", w.id(who)).await.unwrap();
        assert_eq!(stored["role"], who.role());
        // Deleting is the admin's alone: their own record is seen, so 403.
        let got = w.send(who, Method::DELETE, &own, None).await;
        assert_reply(&format!("{who:?} deletes themselves"), &got, 403);
        let body = json!({"login": format!("new-{}", who.login()), "password": "a-password-1"});
        let got = w.send(who, Method::POST, "/users", Some(&body)).await;
        assert_reply(&format!("{who:?} creates a user"), &got, 403);
        for other in EVERYONE.into_iter().filter(|o| *o != who) {
            let path = format!("/users/{}", w.id(other));
            let what = format!("{who:?} and {other:?}'s record");
            let got = w.send(who, Method::GET, &path, None).await;
            assert_reply(&what, &got, 404);
            let got = w.send(who, Method::PUT, &path, Some(&name)).await;
            assert_reply(&what, &got, 404);
            // Only admins delete users, but a record the user may not view does not exist
            // for them: 404, where their own record is a 403.
            let got = w.send(who, Method::DELETE, &path, None).await;
            assert_reply(&what, &got, 404);
        }
    }
    assert_eq!(count(&w.app, "users").await, 4, "nobody made or removed");
    w.app.stop().await;
}

/// `n` notes with random owners and ranks, made by the admin in one batch: (id, owner id,
/// rank) each.
async fn random_notes(w: &World, rng: &mut StdRng, n: usize) -> Vec<(i64, i64, i64)> {
    let planned: Vec<(i64, i64)> = (0..n)
        .map(|_| (w.ids[rng.random_range(0..4)], rng.random_range(0..100)))
        .collect();
    let items: Vec<Json> = planned
        .iter()
        .enumerate()
        .map(
            |(i, (owner, rank))| json!({"title": format!("r{i}"), "owner_id": owner, "rank": rank}),
        )
        .collect();
    let (s, b) = w
        .send(
            Admin,
            Method::POST,
            "/v2.5/notes?bgrs=false",
            Some(&json!(items)),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    items_of(&b)
        .iter()
        .zip(&planned)
        .map(|((status, o), &(owner, rank))| {
            assert_eq!(*status, 200, "{o}");
            (o["id"].as_i64().unwrap(), owner, rank)
        })
        .collect()
}

#[tokio::test]
async fn random_cursor_walks_return_exactly_the_rows_the_rule_admits() {
    let seed: u64 = std::env::var("RULES_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (RULES_SEED={seed} runs these walks again)");
    let mut rng = StdRng::seed_from_u64(seed);
    let w = World::start().await;
    let notes = random_notes(&w, &mut rng, 300).await;
    for who in [User, Editor, Guest] {
        let (me, role) = (w.id(who), who.role());
        for _ in 0..6 {
            let limit = rng.random_range(1..=50);
            let sort = [None, Some("rank"), Some("-rank")][rng.random_range(0..3)];
            let above = rng.random_bool(0.5).then(|| rng.random_range(0..100));
            let mut path = format!("/notes?limit={limit}");
            if let Some(s) = sort {
                path.push_str(&format!("&sort={s}"));
            }
            if let Some(n) = above {
                path.push_str(&format!("&rank[gt]={n}"));
            }
            let what = format!("seed {seed}, {who:?} walks {path}");
            // The rule, evaluated here: `owner_id = @caller.id || @caller.role = 'editor'`.
            let want: BTreeSet<i64> = notes
                .iter()
                .filter(|&&(_, owner, _)| owner == me || role == "editor")
                .filter(|&&(_, _, rank)| above.is_none_or(|n| rank > n))
                .map(|n| n.0)
                .collect();
            let (objects, totals) = walk(&w, who, &path).await;
            let ids = ids_of(&Json::Array(objects.clone()));
            let got: BTreeSet<i64> = ids.iter().copied().collect();
            assert_eq!(got.len(), ids.len(), "{what}: a row twice");
            assert_eq!(got, want, "{what}");
            let n = want.len() as i64;
            assert!(totals.iter().all(|t| *t == n), "{what}: {totals:?} for {n}");
            let ranks: Vec<i64> = objects
                .iter()
                .map(|o| o["rank"].as_i64().unwrap())
                .collect();
            let ordered = match sort {
                Some("rank") => ranks.is_sorted(),
                Some(_) => ranks.iter().rev().is_sorted(),
                None => true,
            };
            assert!(ordered, "{what}: ranks out of order: {ranks:?}");
        }
    }
    w.app.stop().await;
}

/// `entiserve check --entities dir`: the exit code and the standard output.
fn check(dir: &std::path::Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_entiserve"))
        .args(["check", "--entities"])
        .arg(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    (out.status.code(), text)
}

#[test]
fn check_names_a_rules_own_line_and_the_nearest_field() {
    let (code, text) = check(std::path::Path::new(FIXTURES));
    assert_eq!(code, Some(0), "the fixtures are valid: {text}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        std::path::Path::new(FIXTURES).join("users.yaml"),
        dir.path().join("users.yaml"),
    )
    .unwrap();
    let good = std::fs::read_to_string(std::path::Path::new(FIXTURES).join("notes.yaml")).unwrap();
    // A misspelt field in `list`, and a reference compared with a text in `update`.
    let broken = good
        .replacen("list:   owner_id", "list:   ownr_id", 1)
        .replacen(
            "update: owner_id = @caller.id",
            "update: owner_id = 'nobody'",
            1,
        );
    let line_of = |needle: &str| {
        let at = broken.lines().position(|l| l.contains(needle));
        at.unwrap_or_else(|| panic!("{needle} not in {broken}")) + 1
    };
    let (misspelt, mismatched) = (line_of("ownr_id"), line_of("'nobody'"));
    let file = dir.path().join("notes.yaml");
    std::fs::write(&file, &broken).unwrap();
    let (code, text) = check(dir.path());
    assert_eq!(code, Some(1), "{text}");
    let at = |line: usize| {
        let start = format!("{}:{line}: ", file.display());
        let found = text.lines().find(|l| l.starts_with(&start));
        found.unwrap_or_else(|| panic!("no error at {start}: {text}"))
    };
    let said = at(misspelt);
    assert!(said.contains("owner_id"), "the nearest name: {said}");
    at(mismatched);
}

/// `public` rules need no credentials; every other rule still does (401 without them), and
/// wrong credentials are a 401 even where the rule is public.
#[tokio::test]
async fn a_public_rule_opens_a_route_to_anyone_and_no_other() {
    let w = World::start().await;
    let post = w
        .send(
            User,
            Method::POST,
            "/posts",
            Some(&json!({"title": "hello"})),
        )
        .await;
    assert_eq!(post.0, 200, "{}", post.1);
    assert_eq!(
        post.1["author_id"],
        w.id(User),
        "the author defaults to the caller"
    );
    let id = post.1["id"].as_i64().unwrap();
    let anon = |m: Method, path: &str| w.app.client.request(m, w.app.url(path));
    let (s, b) = json(anon(Method::GET, "/posts").send().await.unwrap()).await;
    assert_eq!((s, ids_of(&b)), (200, vec![id]), "{b}");
    let (s, b) = json(
        anon(Method::GET, &format!("/posts/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, &b["title"]), (200, &json!("hello")), "{b}");
    let r = anon(Method::POST, "/posts")
        .json(&json!({"title": "anonymous"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "create is not public");
    for path in ["/notes", "/notes/1", "/users"] {
        let r = anon(Method::GET, path).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path} is not public");
    }
    let r = anon(Method::GET, "/posts")
        .basic_auth("user", Some("wrong password"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        401,
        "wrong credentials are refused on a public route too"
    );
    let doc = openapi_document(&w.app).await;
    let open = |path: &str, m: &str| {
        doc["paths"][path][m]["security"]
            .as_array()
            .is_some_and(|s| s.contains(&json!({})))
    };
    assert!(open("/posts", "get") && open("/posts/{id}", "get"));
    assert!(!open("/posts", "post") && !open("/notes", "get"));
    let text = doc["paths"]["/notes/{id}"]["put"]["description"]
        .as_str()
        .unwrap();
    assert!(
        text.contains("`update`: `owner_id = @caller.id`"),
        "the document states the rule: {text}"
    );
    let got = w
        .send(Guest, Method::POST, "/posts", Some(&json!({"title": "g"})))
        .await;
    assert_reply("a guest creates a post", &got, 403);
    let got = w
        .send(
            Editor,
            Method::PUT,
            &format!("/posts/{id}"),
            Some(&json!({"title": "x"})),
        )
        .await;
    assert_reply("an editor changes another's post", &got, 403);
    w.app.stop().await;
}

/// A file stored from a bundle belongs to the rows that link it: served to a caller whose
/// `view` rule admits such a row, a 404 (as a missing file) for anyone else.
#[tokio::test]
async fn a_stored_file_is_served_only_to_those_who_may_view_its_row() {
    let w = World::start().await;
    let bundle = zip_of(&[
        (
            "pictures.csv",
            b"op,name,url\r\nc,sunset,res/sunset.bin\r\n",
        ),
        ("res/sunset.bin", b"the bytes of a sunset"),
    ]);
    let f = form("pictures", "bundle.zip", bundle, &[]);
    let r = w.req(User, Method::POST, UPLOAD).multipart(f).send().await;
    let text = r.unwrap().text().await.unwrap();
    assert!(
        text.lines().nth(1).is_some_and(|l| l.starts_with("OK,")),
        "{text}"
    );
    let (ids, _) = w.listed(User, "/pictures").await;
    let (s, pic) = w
        .send(User, Method::GET, &format!("/pictures/{}", ids[0]), None)
        .await;
    assert_eq!(s, 200, "{pic}");
    let url = pic["url"].as_str().unwrap().to_string();
    assert!(url.starts_with("/media/files/pictures/"), "{url}");
    let (s, bytes) = fetch_as(&w, User, &url).await;
    assert_eq!((s, &bytes[..]), (200, &b"the bytes of a sunset"[..]));
    assert_eq!(
        fetch_as(&w, Admin, &url).await.0,
        200,
        "admins pass every rule"
    );
    let missing = url.replace("sunset.bin", "nothing.bin");
    let r = w.req(User, Method::GET, &missing).send().await.unwrap();
    assert_eq!(r.status(), 404);
    for who in [Editor, Guest] {
        assert_eq!(
            fetch_as(&w, who, &url).await.0,
            404,
            "{who:?} may not view the picture"
        );
    }
    // Given to the editor, the picture's file follows it.
    let body = json!({"owner_id": w.id(Editor)});
    let (s, b) = w
        .send(
            Admin,
            Method::PUT,
            &format!("/pictures/{}", ids[0]),
            Some(&body),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(fetch_as(&w, Editor, &url).await.0, 200);
    assert_eq!(fetch_as(&w, User, &url).await.0, 404);
    w.app.stop().await;
}

/// `GET url` as `who`: the status and the body.
async fn fetch_as(w: &World, who: Who, url: &str) -> (u16, Vec<u8>) {
    let r = w.req(who, Method::GET, url).send().await.unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// A save by key (`upsert=1`) updates a row its caller may update, whatever `create` says, and
/// creates one only where the `create` rule admits it (here a rule on the caller's own users
/// record, decided in SQL); a row the caller may not view is not theirs to save over.
#[tokio::test]
async fn a_save_by_key_updates_what_its_caller_may_change_and_creates_what_create_admits() {
    let w = World::start().await;
    let tag = w
        .app
        .create("tags", json!({"name": "mine", "owner_id": w.id(User)}))
        .await;
    w.app
        .create("tags", json!({"name": "theirs", "owner_id": w.id(Editor)}))
        .await;
    let save = |name: &str, note: &str| json!({"name": name, "note": note});
    let got = w
        .send(
            User,
            Method::POST,
            "/tags?upsert=1",
            Some(&save("mine", "kept")),
        )
        .await;
    assert_eq!((got.0, &got.1["id"]), (200, &tag["id"]), "{}", got.1);
    assert_eq!(got.1["note"], "kept");
    let got = w
        .send(
            User,
            Method::POST,
            "/tags?upsert=1",
            Some(&save("theirs", "x")),
        )
        .await;
    assert_reply("a save over a tag the user may not view", &got, 403);
    let got = w
        .send(
            User,
            Method::POST,
            "/tags?upsert=1",
            Some(&save("new", "x")),
        )
        .await;
    assert_reply("a create the rule on the caller's email refuses", &got, 403);
    let email = json!({"email": "user@example.org"});
    let own = format!("/users/{}", w.id(User));
    assert_eq!(w.send(User, Method::PUT, &own, Some(&email)).await.0, 200);
    let got = w
        .send(
            User,
            Method::POST,
            "/tags?upsert=1",
            Some(&save("new", "x")),
        )
        .await;
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(got.1["owner_id"], w.id(User), "{}", got.1);
    let (ids, total) = w.listed(User, "/tags").await;
    assert_eq!((ids.len(), total), (2, 2));
    w.app.stop().await;
}
