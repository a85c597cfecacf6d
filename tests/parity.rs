//! Parity of the three ways a change reaches the engine: the same payload sent as a REST call,
//! as the item of a synchronous batch and as a row of an uploaded CSV file must give the same
//! status (and, for REST and batch, the same body) and leave the same stored object.
//!
//! Every case runs once per path, on objects of its own: `~` in a string of a payload becomes
//! `~r`, `~b` or `~c`, so that unique values do not collide, and comparisons read the three
//! tags as one. The test entities (`tests/fixtures/parity`) have a field of every type the
//! entity format knows. Runs on SQLite, or on PostgreSQL when `TEST_DATABASE_URL` is set.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{Value as Json, json};

const FIXTURES: &str = "tests/fixtures/parity";
const UPLOAD: &str = "/tools/uploader.ex.php";
/// An id no object has.
const MISSING: i64 = 999_999_999;
/// A signed-in user with role `user`.
const PLAIN: (&str, &str) = ("pat", "pat-password");

#[derive(Clone, Copy, PartialEq, Debug)]
enum Op {
    Create,
    Update,
    Delete,
    /// Create or update by the entity's key: `POST ?upsert=1`, a batch item of one, a CSV
    /// `s` row without an id.
    Save,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Via {
    Rest,
    Batch,
    Csv,
}

impl Via {
    fn tag(self) -> &'static str {
        match self {
            Via::Rest => "~r",
            Via::Batch => "~b",
            Via::Csv => "~c",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Who {
    Admin,
    Plain,
}

/// What an update or delete addresses.
enum Target {
    /// Nothing: a create.
    New,
    /// A fresh object of the case's entity, created by the admin from this payload.
    Seed(Json),
    /// An id no object has.
    Missing,
    /// A fresh campaign that a fresh gadget references.
    Referenced,
}

/// How a failed CSV row's `res` compares with the REST call's error description.
#[derive(Clone, Copy, PartialEq, Debug)]
enum CsvText {
    /// The same text.
    Same,
    /// The JSON payload holds a value of another JSON type than the field's (a string for a
    /// number, a fraction for an integer, a number past 64 bits); the CSV cell is text that is
    /// converted first, and its message names the field and the cell's value instead.
    Converted,
    /// The header check refuses the whole file before any row runs (an unknown column, or
    /// a create without the column of a required field): the upload itself answers 400, and
    /// nothing changes.
    WholeFile,
}

struct Case {
    name: &'static str,
    entity: &'static str,
    op: Op,
    who: Who,
    target: Target,
    /// `~` in strings becomes the path's tag and `#` the case's number; the string
    /// `$campaign` becomes the id of an existing campaign.
    payload: Json,
    status: u16,
    /// The error code of a failure.
    code: Option<&'static str>,
    csv: CsvText,
}

fn case(
    name: &'static str,
    op: Op,
    payload: Json,
    status: u16,
    code: Option<&'static str>,
) -> Case {
    Case {
        name,
        entity: "gadgets",
        op,
        who: Who::Admin,
        target: match op {
            Op::Create => Target::New,
            _ => Target::Seed(seed()),
        },
        payload,
        status,
        code,
        csv: CsvText::Same,
    }
}

fn seed() -> Json {
    json!({"code": "u#~", "qty": 1, "size": "s", "note": "before", "campaign_id": "$campaign"})
}

impl Case {
    fn converted(mut self) -> Case {
        self.csv = CsvText::Converted;
        self
    }
    fn whole_file(mut self) -> Case {
        self.csv = CsvText::WholeFile;
        self
    }
    fn by(mut self, who: Who) -> Case {
        self.who = who;
        self
    }
    fn on(mut self, entity: &'static str, target: Target) -> Case {
        self.entity = entity;
        self.target = target;
        self
    }
}

fn cases() -> Vec<Case> {
    use Op::*;
    let bad = Some("validation_failed");
    let all_types = json!({
        "code": "full~", "note": "every type", "qty": 7, "price": 12.5, "active": false,
        "made_on": "2024-02-29", "seen_at": "2024-02-03T04:05:06", "size": "m",
        "campaign_id": "$campaign",
    });
    vec![
        // Saves by key (gadgets are keyed by `code`): a new key creates, a taken one updates
        // that object.
        case(
            "save: a new key creates",
            Save,
            json!({"code": "sv#~", "qty": 3, "size": "l"}),
            200,
            None,
        )
        .on("gadgets", Target::New),
        case(
            "save: the key of an object updates it",
            Save,
            json!({"code": "u#~", "note": "after", "qty": 2}),
            200,
            None,
        ),
        case(
            "save: without the key",
            Save,
            json!({"note": "no code"}),
            400,
            bad,
        )
        .on("gadgets", Target::New),
        case(
            "save: a value of the wrong type",
            Save,
            json!({"code": "u#~", "qty": "abc"}),
            400,
            bad,
        )
        .converted(),
        case(
            "save: an admin-only field by a user",
            Save,
            json!({"code": "u#~", "grade": 1}),
            403,
            Some("forbidden"),
        )
        .by(Who::Plain),
        // Creates.
        case("create: every field type", Create, all_types, 200, None),
        case(
            "create: defaults only",
            Create,
            json!({"code": "min~"}),
            200,
            None,
        ),
        case(
            "create: valid reference",
            Create,
            json!({"code": "ref~", "campaign_id": "$campaign"}),
            200,
            None,
        ),
        case(
            "create: required field missing",
            Create,
            json!({"note": "no code"}),
            400,
            bad,
        )
        .whole_file(),
        case(
            "create: integer given a word",
            Create,
            json!({"code": "t1~", "qty": "abc"}),
            400,
            bad,
        )
        .converted(),
        case(
            "create: integer given a fraction",
            Create,
            json!({"code": "t2~", "qty": 1.5}),
            400,
            bad,
        )
        .converted(),
        case(
            "create: decimal given a word",
            Create,
            json!({"code": "t3~", "price": "cheap"}),
            400,
            bad,
        )
        .converted(),
        case(
            "create: boolean given a word",
            Create,
            json!({"code": "t4~", "active": "maybe"}),
            400,
            bad,
        )
        .converted(),
        case(
            "create: reference given a word",
            Create,
            json!({"code": "t5~", "campaign_id": "first"}),
            400,
            bad,
        )
        .converted(),
        case(
            "create: date that does not exist",
            Create,
            json!({"code": "d1~", "made_on": "2024-02-30"}),
            400,
            bad,
        ),
        case(
            "create: datetime that is not one",
            Create,
            json!({"code": "d2~", "seen_at": "yesterday"}),
            400,
            bad,
        ),
        case(
            "create: datetime on a day that does not exist",
            Create,
            json!({"code": "d3~", "seen_at": "2024-02-30 10:00:00"}),
            400,
            bad,
        ),
        case(
            "create: string too long",
            Create,
            json!({"code": "abcdefghijklmn~"}),
            400,
            bad,
        ),
        case(
            "create: text too long",
            Create,
            json!({"code": "l2~", "note": "x".repeat(41)}),
            400,
            bad,
        ),
        case(
            "create: integer past 64 bits",
            Create,
            json!({"code": "r1~", "qty": 9_223_372_036_854_775_808u64}),
            400,
            bad,
        )
        .converted(),
        case(
            "create: reference id out of range",
            Create,
            json!({"code": "r2~", "campaign_id": 0}),
            400,
            bad,
        ),
        case(
            "create: enum value not allowed",
            Create,
            json!({"code": "e1~", "size": "xl"}),
            400,
            bad,
        ),
        case(
            "create: unknown field",
            Create,
            json!({"code": "u1~", "colour": "red"}),
            400,
            Some("unknown_field"),
        )
        .whole_file(),
        case(
            "create: reference to a missing row",
            Create,
            json!({"code": "m1~", "campaign_id": MISSING}),
            400,
            Some("invalid_reference"),
        ),
        case(
            "create: unique value taken",
            Create,
            json!({"code": "taken", "qty": 3}),
            409,
            Some("conflict"),
        ),
        // Updates.
        case(
            "update: every field type",
            Update,
            json!({
                "note": "after", "qty": 9, "price": 0.25, "active": false,
                "made_on": "2023-01-31", "seen_at": "2023-01-31 10:11:12", "size": "l",
                "campaign_id": "$campaign",
            }),
            200,
            None,
        ),
        case(
            "update: enum value not allowed",
            Update,
            json!({"size": "xl"}),
            400,
            bad,
        ),
        case(
            "update: date that does not exist",
            Update,
            json!({"made_on": "2023-02-29"}),
            400,
            bad,
        ),
        case(
            "update: integer given a word",
            Update,
            json!({"qty": "abc"}),
            400,
            bad,
        )
        .converted(),
        case(
            "update: text too long",
            Update,
            json!({"note": "y".repeat(41)}),
            400,
            bad,
        ),
        case(
            "update: reference to a missing row",
            Update,
            json!({"campaign_id": MISSING}),
            400,
            Some("invalid_reference"),
        ),
        case(
            "update: unique value taken",
            Update,
            json!({"code": "taken"}),
            409,
            Some("conflict"),
        ),
        case(
            "update: unknown field",
            Update,
            json!({"colour": "red"}),
            400,
            Some("unknown_field"),
        )
        .whole_file(),
        case(
            "update: missing id",
            Update,
            json!({"qty": 2}),
            404,
            Some("not_found"),
        )
        .on("gadgets", Target::Missing),
        // Deletes.
        case("delete: existing object", Delete, json!({}), 200, None),
        case(
            "delete: missing id",
            Delete,
            json!({}),
            404,
            Some("not_found"),
        )
        .on("gadgets", Target::Missing),
        case(
            "delete: object still referenced",
            Delete,
            json!({}),
            409,
            Some("referenced"),
        )
        .on("campaigns", Target::Referenced),
        // Access.
        case(
            "access: plain user creates where only admins write",
            Create,
            json!({"label": "v~"}),
            403,
            Some("forbidden"),
        )
        .on("vaults", Target::New)
        .by(Who::Plain),
        case(
            "access: plain user updates where only admins write",
            Update,
            json!({"label": "w~"}),
            403,
            Some("forbidden"),
        )
        .on("vaults", Target::Seed(json!({"label": "v~"})))
        .by(Who::Plain),
        case(
            "access: plain user deletes where only admins write",
            Delete,
            json!({}),
            403,
            Some("forbidden"),
        )
        .on("vaults", Target::Seed(json!({"label": "v~"})))
        .by(Who::Plain),
        case(
            "access: plain user sets an admin-only field",
            Create,
            json!({"code": "g1~", "grade": 5}),
            403,
            Some("forbidden"),
        )
        .by(Who::Plain),
        case(
            "access: plain user creates where users write",
            Create,
            json!({"code": "p1~", "qty": 4}),
            200,
            None,
        )
        .by(Who::Plain),
    ]
}

/// Objects shared by the cases, and the number of the case that runs.
struct Ctx {
    campaign: i64,
    case: usize,
}

/// The payload of a case for one path.
fn fill(v: &Json, tag: &str, ctx: &Ctx) -> Json {
    match v {
        Json::String(s) if s == "$campaign" => json!(ctx.campaign),
        Json::String(s) => Json::String(s.replace('~', tag).replace('#', &ctx.case.to_string())),
        Json::Object(m) => Json::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), fill(v, tag, ctx)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `v` with the paths' tags made one, and without the columns that differ by nature
/// (`id`, `created_dt`, `updated_dt`).
fn norm(v: &Json) -> Json {
    let text = v
        .to_string()
        .replace("~r", "~")
        .replace("~b", "~")
        .replace("~c", "~");
    let mut v: Json = serde_json::from_str(&text).unwrap();
    if let Json::Object(m) = &mut v {
        for k in ["id", "created_dt", "updated_dt"] {
            m.remove(k);
        }
    }
    v
}

fn norm_text(s: &str) -> String {
    s.replace("~r", "~").replace("~b", "~").replace("~c", "~")
}

/// A JSON value as a CSV cell: booleans `1`/`0`, null empty.
fn cell(v: &Json) -> String {
    match v {
        Json::Null => String::new(),
        Json::Bool(b) => (if *b { "1" } else { "0" }).to_string(),
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What one path did.
#[derive(Debug)]
struct Seen {
    status: u16,
    /// The reply (REST), the item's body (batch); for CSV the row's `res` as a string, or
    /// the upload's error when the whole file was refused.
    body: Json,
    /// Objects of the entity before and after.
    count: (i64, i64),
    /// The addressed object before and after (`GET` status and body).
    before: Option<(u16, Json)>,
    after: Option<(u16, Json)>,
}

fn creds(who: Who) -> (&'static str, &'static str) {
    match who {
        Who::Admin => ("admin", ADMIN_PASSWORD),
        Who::Plain => PLAIN,
    }
}

async fn get(app: &TestApp, entity: &str, id: i64) -> (u16, Json) {
    json(
        app.admin(Method::GET, &format!("/{entity}/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// The object a case addresses, made for path `via`.
async fn target(app: &TestApp, c: &Case, via: Via, ctx: &Ctx) -> Option<i64> {
    let tag = via.tag();
    match &c.target {
        Target::New => None,
        Target::Missing => Some(MISSING),
        Target::Seed(p) => Some(app.create(c.entity, fill(p, tag, ctx)).await["id"].as_i64()?),
        Target::Referenced => {
            let camp = app
                .create(
                    "campaigns",
                    json!({"name": format!("kept{}{tag}", ctx.case)}),
                )
                .await;
            let id = camp["id"].as_i64()?;
            app.create(
                "gadgets",
                json!({"code": format!("pin{}{tag}", ctx.case), "campaign_id": id}),
            )
            .await;
            Some(id)
        }
    }
}

async fn rest(app: &TestApp, c: &Case, who: Who, id: Option<i64>, payload: &Json) -> (u16, Json) {
    let (login, password) = creds(who);
    let rb = match (c.op, id) {
        (Op::Create, _) => app
            .as_user(login, password, Method::POST, &format!("/{}", c.entity))
            .json(payload),
        (Op::Update, Some(id)) => app
            .as_user(login, password, Method::PUT, &format!("/{}/{id}", c.entity))
            .json(payload),
        (Op::Delete, Some(id)) => app.as_user(
            login,
            password,
            Method::DELETE,
            &format!("/{}/{id}", c.entity),
        ),
        // The object is named by the payload's key, never by id.
        (Op::Save, _) => app
            .as_user(
                login,
                password,
                Method::POST,
                &format!("/{}?upsert=1", c.entity),
            )
            .json(payload),
        _ => unreachable!("updates and deletes have a target"),
    };
    json(rb.send().await.unwrap()).await
}

async fn batch(app: &TestApp, c: &Case, who: Who, id: Option<i64>, payload: &Json) -> (u16, Json) {
    let (login, password) = creds(who);
    let (method, item) = match c.op {
        Op::Create => (Method::POST, payload.clone()),
        Op::Update => {
            let mut item = payload.clone();
            item["id"] = json!(id.unwrap());
            (Method::PUT, item)
        }
        Op::Delete => (Method::DELETE, json!(id.unwrap())),
        Op::Save => (Method::POST, payload.clone()),
    };
    let mut path = format!("/v2.5/{}?bgrs=false", c.entity);
    if c.op == Op::Save {
        path.push_str("&upsert=1");
    }
    let (s, items) = json(
        app.as_user(login, password, method, &path)
            .json(&json!([item]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{}: batch: {items}", c.name);
    let items = items.as_array().unwrap();
    assert_eq!(items.len(), 1, "{}: {items:?}", c.name);
    let status = items[0]["status"].as_u64().expect("integer status") as u16;
    let body = serde_json::from_str(items[0]["body"].as_str().expect("string body")).unwrap();
    (status, body)
}

/// One row of an upload's result: the status of its progress line, its `res` and its `id`.
type RowResult = (u16, String, Option<i64>);

/// Uploads `rows` under `header` with `show_progress=1&get_content=1`: each row's status comes
/// from its progress line, `res` and the id from the result file. `Err` holds the status and
/// error of an upload refused as a whole.
async fn upload_as(
    app: &TestApp,
    who: Who,
    entity: &str,
    header: &[String],
    rows: &[Vec<String>],
) -> Result<Vec<RowResult>, (u16, Json)> {
    let (login, password) = creds(who);
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header).unwrap();
    for row in rows {
        w.write_record(row).unwrap();
    }
    let bytes = w.into_inner().unwrap();
    let fields = [("show_progress", "1"), ("get_content", "1")];
    let form = upload::form(entity, "parity.csv", bytes, &fields);
    let r = app
        .as_user(login, password, Method::POST, UPLOAD)
        .multipart(form)
        .send()
        .await
        .unwrap();
    if r.status() != 200 {
        return Err(json(r).await);
    }
    let text = r.text().await.unwrap();
    let mut rest = text.as_str();
    let mut lines = Vec::new();
    while rest.starts_with("Line: ") {
        let (line, more) = rest.split_once('\n').expect("a whole line");
        lines.push(line);
        rest = more;
    }
    let mut rd = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(rest.as_bytes());
    let head = rd.headers().unwrap().clone();
    let recs: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    assert_eq!(lines.len(), rows.len(), "a progress line per row: {text}");
    assert_eq!(recs.len(), rows.len(), "a result row per row: {text}");
    let at = |name: &str| head.iter().position(|h| h == name).unwrap();
    let mut out = Vec::new();
    for (n, (line, rec)) in lines.iter().zip(&recs).enumerate() {
        let progress = line
            .strip_prefix(&format!("Line: {} done. Result: ", n + 1))
            .unwrap_or_else(|| panic!("line {}: {text}", n + 1));
        let (status, line_text) = progress.split_once(". ").expect("status. text");
        let res = rec[at("res")].to_string();
        assert_eq!(
            res, line_text,
            "the progress line and the result file agree"
        );
        out.push((status.parse().unwrap(), res, rec[at("id")].parse().ok()));
    }
    Ok(out)
}

/// The one-row CSV of a case: status, the row's `res` (or the refusal of the whole file),
/// and the id of the result row.
async fn csv(
    app: &TestApp,
    c: &Case,
    who: Who,
    id: Option<i64>,
    payload: &Json,
) -> (u16, Json, Option<i64>) {
    let mut header = vec!["op".to_string(), "id".to_string()];
    let op = match c.op {
        Op::Create => "c",
        Op::Update => "u",
        Op::Delete => "d",
        Op::Save => "s",
    };
    // A save names its object by the payload's key.
    let id = id.filter(|_| c.op != Op::Save);
    let mut row = vec![
        op.to_string(),
        id.map(|i| i.to_string()).unwrap_or_default(),
    ];
    if c.op != Op::Delete {
        for (k, v) in payload.as_object().unwrap() {
            header.push(k.clone());
            row.push(cell(v));
        }
    }
    match upload_as(app, who, c.entity, &header, &[row]).await {
        Err((s, b)) => (s, b, None),
        Ok(rows) => {
            let (s, res, new_id) = rows.into_iter().next().unwrap();
            (s, Json::String(res), new_id)
        }
    }
}

async fn run_one(app: &TestApp, c: &Case, via: Via, ctx: &Ctx) -> Seen {
    let payload = fill(&c.payload, via.tag(), ctx);
    let id = target(app, c, via, ctx).await;
    let before_count = count(app, c.entity).await;
    let before = match id {
        Some(i) => Some(get(app, c.entity, i).await),
        None => None,
    };
    let (status, body, id) = match via {
        Via::Rest => {
            let (s, b) = rest(app, c, c.who, id, &payload).await;
            let id = id.or_else(|| (s == 200).then(|| b["id"].as_i64()).flatten());
            (s, b, id)
        }
        Via::Batch => {
            let (s, b) = batch(app, c, c.who, id, &payload).await;
            let id = id.or_else(|| (s == 200).then(|| b["id"].as_i64()).flatten());
            (s, b, id)
        }
        Via::Csv => {
            let (s, b, row_id) = csv(app, c, c.who, id, &payload).await;
            (s, b, id.or(row_id))
        }
    };
    let after = match id {
        Some(i) => Some(get(app, c.entity, i).await),
        None => None,
    };
    Seen {
        status,
        body,
        count: (before_count, count(app, c.entity).await),
        before,
        after,
    }
}

/// Every difference between the three paths of one case, and from what the case expects.
fn compare(c: &Case, rest: &Seen, batch: &Seen, csv: &Seen) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            out.push(format!("{}: {what}", c.name));
        }
    };
    for (via, s) in [("REST", rest), ("batch", batch), ("CSV", csv)] {
        check(
            s.status == c.status,
            format!(
                "{via} status {} (expected {}): {}",
                s.status, c.status, s.body
            ),
        );
        // What the outcome did to the stored objects.
        let delta = match (c.op, s.status) {
            (Op::Create, 200) => 1,
            (Op::Save, 200) if matches!(c.target, Target::New) => 1,
            (Op::Delete, 200) => -1,
            _ => 0,
        };
        check(
            s.count.1 - s.count.0 == delta,
            format!(
                "{via} changed the count from {} to {}",
                s.count.0, s.count.1
            ),
        );
        if s.status != 200 {
            check(
                s.before == s.after,
                format!(
                    "{via} failed but changed the object: {:?} -> {:?}",
                    s.before, s.after
                ),
            );
        }
        match (c.op, s.status, &s.after) {
            (Op::Create | Op::Update | Op::Save, 200, Some((200, _)))
            | (Op::Delete, 200, Some((404, _))) => {}
            (_, 200, after) => check(false, format!("{via}: read back {after:?}")),
            _ => {}
        }
    }
    // REST and batch: the same body (an error body in the contract's shape).
    check(
        norm(&rest.body) == norm(&batch.body),
        format!("REST body {} vs batch body {}", rest.body, batch.body),
    );
    if let Some(code) = c.code {
        for (via, s) in [("REST", rest), ("batch", batch)] {
            check(
                s.body["error"] == code,
                format!("{via} error code (expected {code}): {}", s.body),
            );
            if s.body.is_object() && s.body.get("error").is_some() {
                let _ = error_code(&s.body);
            }
        }
    }
    // A successful call replies with the object as stored.
    if rest.status == 200 {
        let stored = rest.after.as_ref().map(|a| &a.1);
        if c.op != Op::Delete {
            check(
                stored.map(norm) == Some(norm(&rest.body)),
                format!("REST reply {} vs stored {stored:?}", rest.body),
            );
        } else {
            check(
                rest.before.as_ref().map(|b| norm(&b.1)) == Some(norm(&rest.body)),
                format!(
                    "REST delete reply {} vs the object {:?}",
                    rest.body, rest.before
                ),
            );
        }
    }
    // The CSV row.
    let res = csv.body.as_str();
    match (c.csv, csv.status) {
        (CsvText::WholeFile, _) => {
            check(res.is_none(), format!("CSV: a row ran: {}", csv.body));
            if res.is_none() {
                let code = error_code(&csv.body);
                check(
                    code == "bad_request",
                    format!("CSV: the refusal's code {code}: {}", csv.body),
                );
            }
        }
        (_, 200) => check(res == Some("OK"), format!("CSV res {}", csv.body)),
        (CsvText::Same, _) => {
            let desc = rest.body["description"].as_str().unwrap_or("");
            check(
                res.map(norm_text) == Some(norm_text(desc)),
                format!("CSV res {} vs REST description {desc:?}", csv.body),
            );
        }
        (CsvText::Converted, _) => {
            let field = c
                .payload
                .as_object()
                .unwrap()
                .keys()
                .find(|k| rest.body["fields"].get(k.as_str()).is_some())
                .cloned()
                .unwrap_or_default();
            check(
                !field.is_empty() && res.is_some_and(|r| r.contains(&format!("`{field}`"))),
                format!(
                    "CSV res {} does not name the field of REST's {}",
                    csv.body, rest.body
                ),
            );
        }
    }
    // The stored objects (or their absence) are alike.
    // An object that is not there is its status and error code (the description names
    // the path's own id).
    let object = |o: &Option<(u16, Json)>| {
        o.as_ref().map(|(st, b)| match st {
            200 => (*st, norm(b)),
            _ => (*st, b["error"].clone()),
        })
    };
    let stored = |s: &Seen| object(&s.after);
    let before = |s: &Seen| object(&s.before);
    check(
        stored(rest) == stored(batch) && stored(batch) == stored(csv),
        format!(
            "stored objects differ:\n  REST  {:?}\n  batch {:?}\n  CSV   {:?}",
            stored(rest),
            stored(batch),
            stored(csv)
        ),
    );
    check(
        before(rest) == before(batch) && before(batch) == before(csv),
        "the targets were not made alike".to_string(),
    );
    out
}

fn backend() -> &'static str {
    match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => "PostgreSQL",
        _ => "SQLite",
    }
}

/// A server with the test entities, the plain user, a campaign to reference and a gadget
/// whose code is `taken`.
async fn setup() -> (TestApp, Ctx) {
    eprintln!("parity on {}", backend());
    let app = spawn_with(|s| {
        for f in ["gadgets.yaml", "vaults.yaml"] {
            std::fs::copy(
                std::path::Path::new(FIXTURES).join(f),
                s.entities_dir.join(f),
            )
            .unwrap();
        }
    })
    .await;
    app.create_user(PLAIN.0, PLAIN.1).await;
    let campaign = app.create("campaigns", json!({"name": "parity"})).await;
    let ctx = Ctx {
        campaign: campaign["id"].as_i64().unwrap(),
        case: 0,
    };
    app.create("gadgets", json!({"code": "taken"})).await;
    (app, ctx)
}

#[tokio::test]
async fn rest_batch_and_csv_give_the_same_statuses_and_objects() {
    let started = std::time::Instant::now();
    let backend = backend();
    let (app, mut ctx) = setup().await;

    let cases = cases();
    let mut problems = Vec::new();
    for (n, c) in cases.iter().enumerate() {
        ctx.case = n;
        let r = run_one(&app, c, Via::Rest, &ctx).await;
        let b = run_one(&app, c, Via::Batch, &ctx).await;
        let v = run_one(&app, c, Via::Csv, &ctx).await;
        problems.extend(compare(c, &r, &b, &v));
    }
    app.stop().await;
    assert!(
        problems.is_empty(),
        "{} differences in {} cases on {backend}:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n")
    );
    eprintln!(
        "{} cases alike on REST, batch and CSV ({backend}, {:?})",
        cases.len(),
        started.elapsed()
    );
}

/// The creates of the cases together: one REST call each, one batch of them all and one CSV
/// file of them all (a whole batch or file runs in one transaction, and consecutive creates
/// of the same shape share one INSERT), with a group of same-shape creates of which the middle
/// one fails, and a unique value repeated within the batch.
#[tokio::test]
async fn many_at_once_give_the_same_statuses_and_objects() {
    let (app, mut ctx) = setup().await;
    ctx.case = 100;
    let mut items: Vec<(String, Json, u16)> = cases()
        .into_iter()
        .filter(|c| {
            c.op == Op::Create
                && c.who == Who::Admin
                && c.entity == "gadgets"
                && c.csv != CsvText::WholeFile
        })
        .map(|c| (c.name.to_string(), c.payload, c.status))
        .collect();
    for (n, campaign, status) in [
        (1, json!("$campaign"), 200),
        (2, json!(MISSING), 400),
        (3, json!("$campaign"), 200),
        (4, json!("$campaign"), 200),
    ] {
        let payload = json!({"code": format!("grp{n}~"), "campaign_id": campaign});
        items.push((format!("group row {n}"), payload, status));
    }
    items.push(("first of a pair".into(), json!({"code": "twin~"}), 200));
    items.push(("second of a pair".into(), json!({"code": "twin~"}), 409));

    // Per path: (status, body or res, id of the created object) for each item.
    let mut seen: Vec<Vec<(u16, Json, Option<i64>)>> = Vec::new();
    for via in [Via::Rest, Via::Batch, Via::Csv] {
        let payloads: Vec<Json> = items
            .iter()
            .map(|(_, p, _)| fill(p, via.tag(), &ctx))
            .collect();
        let before = count(&app, "gadgets").await;
        let out: Vec<(u16, Json, Option<i64>)> = match via {
            Via::Rest => {
                let mut out = Vec::new();
                for p in &payloads {
                    let (s, b) = json(
                        app.admin(Method::POST, "/gadgets")
                            .json(p)
                            .send()
                            .await
                            .unwrap(),
                    )
                    .await;
                    let id = b["id"].as_i64();
                    out.push((s, b, id));
                }
                out
            }
            Via::Batch => {
                let (s, b) = json(
                    app.admin(Method::POST, "/v2.5/gadgets?bgrs=false")
                        .json(&payloads)
                        .send()
                        .await
                        .unwrap(),
                )
                .await;
                assert_eq!(s, 200, "{b}");
                b.as_array()
                    .unwrap()
                    .iter()
                    .map(|i| {
                        let body: Json = serde_json::from_str(i["body"].as_str().unwrap()).unwrap();
                        let id = body["id"].as_i64();
                        (i["status"].as_u64().unwrap() as u16, body, id)
                    })
                    .collect()
            }
            Via::Csv => {
                let mut header = vec!["op".to_string(), "id".to_string()];
                for p in &payloads {
                    for k in p.as_object().unwrap().keys() {
                        if !header.contains(k) {
                            header.push(k.clone());
                        }
                    }
                }
                let rows: Vec<Vec<String>> = payloads
                    .iter()
                    .map(|p| {
                        let mut row = vec!["c".to_string(), String::new()];
                        row.extend(
                            header[2..]
                                .iter()
                                .map(|k| p.get(k).map(cell).unwrap_or_default()),
                        );
                        row
                    })
                    .collect();
                upload_as(&app, Who::Admin, "gadgets", &header, &rows)
                    .await
                    .expect("the file is accepted")
                    .into_iter()
                    .map(|(s, res, id)| (s, Json::String(res), id))
                    .collect()
            }
        };
        assert_eq!(out.len(), items.len(), "{via:?}");
        let created = out.iter().filter(|o| o.0 == 200).count() as i64;
        assert_eq!(
            count(&app, "gadgets").await - before,
            created,
            "{via:?}: one object per successful create"
        );
        seen.push(out);
    }

    let mut problems = Vec::new();
    for (i, (name, _, status)) in items.iter().enumerate() {
        let (r, b, c) = (&seen[0][i], &seen[1][i], &seen[2][i]);
        for (via, o) in [("REST", r), ("batch", b), ("CSV", c)] {
            if o.0 != *status {
                problems.push(format!(
                    "{name}: {via} status {} (expected {status}): {}",
                    o.0, o.1
                ));
            }
        }
        if norm(&r.1) != norm(&b.1) {
            problems.push(format!("{name}: REST body {} vs batch body {}", r.1, b.1));
        }
        let res = c.1.as_str().unwrap();
        let expected = match r.0 {
            200 => "OK",
            _ => r.1["description"].as_str().unwrap_or(""),
        };
        let converted = cases()
            .iter()
            .any(|k| k.name == name && k.csv == CsvText::Converted);
        if !converted && norm_text(res) != norm_text(expected) {
            problems.push(format!("{name}: CSV res {res:?} vs REST {expected:?}"));
        }
        let mut stored = Vec::new();
        for o in [r, b, c] {
            stored.push(match o.2 {
                Some(id) if o.0 == 200 => {
                    let (s, obj) = get(&app, "gadgets", id).await;
                    (s, norm(&obj))
                }
                _ => (o.0, Json::Null),
            });
        }
        if stored[0] != stored[1] || stored[1] != stored[2] {
            problems.push(format!("{name}: stored objects differ: {stored:?}"));
        }
    }
    app.stop().await;
    assert!(
        problems.is_empty(),
        "{} differences in {} items on {}:\n{}",
        problems.len(),
        items.len(),
        backend(),
        problems.join("\n")
    );
}
