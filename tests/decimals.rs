//! Exact decimals (CONTRACT.md section 10: "decimal values are exact"), against a real server on
//! the backend the suite runs on: the digits sent come back through REST, batches, CSV uploads,
//! CSV exports and an undo; filters and sorts compare numbers; a value a decimal cannot hold is
//! a 400 naming the field; a database whose decimal column is binary floating point (earlier
//! versions) is converted at the start without losing a value.

mod common;

use common::upload::{background_rows, form, rows, upload};
use common::*;
use entiserve::storage::{Dialect, Value};
use reqwest::Method;
use serde_json::Value as Json;
use std::time::Duration;

const GOODS: &str = "access: { read: user, write: user }
fields:
  name:  { type: string, required: true }
  price: { type: decimal, index: true }
  fee:   { type: decimal, default: 0.25 }
";

/// Values whose digits must survive every path (as sent, and as they come back).
const EXACT: [(&str, &str); 9] = [
    ("0.1", "0.1"),
    ("0.2", "0.2"),
    ("0.3", "0.3"),
    ("12345678901234567.89", "12345678901234567.89"),
    ("0.1000000000000000055", "0.1000000000000000055"),
    (
        "79228162514264337593543950335",
        "79228162514264337593543950335",
    ),
    (
        "-0.0000000000000000000000000001",
        "-0.0000000000000000000000000001",
    ),
    ("12.50", "12.5"),
    ("1.5e3", "1500"),
];

async fn spawn_goods() -> TestApp {
    spawn_with(|s| std::fs::write(s.entities_dir.join("goods.yaml"), GOODS).unwrap()).await
}

async fn get(app: &TestApp, path: &str) -> (u16, Json) {
    json(app.admin(Method::GET, path).send().await.unwrap()).await
}

/// The text of a JSON number as the server wrote it.
fn digits(v: &Json) -> String {
    assert!(v.is_number(), "{v} is not a number");
    v.to_string()
}

