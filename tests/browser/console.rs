//! The console at 1366x768: `/` to the data page; create (every field type, the reference
//! picked from the keyboard), a create the server refuses with the error beside its field, edit,
//! delete, several rows deleted as one background request and that request undone; an upload
//! with failed rows, shown on the upload page and on the requests page, which fits the width
//! with a log open and names each request by what it did; the undo dialog; a request sent from
//! `/docs`; and the buttons a role that may not write does not get. Screenshots of each page go
//! to the book (`docs/src/images/console-*.png`).

use super::{Browser, csv_rows, start_upload};
use crate::common::*;
use reqwest::Method;
use serde_json::json;
use std::path::Path;

/// An entity with a field of every type, and one that only admins write.
pub const PRODUCTS: &str = "name: products
access: { read: user, write: user }
fields:
  name:       { type: string, required: true, max_length: 40 }
  notes:      { type: text }
  stock:      { type: integer, default: 0 }
  price:      { type: decimal }
  available:  { type: boolean, default: true }
  launch:     { type: date }
  checked_at: { type: datetime }
  size:       { type: enum, values: [small, medium, large] }
  campaign_id: { type: reference, entity: campaigns }
";
pub const REGIONS: &str = "name: regions
access: { read: user, write: admin }
fields:
  name: { type: string, required: true, max_length: 64 }
";

const DOWN: &str = "\u{E015}";
const ENTER: &str = "\u{E007}";

/// The width and height of a PNG, from its header.
fn png_size(png: &[u8]) -> (u32, u32) {
    let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
    (w, h)
}

/// A screenshot into the book, checked to be 1366x768.
async fn book_shot(b: &Browser, name: &str) {
    let mut book = b.clone();
    book.shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/images");
    book.screenshot(name).await;
    let png = std::fs::read(book.shots.join(format!("{name}.png"))).unwrap();
    assert_eq!(png_size(&png), (1366, 768), "{name} is 1366x768");
}

/// Every visible form control of the page has a label, and every table headers.
async fn assert_labelled(b: &Browser, what: &str) {
    let unlabelled = b
        .js(
            "const seen = (e) => e.getClientRects().length > 0;
             const bad = [...document.querySelectorAll('input, select, textarea')]
               .filter((e) => e.type !== 'hidden' && seen(e))
               .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')
                              && !e.getAttribute('aria-labelledby'))
               .map((e) => e.id || e.outerHTML.slice(0, 80));
             const tables = [...document.querySelectorAll('table')].filter(seen)
               .filter((t) => !t.querySelector('thead th'))
               .map((t) => t.id || 'a table');
             return bad.concat(tables);",
            json!([]),
        )
        .await;
    assert_eq!(unlabelled, json!([]), "{what}: controls without a label");
}

async fn fits_the_width(b: &Browser, what: &str) {
    let w = b
        .js(
            "const d = document.documentElement;
             const wraps = [...document.querySelectorAll('.table-wrap')]
               .filter((t) => t.scrollWidth > t.clientWidth + 1)
               .map((t) => `${t.querySelector('table').id || t.querySelector('caption')?.textContent}: ${t.scrollWidth} > ${t.clientWidth}`);
             return {page: d.scrollWidth, view: window.innerWidth, wraps};",
            json!([]),
        )
        .await;
    assert!(
        w["page"].as_i64() <= w["view"].as_i64() && w["wraps"] == json!([]),
        "{what} scrolls sideways: {w}"
    );
}

/// Sets a date or datetime input (typed dates depend on the browser's locale).
async fn set_value(b: &Browser, css: &str, value: &str) {
    b.js(
        "const e = document.querySelector(arguments[0]); e.value = arguments[1];
         e.dispatchEvent(new Event('input', {bubbles: true})); return e.value;",
        json!([css, value]),
    )
    .await;
}

async fn wait_notice(b: &Browser, contains: &str) -> String {
    let v = b
        .wait_js(
            &format!("a notice with `{contains}`"),
            60,
            "const n = document.getElementById('notice');
             return !n.hidden && n.textContent.includes(arguments[0]) ? n.textContent : null;",
            json!([contains]),
        )
        .await;
    v.as_str().unwrap().to_string()
}