/// Creates a good priced `price` (JSON number text): its id.
async fn create(app: &TestApp, name: &str, price: &str) -> i64 {
    let (s, b) = send_raw(
        app,
        Method::POST,
        "/goods",
        &format!(r#"{{"name": "{name}", "price": {price}}}"#),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    b["id"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digits_survive_rest_batches_and_csv() {
    let app = spawn_goods().await;
    let mut ids = Vec::new();
    for (i, (sent, back)) in EXACT.iter().enumerate() {
        let (s, b) = send_raw(
            &app,
            Method::POST,
            "/goods",
            &format!(r#"{{"name": "g{i}", "price": {sent}}}"#),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(digits(&b["price"]), *back, "create answers {b}");
        assert_eq!(digits(&b["fee"]), "0.25", "the default: {b}");
        let id = b["id"].as_i64().unwrap();
        let (_, one) = get(&app, &format!("/goods/{id}")).await;
        assert_eq!(digits(&one["price"]), *back, "read back: {one}");
        ids.push(id);
    }
    // The raw reply holds the digits themselves, no exponent and no float noise.
    let text = app
        .admin(Method::GET, &format!("/goods/{}", ids[4]))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains(r#""price":0.1000000000000000055"#), "{text}");

    // A batch update (PUT, synchronous) keeps them too.
    let (s, b) = send_raw(
        &app,
        Method::PUT,
        "/goods?bgrs=false",
        &format!(
            r#"[{{"id": {}, "price": 0.30}}, {{"id": {}, "price": 98765432109876543.21}}]"#,
            ids[0], ids[1]
        ),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let items: Vec<Json> = b
        .as_array()
        .unwrap()
        .iter()
        .map(|i| serde_json::from_str(i["body"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(digits(&items[0]["price"]), "0.3", "{b}");
    assert_eq!(digits(&items[1]["price"]), "98765432109876543.21", "{b}");
    let (_, one) = get(&app, &format!("/goods/{}", ids[1])).await;
    assert_eq!(digits(&one["price"]), "98765432109876543.21");

    // A CSV upload, then the list's CSV export.
    let csv = "op;id;name;price\nc;;csv-a;0.1\nc;;csv-b;0.2\nc;;csv-c;12345678901234567.89\nc;;csv-d;0.1000000000000000055\n";
    let (s, text) = upload(
        &app,
        form("goods", "goods.csv", csv.as_bytes().to_vec(), &[]),
    )
    .await;
    assert_eq!(s, 200, "{text}");
    let result = rows(&text);
    assert!(result[1..].iter().all(|r| r[0] == "OK"), "{result:?}");
    let r = app
        .admin(
            Method::GET,
            "/goods?t=csv&name[contains]=csv-&sort=name&fields=name,price",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let exported = r.text().await.unwrap();
    let lines: Vec<&str> = exported.lines().collect();
    assert_eq!(
        lines,
        [
            "name,price",
            "csv-a,0.1",
            "csv-b,0.2",
            "csv-c,12345678901234567.89",
            "csv-d,0.1000000000000000055"
        ],
        "{exported}"
    );
    // The JSON list says the same.
    let (_, list) = get(&app, "/goods?name[contains]=csv-&sort=name").await;
    let prices: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|o| digits(&o["price"]))
        .collect();
    assert_eq!(
        prices,
        [
            "0.1",
            "0.2",
            "12345678901234567.89",
            "0.1000000000000000055"
        ]
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_no_decimal_holds_is_a_400_naming_the_field() {
    let app = spawn_goods().await;
    for bad in [
        "1e40",
        "79228162514264337593543950336",
        "0.00000000000000000000000000001",
        "1.00000000000000000000000000000001",
    ] {
        let (s, b) = send_raw(
            &app,
            Method::POST,
            "/goods",
            &format!(r#"{{"name": "x", "price": {bad}}}"#),
        )
        .await;
        assert_eq!(
            (s, error_code(&b)),
            (400, "validation_failed".into()),
            "{bad}: {b}"
        );
        let why = b["fields"]["price"].as_str().unwrap();
        // The value as read (an exponent is spelled `1e+40`) and what a decimal holds.
        let shown = bad.replace("e4", "e+4");
        assert!(
            why.contains(&shown) && why.contains("does not fit"),
            "{why}"
        );
    }
    // The same through a CSV cell and a query string.
    let csv = "op;id;name;price\nc;;fits;0.5\nc;;too-long;0.00000000000000000000000000001\n";
    let (s, text) = upload(&app, form("goods", "g.csv", csv.as_bytes().to_vec(), &[])).await;
    assert_eq!(s, 200, "{text}");
    let result = rows(&text);
    assert_eq!(result[1][0], "OK", "{result:?}");
    assert_ne!(result[2][0], "OK", "{result:?}");
    assert!(
        result[2]
            .iter()
            .any(|c| c.contains("price") && c.contains("does not fit")),
        "{result:?}"
    );
    let (s, b) = get(&app, "/goods?price[gt]=1e99").await;
    assert_eq!(s, 400, "{b}");
    assert!(
        b["fields"]["price"]
            .as_str()
            .unwrap()
            .contains("does not fit"),
        "{b}"
    );
    // Nothing was rounded into the table: only the row that fits is there.
    let (_, list) = get(&app, "/goods").await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_and_sorts_compare_numbers() {
    let app = spawn_goods().await;
    // As text these sort 0.1 < 0.10000000000000001 < 0.2 < 10 < 100 < 9.5 < -1.
    for (name, price) in [
        ("nine", "9.5"),
        ("tenth", "0.1"),
        ("hundred", "100"),
        ("minus", "-1"),
        ("ten", "10"),
        ("near", "0.10000000000000001"),
        ("fifth", "0.2"),
    ] {
        create(&app, name, price).await;
    }
    create_null(&app).await;
    let names = |b: &Json| -> Vec<String> {
        b.as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap().to_string())
            .collect()
    };
    for (query, want) in [
        (
            "price[gt]=0.1&sort=price",
            &["near", "fifth", "nine", "ten", "hundred"][..],
        ),
        (
            "price[gte]=0.1&price[lt]=0.2&sort=price",
            &["tenth", "near"],
        ),
        (
            "price[lte]=9.50&sort=-price",
            &["nine", "fifth", "near", "tenth", "minus"],
        ),
        ("price=0.10&sort=name", &["tenth"]),
        (
            "price[in]=0.1,10.0,-1&sort=price",
            &["minus", "tenth", "ten"],
        ),
        ("price[ne]=10&price[gt]=9&sort=price", &["nine", "hundred"]),
        (
            "sort=price",
            &[
                "none", "minus", "tenth", "near", "fifth", "nine", "ten", "hundred",
            ],
        ),
        (
            "sort=-price",
            &[
                "hundred", "ten", "nine", "fifth", "near", "tenth", "minus", "none",
            ],
        ),
    ] {
        let (s, b) = get(&app, &format!("/goods?{query}")).await;
        assert_eq!(s, 200, "{query}: {b}");
        assert_eq!(names(&b), want, "{query}");
    }
    // The cursor of a sorted walk continues by value.
    for sort in ["price", "-price"] {
        let mut seen = Vec::new();
        let mut path = format!("/goods?sort={sort}&limit=3");
        loop {
            let r = app.admin(Method::GET, &path).send().await.unwrap();
            let next = r
                .headers()
                .get("link")
                .map(|v| v.to_str().unwrap().to_string());
            let (s, b) = json(r).await;
            assert_eq!(s, 200, "{b}");
            seen.extend(names(&b));
            let Some(link) = next else { break };
            let target = link.split(';').next().unwrap().trim();
            let url = &target[1..target.len() - 1];
            path = url.strip_prefix(&app.base).unwrap_or(url).to_string();
        }
        let (_, all) = get(&app, &format!("/goods?sort={sort}")).await;
        assert_eq!(seen, names(&all), "{sort}");
    }
    app.stop().await;
}

async fn create_null(app: &TestApp) {
    let (s, b) = send_raw(
        app,
        Method::POST,
        "/goods",
        r#"{"name": "none", "price": null}"#,
    )
    .await;
    assert_eq!(s, 200, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_gives_the_exact_old_value_back() {
    let app = spawn_goods().await;
    let a = create(&app, "a", "0.1000000000000000055").await;
    let b = create(&app, "b", "12345678901234567.89").await;
    let csv = format!("op;id;price\nu;{a};0.3\nu;{b};0.2\n");
    let (rid, rec, result) = background_rows(&app, "goods", csv.as_bytes(), &[]).await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    assert!(result[1..].iter().all(|r| r[0] == "OK"), "{result:?}");
    let (_, one) = get(&app, &format!("/goods/{a}")).await;
    assert_eq!(digits(&one["price"]), "0.3");

    let (s, u) = json(
        app.admin(Method::POST, &format!("/bgrs/{rid}/undo"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 202, "{u}");
    let undo = u["request"].as_str().unwrap().to_string();
    let rec = app.wait_ended(&undo, Duration::from_secs(60)).await;
    assert_eq!(rec["status_id"], "4", "{rec}");
    let (_, one) = get(&app, &format!("/goods/{a}")).await;
    assert_eq!(digits(&one["price"]), "0.1000000000000000055");
    let (_, two) = get(&app, &format!("/goods/{b}")).await;
    assert_eq!(digits(&two["price"]), "12345678901234567.89");
    app.stop().await;
}

/// Makes `price` and `fee` of `goods` what earlier versions made: binary float columns, each
/// row's two values set to its float. Returns the dialect.
async fn to_floats(url: &str, rows: &[(i64, Option<f64>)]) -> Dialect {
    let storage = entiserve::storage::open(url).await.unwrap();
    let d = storage.dialect();
    let ddl: Vec<String> = match d {
        Dialect::Sqlite => [
            "DROP INDEX IF EXISTS \"goods_price_idx\"",
            "ALTER TABLE \"goods\" DROP COLUMN \"price\"",
            "ALTER TABLE \"goods\" ADD COLUMN \"price\" REAL",
            "ALTER TABLE \"goods\" DROP COLUMN \"fee\"",
            "ALTER TABLE \"goods\" ADD COLUMN \"fee\" REAL DEFAULT 0.25",
        ]
        .map(String::from)
        .to_vec(),
        Dialect::Postgres => [
            "ALTER TABLE \"goods\" ALTER COLUMN \"price\" TYPE DOUBLE PRECISION",
            "ALTER TABLE \"goods\" ALTER COLUMN \"fee\" TYPE DOUBLE PRECISION",
        ]
        .map(String::from)
        .to_vec(),
    };
    storage.batch_ddl(&ddl).await.unwrap();
    for (id, f) in rows {
        storage
            .execute(
                &d.bind("UPDATE \"goods\" SET \"price\" = ?, \"fee\" = ? WHERE \"id\" = ?"),
                &[Value::Float(*f), Value::Float(*f), Value::int(*id)],
            )
            .await
            .unwrap();
    }
    storage.close().await;
    d
}

fn settings(entities: &std::path::Path, url: &str) -> entiserve::settings::Settings {
    let dir = entities.parent().unwrap();
    let mut s = entiserve::settings::Settings::new(dir.join("data"), entities);
    s.bind = "127.0.0.1:0".parse().unwrap();
    s.admin_password = Some(ADMIN_PASSWORD.into());
    s.shutdown_grace = Duration::from_secs(2);
    s.database_url = Some(url.to_string());
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_float_no_decimal_holds_refuses_the_start_and_changes_nothing() {
    let app = spawn_goods().await;
    let a = create(&app, "a", "1").await;
    let big = create(&app, "big", "1").await;
    let (dir, entities, db) = app.stop_keeping().await;
    let url = database_url(dir.path(), &db);
    to_floats(&url, &[(a, Some(0.5)), (big, Some(1e300))]).await;

    let why = match entiserve::App::build(settings(&entities, &url)).await {
        Ok(_) => panic!("the start is refused"),
        Err(e) => format!("{e:#}"),
    };
    assert!(why.contains("goods.yaml:4:"), "{why}");
    assert!(why.contains("`goods.price`"), "{why}");
    assert!(why.contains(&format!("id {big}")), "{why}");
    // Nothing changed: the floats are still there, read as before.
    let storage = entiserve::storage::open(&url).await.unwrap();
    let rows = storage
        .fetch(
            "SELECT \"price\" FROM \"goods\" ORDER BY \"id\"",
            &[],
            &[entiserve::schema::ColType::Float],
        )
        .await
        .unwrap();
    assert_eq!(
        rows,
        [[Value::Float(Some(0.5))], [Value::Float(Some(1e300))]]
    );
    storage.close().await;
    drop(dir);
    drop(db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_floating_point_column_of_an_earlier_version_becomes_exact() {
    let app = spawn_goods().await;
    let a = create(&app, "a", "1").await;
    let b = create(&app, "b", "1").await;
    let c = create(&app, "c", "1").await;
    let (dir, entities, db) = app.stop_keeping().await;

    let url = database_url(dir.path(), &db);
    let d = to_floats(&url, &[(a, Some(0.1)), (b, Some(0.1 + 0.2)), (c, None)]).await;

    let app = start(dir, entities.clone(), settings(&entities, &url), db).await;
    // Each float reads as its shortest form; a null stays null (not `fee`'s default).
    let (_, one) = get(&app, &format!("/goods/{a}")).await;
    assert_eq!(digits(&one["price"]), "0.1");
    assert_eq!(digits(&one["fee"]), "0.1");
    let (_, two) = get(&app, &format!("/goods/{b}")).await;
    assert_eq!(digits(&two["price"]), "0.30000000000000004");
    let (_, three) = get(&app, &format!("/goods/{c}")).await;
    assert!(
        three["price"].is_null() && three["fee"].is_null(),
        "{three}"
    );
    // The column is exact now: digits a float cannot hold are kept.
    let (s, u) = send_raw(
        &app,
        Method::PUT,
        &format!("/goods/{a}"),
        r#"{"price": 0.1000000000000000055}"#,
    )
    .await;
    assert_eq!(s, 200, "{u}");
    let (_, one) = get(&app, &format!("/goods/{a}")).await;
    assert_eq!(digits(&one["price"]), "0.1000000000000000055");
    let (_, sorted) = get(&app, "/goods?sort=-price&price[gt]=0.1").await;
    let ids: Vec<i64> = sorted
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [b, a]);
    let (dir, _entities, db) = app.stop_keeping().await;

    // The column's type changed: a float bound now is stored as the decimal's text / NUMERIC,
    // and nothing is left to convert.
    let storage = entiserve::storage::open(&database_url(dir.path(), &db))
        .await
        .unwrap();
    let types = match d {
        Dialect::Sqlite => {
            "SELECT type FROM pragma_table_info('goods') WHERE name = 'price'".to_string()
        }
        Dialect::Postgres => "SELECT data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'goods' AND column_name = 'price'".to_string(),
    };
    let t = storage
        .fetch(&types, &[], &[entiserve::schema::ColType::Text])
        .await
        .unwrap();
    let t = t[0][0].as_str().unwrap().to_ascii_lowercase();
    assert!(t == "text" || t == "numeric", "{t}");
    storage.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_upload_keeps_its_digits() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let app = spawn_with(|s| {
        std::fs::copy(
            root.join("examples/entities/products.yaml"),
            s.entities_dir.join("products.yaml"),
        )
        .unwrap();
    })
    .await;
    let bytes = std::fs::read(root.join("examples/uploads/decimals.csv")).unwrap();
    let (s, text) = upload(&app, form("products", "decimals.csv", bytes, &[])).await;
    assert_eq!(s, 200, "{text}");
    let result = rows(&text);
    assert_eq!(result.len(), 8, "{text}");
    assert!(result[1..7].iter().all(|r| r[0] == "OK"), "{text}");
    assert!(
        result[7][0].contains("price") && result[7][0].contains("does not fit"),
        "{text}"
    );
    let r = app
        .admin(
            Method::GET,
            "/products?price[gt]=0.1&sort=-price&fields=name,price&t=csv",
        )
        .send()
        .await
        .unwrap();
    let exported = r.text().await.unwrap();
    assert_eq!(
        exported.lines().collect::<Vec<_>>(),
        [
            "name,price",
            "Big and exact,12345678901234567.89",
            "Trailing zeros,12.5",
            "Three tenths,0.3",
            "Fifth,0.2",
            "Past a double,0.1000000000000000055",
        ],
        "{exported}"
    );
    app.stop().await;
}