/// The whole console scenario on `app` (with [`PRODUCTS`] and [`REGIONS`]).
pub async fn scenario(app: &TestApp, b: &Browser) {
    let spring = app
        .create("campaigns", json!({"name": "spring catalogue"}))
        .await;
    let cid = spring["id"].as_i64().unwrap();
    app.create("campaigns", json!({"name": "autumn catalogue"}))
        .await;
    app.create("regions", json!({"name": "north"})).await;

    // `/` sends a browser to the console.
    b.goto(&app.url("/")).await;
    b.wait_visible("#login", 20).await;
    let path = b.js("return location.pathname;", json!([])).await;
    assert_eq!(path, "/tools/data");
    b.type_into("#login", "admin").await;
    b.type_into("#password", ADMIN_PASSWORD).await;
    b.click("#signin").await;
    b.wait_visible("#whoami", 20).await;

    let id = create(app, b, cid).await;
    refused(app, b).await;
    edit(app, b, id).await;
    delete_one(app, b, id).await;
    delete_many(app, b).await;
    let rid = upload_with_failures(b).await;
    requests_page(b, &rid).await;
    docs(b).await;
    roles(app, b).await;
}

/// A new product from the form: every field type, the campaign picked with the keyboard.
async fn create(app: &TestApp, b: &Browser, cid: i64) -> i64 {
    b.click("#entity option[value=\"products\"]").await;
    b.wait_visible("[data-action=\"create\"]", 20).await;
    b.click("[data-action=\"create\"]").await;
    b.wait_visible("#editor [data-field=\"name\"]", 10).await;
    assert_labelled(b, "the create form").await;
    let max = b
        .js(
            "return document.querySelector('[data-field=name]').maxLength;",
            json!([]),
        )
        .await;
    assert_eq!(max, 40, "max_length becomes the input's limit");
    let kinds = b
        .js(
            "return Object.fromEntries([...document.querySelectorAll('#editor [data-field]')]
               .map((e) => [e.dataset.field, e.tagName.toLowerCase() + ':' + (e.type || '')]));",
            json!([]),
        )
        .await;
    assert_eq!(kinds["notes"], "textarea:textarea", "{kinds}");
    assert_eq!(kinds["available"], "input:checkbox", "{kinds}");
    assert_eq!(kinds["launch"], "input:date", "{kinds}");
    assert_eq!(kinds["checked_at"], "input:datetime-local", "{kinds}");
    assert_eq!(kinds["size"], "select:select-one", "{kinds}");
    assert_eq!(kinds["campaign_id"], "input:text", "{kinds}");
    b.type_into("[data-field=\"name\"]", "Blue mug").await;
    b.type_into("[data-field=\"notes\"]", "Stoneware, 350 ml.")
        .await;
    b.clear("[data-field=\"stock\"]").await;
    b.type_into("[data-field=\"stock\"]", "12").await;
    b.type_into("[data-field=\"price\"]", "12.50").await;
    b.click("[data-field=\"available\"]").await;
    set_value(b, "[data-field=\"launch\"]", "2026-03-01").await;
    set_value(b, "[data-field=\"checked_at\"]", "2026-03-01T10:30:05").await;
    b.click("[data-field=\"size\"] option[value=\"medium\"]")
        .await;
    b.type_into("[data-field=\"campaign_id\"]", "spring").await;
    b.wait_js(
        "the picker's options for `spring`",
        20,
        "const o = [...document.querySelectorAll('[role=listbox] [role=option]')].map(o => o.textContent);
         return o.length === 1 && o[0].startsWith('spring catalogue');",
        json!([]),
    )
    .await;
    b.type_into("[data-field=\"campaign_id\"]", DOWN).await;
    b.type_into("[data-field=\"campaign_id\"]", ENTER).await;
    let picked = b
        .js(
            "return document.querySelector('[data-field=campaign_id]').dataset.value || null;",
            json!([]),
        )
        .await;
    assert_eq!(picked, json!(cid.to_string()));
    b.js(
        "document.getElementById('editor-fields').scrollTop = 0; return true;",
        json!([]),
    )
    .await;
    book_shot(b, "console-data-create").await;
    b.click("[data-action=\"save\"]").await;
    let text = wait_notice(b, "Created products").await;
    let id: i64 = text
        .trim_end_matches('.')
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let (s, o) = json(
        app.admin(Method::GET, &format!("/products/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(o["name"], "Blue mug");
    assert_eq!(o["stock"], 12);
    assert_eq!(
        o["price"].to_string(),
        "12.5",
        "the decimal is kept exact: {o}"
    );
    assert_eq!(o["available"], false);
    assert_eq!(o["launch"], "2026-03-01");
    assert_eq!(o["checked_at"], "2026-03-01 10:30:05");
    assert_eq!(o["size"], "medium");
    assert_eq!(o["campaign_id"], cid);
    b.wait_visible(&format!("#rows tr[data-id=\"{id}\"]"), 20)
        .await;
    id
}

/// A create without its required name: refused, the server's message beside the field.
async fn refused(app: &TestApp, b: &Browser) {
    let before = count(app, "products").await;
    b.click("[data-action=\"create\"]").await;
    b.wait_visible("#editor [data-field=\"name\"]", 10).await;
    b.type_into("[data-field=\"price\"]", "1.5").await;
    b.click("[data-action=\"save\"]").await;
    let message = b.wait_visible("[data-error=\"name\"]", 20).await;
    assert!(!message.is_empty());
    let beside = b
        .js(
            "const e = document.querySelector('[data-error=name]');
             const i = document.querySelector('[data-field=name]');
             return e.closest('.field') === i.closest('.field')
               && i.getAttribute('aria-invalid') === 'true'
               && i.getAttribute('aria-describedby').includes(e.id)
               && document.activeElement === i;",
            json!([]),
        )
        .await;
    assert_eq!(beside, true, "the error is beside its field: {message}");
    let open = b
        .js("return document.getElementById('editor').open;", json!([]))
        .await;
    assert_eq!(open, true, "the form stays open");
    book_shot(b, "console-data-refused").await;
    b.click("#editor [data-action=\"cancel\"]").await;
    assert_eq!(count(app, "products").await, before, "nothing created");
}

async fn edit(app: &TestApp, b: &Browser, id: i64) {
    b.click(&format!("tr[data-id=\"{id}\"] [data-action=\"edit\"]"))
        .await;
    let name = b
        .wait_js(
            "the edit form",
            20,
            "const i = document.querySelector('#editor[open] [data-field=name]');
             return i && i.value ? i.value : null;",
            json!([]),
        )
        .await;
    assert_eq!(name, "Blue mug");
    let shown = b
        .js(
            "return ['price', 'launch', 'checked_at', 'size']
               .map((f) => document.querySelector(`[data-field=${f}]`).value);",
            json!([]),
        )
        .await;
    assert_eq!(
        shown,
        json!(["12.5", "2026-03-01", "2026-03-01T10:30:05", "medium"])
    );
    b.wait_js(
        "the campaign's name in the picker",
        20,
        "return document.querySelector('[data-field=campaign_id]').value.startsWith('spring catalogue');",
        json!([]),
    )
    .await;
    b.clear("[data-field=\"stock\"]").await;
    b.type_into("[data-field=\"stock\"]", "7").await;
    b.click("[data-action=\"save\"]").await;
    wait_notice(b, &format!("Saved products {id}")).await;
    let (_, o) = json(
        app.admin(Method::GET, &format!("/products/{id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(o["stock"], 7);
    assert_eq!(o["name"], "Blue mug", "what was not changed stays");
}

async fn delete_one(app: &TestApp, b: &Browser, id: i64) {
    b.click(&format!("tr[data-id=\"{id}\"] [data-action=\"delete\"]"))
        .await;
    let asked = b.wait_visible("#confirm-what", 10).await;
    assert!(asked.contains(&format!("products {id}")), "{asked}");
    b.click("#confirm [data-action=\"confirm\"]").await;
    wait_notice(b, &format!("Deleted products {id}")).await;
    let r = app
        .admin(Method::GET, &format!("/products/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    b.wait_js(
        "the row gone",
        20,
        "return !document.querySelector(`tr[data-id=\"${arguments[0]}\"]`);",
        json!([id]),
    )
    .await;
}

/// Three rows selected and deleted as one background request, then that request undone.
async fn delete_many(app: &TestApp, b: &Browser) {
    let mut ids = Vec::new();
    for n in ["cup", "plate", "bowl", "jug"] {
        let o = app
            .create("products", json!({"name": n, "price": "3.10"}))
            .await;
        ids.push(o["id"].as_i64().unwrap());
    }
    b.click("#apply").await;
    b.wait_visible(&format!("tr[data-id=\"{}\"]", ids[3]), 20)
        .await;
    for id in &ids[..3] {
        b.click(&format!("tr[data-id=\"{id}\"] input[data-select]"))
            .await;
    }
    let label = b.visible_text("#delete-selected").await.unwrap();
    assert_eq!(label, "Delete 3 selected");
    book_shot(b, "console-data").await;
    b.click("#delete-selected").await;
    let asked = b.wait_visible("#confirm-what", 10).await;
    assert!(asked.contains("Delete 3 objects of products"), "{asked}");
    b.click("#confirm [data-action=\"confirm\"]").await;
    wait_notice(b, "Deleted 3 of 3 objects of products").await;
    assert_eq!(count(app, "products").await, 1, "only the jug is left");
    let rid = b
        .js(
            "return document.getElementById('undo-batch').dataset.rid;",
            json!([]),
        )
        .await;
    let (_, rec) = app.bg_record(rid.as_str().unwrap()).await;
    assert_eq!(rec["name"], "batch", "one batch: {rec}");
    assert_eq!(rec["title"], "batch of 3 deletes of products");
    b.wait_js(
        "the deleted rows gone",
        20,
        "return document.querySelectorAll('#rows tr[data-id]').length === 1;",
        json!([]),
    )
    .await;
    book_shot(b, "console-data-deleted").await;
    b.click("#undo-batch").await;
    wait_notice(b, "The delete was undone").await;
    assert_eq!(count(app, "products").await, 4, "the three are back");
    b.wait_js(
        "the rows back",
        20,
        "return document.querySelectorAll('#rows tr[data-id]').length === 4;",
        json!([]),
    )
    .await;
}

/// `spring.csv` with three bad rows, uploaded from the page: the failed rows under the summary.
async fn upload_with_failures(b: &Browser) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spring.csv");
    let long = "x".repeat(300);
    std::fs::write(
        &file,
        format!(
            "op;name;type\nc;tulips;1\nc;;2\nc;roses;three\nc;daffodils;4\nc;{long};5\nc;irises;6\n"
        ),
    )
    .unwrap();
    b.click("#nav-uploader").await;
    b.wait_visible("#file", 20).await;
    b.click("#entity option[value=\"campaigns\"]").await;
    b.type_into("#file", file.to_str().unwrap()).await;
    b.wait_visible("#preview-sep", 10).await;
    start_upload(b).await;
    let lines = b
        .wait_js(
            "the failed rows",
            120,
            "const rows = document.querySelectorAll('#failed-rows tbody tr');
             return rows.length ? [...rows].map((r) => r.dataset.line) : null;",
            json!([]),
        )
        .await;
    assert_eq!(lines, json!(["2", "3", "5"]));
    let summary = b
        .js(
            "return document.getElementById('summary').dataset.failed;",
            json!([]),
        )
        .await;
    assert_eq!(summary, "3");
    let res = b
        .js(
            "return [...document.querySelectorAll('#failed-rows td.res')].map((t) => t.textContent);",
            json!([]),
        )
        .await;
    let res: Vec<String> = serde_json::from_value(res).unwrap();
    assert!(res.iter().all(|r| !r.is_empty() && r != "OK"), "{res:?}");
    // The same texts as the result file's `res`.
    let blob = b
        .js_async(
            "const done = arguments[arguments.length - 1];
             fetch(document.getElementById('download').href).then(r => r.text()).then(done);",
            json!([]),
        )
        .await;
    let rows = csv_rows(blob.as_str().unwrap().trim_start_matches('\u{feff}'));
    let failed: Vec<&String> = rows[1..]
        .iter()
        .map(|r| &r[0])
        .filter(|r| *r != "OK")
        .collect();
    assert_eq!(failed, res.iter().collect::<Vec<_>>());
    assert_labelled(b, "the upload page").await;
    fits_the_width(b, "the upload page").await;
    b.js(
        "document.getElementById('summary').scrollIntoView({block: 'start'}); return true;",
        json!([]),
    )
    .await;
    book_shot(b, "console-uploader-failed").await;
    let rid = b
        .js(
            "return JSON.parse(sessionStorage.getItem('entiserve.upload')).rid;",
            json!([]),
        )
        .await;
    rid.as_str().unwrap().to_string()
}

/// Each request named by what it did; the upload's failed rows and log open within the width;
/// the undo dialog names what it reverts.
async fn requests_page(b: &Browser, rid: &str) {
    b.click("#nav-requests").await;
    let row = format!("#rows tr[data-rid=\"{rid}\"]");
    let title = b
        .wait_js(
            "the upload's title with its failures",
            30,
            "const t = document.querySelector(arguments[0] + ' .title');
             return t && t.textContent.includes('failed') ? t.textContent : null;",
            json!([row]),
        )
        .await;
    assert_eq!(title, "upload of spring.csv into campaigns, 3 rows failed");
    let titles = b
        .js(
            "return [...document.querySelectorAll('#rows tr[data-rid] .title')].map((t) => t.textContent);",
            json!([]),
        )
        .await;
    let titles: Vec<String> = serde_json::from_value(titles).unwrap();
    assert!(
        titles.iter().any(|t| t.starts_with("undo of request ")),
        "{titles:?}"
    );
    assert!(
        titles
            .iter()
            .any(|t| t.starts_with("batch of 3 deletes of products")),
        "{titles:?}"
    );
    b.click(&format!("{row} [data-action=\"failed\"]")).await;
    let lines = b
        .wait_js(
            "the failed rows on the requests page",
            20,
            "const rows = document.querySelectorAll(`tr[data-failed-of=\"${arguments[0]}\"] tbody tr`);
             return rows.length ? [...rows].map((r) => r.dataset.line) : null;",
            json!([rid]),
        )
        .await;
    assert_eq!(lines, json!(["2", "3", "5"]));
    b.click(&format!("{row} [data-action=\"details\"]")).await;
    b.wait_visible(&format!("tr[data-details-of=\"{rid}\"] pre"), 20)
        .await;
    assert_labelled(b, "the requests page").await;
    fits_the_width(b, "the requests page with a log and failed rows open").await;
    book_shot(b, "console-requests").await;

    b.click(&format!("{row} [data-action=\"undo\"]")).await;
    let asked = b.wait_visible("#undo-what", 20).await;
    assert!(
        asked.contains("upload of `spring.csv` into campaigns")
            && asked.contains("3 objects will change (campaigns: 3)"),
        "{asked}"
    );
    let listed = b.visible_text("#undo-entities").await.unwrap();
    assert!(listed.contains("campaigns: 3 objects"), "{listed}");
    book_shot(b, "console-undo").await;
    b.click("#undo-cancel").await;
}

/// The reference: Swagger UI from the server, the entities' schemas, and GET /users/me sent
/// with the console's token.
async fn docs(b: &Browser) {
    b.click("#nav-docs").await;
    b.wait_js(
        "the reference loaded",
        60,
        "return document.body.dataset.loaded === '1' && document.querySelectorAll('.opblock-tag').length > 0;",
        json!([]),
    )
    .await;
    let note = b.wait_visible("#auth-note", 20).await;
    assert!(note.contains("as admin"), "{note}");
    book_shot(b, "console-docs").await;
    // The schemas start folded too; each entity's, unfolded, lists its fields.
    b.click(".models .models-control").await;
    let fields = b
        .wait_js(
            "the products' create schema",
            30,
            "const s = [...document.querySelectorAll('.models [data-json-schema-level=\"0\"]')]
               .find((e) => e.querySelector('.json-schema-2020-12__title')?.textContent === 'ProductsCreate');
             if (!s) return null;
             const open = s.querySelector('.json-schema-2020-12-accordion');
             if (s.textContent.includes('campaign_id')) return s.textContent;
             if (open && !s.dataset.clicked) { s.dataset.clicked = '1'; open.click(); }
             return null;",
            json!([]),
        )
        .await;
    let fields = fields.as_str().unwrap();
    for f in ["name", "price", "checked_at", "size", "campaign_id"] {
        assert!(fields.contains(f), "{f} in {fields}");
    }
    // The tags start folded; `auth` holds GET /users/me.
    b.click("#operations-tag-auth").await;
    b.wait_visible(
        "[data-tag=\"auth\"] .opblock, #operations-tag-auth ~ div .opblock",
        20,
    )
    .await;
    let op = b
        .js(
            "const op = [...document.querySelectorAll('.opblock-get')]
               .find((o) => o.querySelector('.opblock-summary-path')?.dataset.path === '/users/me');
             return op ? op.id : null;",
            json!([]),
        )
        .await;
    let op = format!("#{}", op.as_str().expect("GET /users/me is listed"));
    b.click(&format!("{op} .opblock-summary-control")).await;
    b.wait_visible(&format!("{op} .try-out__btn"), 20).await;
    b.click(&format!("{op} .try-out__btn")).await;
    b.wait_visible(&format!("{op} .execute"), 20).await;
    b.click(&format!("{op} .execute")).await;
    let answer = b
        .wait_js(
            "the reply in the reference",
            30,
            "const s = document.querySelector(arguments[0] + ' .live-responses-table tbody .response-col_status');
             const body = document.querySelector(arguments[0] + ' .live-responses-table .response-col_description pre');
             return s && body ? {status: s.textContent.trim(), body: body.textContent} : null;",
            json!([op]),
        )
        .await;
    assert_eq!(answer["status"], "200", "{answer}");
    assert!(
        answer["body"]
            .as_str()
            .unwrap()
            .contains("\"login\": \"admin\""),
        "{answer}"
    );
    let outside = b
        .js(
            "return performance.getEntriesByType('resource').map((e) => e.name)
               .filter((n) => !n.startsWith(location.origin));",
            json!([]),
        )
        .await;
    assert_eq!(outside, json!([]), "nothing fetched from outside");
    b.js(
        "document.querySelector(arguments[0] + ' .live-responses-table').scrollIntoView({block: 'center'});
         return true;",
        json!([op]),
    )
    .await;
    book_shot(b, "console-docs-try").await;
}

/// A user may write products but not regions: no create, edit, delete or select there.
async fn roles(app: &TestApp, b: &Browser) {
    app.create_user("viewer", "viewer-password-1").await;
    b.js("sessionStorage.clear(); return true;", json!([]))
        .await;
    b.goto(&app.url("/tools/data?entity=regions")).await;
    b.wait_visible("#login", 20).await;
    b.type_into("#login", "viewer").await;
    b.type_into("#password", "viewer-password-1").await;
    b.click("#signin").await;
    b.wait_visible("#rows tr[data-id]", 20).await;
    let buttons = b
        .js(
            "return document.querySelectorAll('[data-action=create]:not([hidden]), #rows [data-action], #rows input[data-select]').length
               + (document.getElementById('edit-bar').hidden ? 0 : 1);",
            json!([]),
        )
        .await;
    assert_eq!(buttons, 0, "no buttons where the role may not write");
    b.click("#entity option[value=\"products\"]").await;
    b.wait_visible("#rows tr[data-id] [data-action=\"edit\"]", 20)
        .await;
    assert!(b.visible_text("[data-action=\"create\"]").await.is_some());
}
