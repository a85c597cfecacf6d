//! Lists people can query (CONTRACT.md section 10, "Lists"): comparison filters, `sort` with
//! a cursor that follows it, `fields` in JSON and CSV, `X-Total-Count` of the filtered rows,
//! and the 400s for names and operators that do not exist.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::collections::BTreeMap;

const ITEMS: &str = "access: { read: user, write: user }
fields:
  name:   { type: string, required: true, index: true }
  qty:    { type: integer, index: true }
  price:  { type: decimal }
  active: { type: boolean }
  day:    { type: date }
  status: { type: enum, values: [new, open, done] }
  note:   { type: text }
  pin:    { type: string, secret: true }
";

async fn spawn_items() -> TestApp {
    spawn_with(|s| std::fs::write(s.entities_dir.join("items.yaml"), ITEMS).unwrap()).await
}

/// The six items every test starts from, created in this order (ids ascending).
async fn seed(app: &TestApp) {
    let rows = [
        json!({"name": "apple", "qty": 3, "price": 1.5, "active": true, "day": "2026-01-03", "status": "new", "note": "Fresh 100% juice", "pin": "secret-pin-1"}),
        json!({"name": "banana", "qty": null, "price": 0.25, "active": false, "day": "2026-01-01", "status": "open", "note": "ripe_yellow"}),
        json!({"name": "cherry", "qty": 3, "price": null, "active": true, "day": null, "status": "done", "note": "Dark RED"}),
        json!({"name": "date", "qty": 10, "price": 2.75, "active": null, "day": "2026-01-02", "status": "open", "note": null}),
        json!({"name": "elder", "qty": -2, "price": 1.5, "active": false, "day": "2026-01-03", "status": null, "note": "a\\b"}),
        json!({"name": "fig", "qty": null, "price": 10, "active": true, "day": "2026-01-01", "status": "new", "note": "plain"}),
    ];
    for r in rows {
        app.create("items", r).await;
    }
}

fn total(r: &reqwest::Response) -> i64 {
    r.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn next_link(r: &reqwest::Response) -> Option<String> {
    let v = r.headers().get("link")?.to_str().unwrap();
    let target = v.split(';').next().unwrap().trim();
    Some(target[1..target.len() - 1].to_string())
}

/// The names of every object a walk by `Link` from `path` returns, in order, and the
/// `X-Total-Count` of its first page.
async fn walk(app: &TestApp, path: &str) -> (Vec<String>, i64) {
    let mut names = Vec::new();
    let mut next = Some(path.to_string());
    let mut first_total = None;
    while let Some(p) = next {
        let r = app.admin(Method::GET, &p).send().await.unwrap();
        assert_eq!(r.status(), 200, "{p}");
        first_total.get_or_insert(total(&r));
        next = next_link(&r);
        let body: Json = r.json().await.unwrap();
        names.extend(
            body.as_array()
                .unwrap()
                .iter()
                .map(|o| o["name"].as_str().unwrap().to_string()),
        );
    }
    (names, first_total.unwrap())
}

/// The names `/items?<query>` lists (one page), checked against its `X-Total-Count`.
async fn names(app: &TestApp, query: &str) -> Vec<String> {
    let path = format!("/items?{query}");
    let r = app.admin(Method::GET, &path).send().await.unwrap();
    let n = total(&r);
    let (s, body) = json(r).await;
    assert_eq!(s, 200, "{path}: {body}");
    let got: Vec<String> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(n, got.len() as i64, "X-Total-Count of {path}");
    // The count stays that of the filtered rows on a short page.
    let r = app
        .admin(Method::GET, &format!("{path}&limit=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(total(&r), n, "X-Total-Count of {path}&limit=1");
    got
}

async fn error(app: &TestApp, query: &str) -> (String, Json) {
    let r = app
        .admin(Method::GET, &format!("/items?{query}"))
        .send()
        .await
        .unwrap();
    let (s, body) = json(r).await;
    assert_eq!(s, 400, "{query}: {body}");
    (error_code(&body), body)
}

#[tokio::test]
async fn every_operator_filters_and_the_count_follows() {
    let app = spawn_items().await;
    seed(&app).await;
    let cases: &[(&str, &[&str])] = &[
        ("qty[gt]=2", &["apple", "cherry", "date"]),
        ("qty[gte]=3", &["apple", "cherry", "date"]),
        ("qty[lt]=3", &["elder"]),
        ("qty[lte]=3", &["apple", "cherry", "elder"]),
        ("qty[ne]=3", &["banana", "date", "elder", "fig"]),
        ("qty[in]=3,10", &["apple", "cherry", "date"]),
        ("qty=3", &["apple", "cherry"]),
        ("price[gt]=1.5", &["date", "fig"]),
        ("price[lte]=1.5", &["apple", "banana", "elder"]),
        ("price[in]=1.5,10", &["apple", "elder", "fig"]),
        ("active=true", &["apple", "cherry", "fig"]),
        ("active[ne]=1", &["banana", "date", "elder"]),
        ("day[gte]=2026-01-02", &["apple", "date", "elder"]),
        ("day[lt]=2026-01-02", &["banana", "fig"]),
        ("status[in]=new,done", &["apple", "cherry", "fig"]),
        ("status[ne]=open", &["apple", "cherry", "elder", "fig"]),
        ("name[gt]=cherry", &["date", "elder", "fig"]),
        ("name[lte]=banana", &["apple", "banana"]),
        ("name[in]=fig,apple,nothing", &["apple", "fig"]),
        ("note[contains]=red", &["cherry"]),
        ("note[contains]=FRESH", &["apple"]),
        ("name[contains]=AN", &["banana"]),
        ("status[contains]=pe", &["banana", "date"]),
        // LIKE wildcards in the text are matched as themselves.
        ("note[contains]=100%25", &["apple"]),
        ("note[contains]=%25", &["apple"]),
        ("note[contains]=_", &["banana"]),
        ("note[contains]=%5C", &["elder"]),
        // Filters combine.
        ("qty[gte]=0&active=true", &["apple", "cherry"]),
        ("qty[gt]=0&qty[lt]=5", &["apple", "cherry"]),
        (
            "created_dt[lte]=2999-01-01 00:00:00",
            &["apple", "banana", "cherry", "date", "elder", "fig"],
        ),
        ("created_dt[gt]=2999-01-01T00:00:00", &[]),
        (
            "updated_dt[ne]=2000-01-01 00:00:00",
            &["apple", "banana", "cherry", "date", "elder", "fig"],
        ),
    ];
    for (q, want) in cases {
        assert_eq!(names(&app, q).await, *want, "{q}");
    }
    // id takes the operators too.
    let all: Json = app
        .admin(Method::GET, "/items")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<i64> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        names(&app, &format!("id[in]={},{}", ids[1], ids[4])).await,
        ["banana", "elder"]
    );
    assert_eq!(
        names(&app, &format!("id[gt]={}", ids[3])).await,
        ["elder", "fig"]
    );
    // With no filter the count is the whole table.
    let r = app
        .admin(Method::GET, "/items?limit=2")
        .send()
        .await
        .unwrap();
    assert_eq!(total(&r), 6);
    // `contains` ignores the case of letters beyond ASCII too.
    app.create(
        "items",
        json!({"name": "zz-ärger", "note": "Grüße ÜBER alles"}),
    )
    .await;
    assert_eq!(names(&app, "note[contains]=über").await, ["zz-ärger"]);
    assert_eq!(names(&app, "name[contains]=%C3%84R").await, ["zz-ärger"]);
    assert_eq!(
        names(&app, "note[contains]=GRÜSSE").await,
        Vec::<String>::new()
    );
    app.stop().await;
}

#[tokio::test]
async fn sort_orders_by_any_type_with_ties_and_nulls_and_cursors_follow_it() {
    let app = spawn_items().await;
    seed(&app).await;
    let cases: &[(&str, &[&str])] = &[
        (
            "sort=qty",
            &["banana", "fig", "elder", "apple", "cherry", "date"],
        ),
        (
            "sort=-qty",
            &["date", "apple", "cherry", "elder", "banana", "fig"],
        ),
        (
            "sort=-active,name",
            &["apple", "cherry", "fig", "banana", "elder", "date"],
        ),
        (
            "sort=active,-name",
            &["date", "elder", "banana", "fig", "cherry", "apple"],
        ),
        (
            "sort=price,-name",
            &["cherry", "banana", "elder", "apple", "date", "fig"],
        ),
        (
            "sort=-price",
            &["fig", "date", "apple", "elder", "banana", "cherry"],
        ),
        (
            "sort=day,-id",
            &["cherry", "fig", "banana", "date", "elder", "apple"],
        ),
        (
            "sort=status,qty",
            &["elder", "cherry", "fig", "apple", "banana", "date"],
        ),
        (
            "sort=-name",
            &["fig", "elder", "date", "cherry", "banana", "apple"],
        ),
        (
            "sort=-created_dt,-id",
            &["fig", "elder", "date", "cherry", "banana", "apple"],
        ),
    ];
    for (q, want) in cases {
        assert_eq!(names(&app, q).await, *want, "{q}");
        // Walking page by page gives the same order, every row once.
        for limit in [1, 2, 4] {
            let (walked, n) = walk(&app, &format!("/items?{q}&limit={limit}")).await;
            assert_eq!(walked, *want, "{q}&limit={limit}");
            assert_eq!(n, 6);
        }
        // Under a filter too.
        let (walked, n) = walk(&app, &format!("/items?{q}&limit=1&name[ne]=date")).await;
        let filtered: Vec<&str> = want.iter().copied().filter(|n| *n != "date").collect();
        assert_eq!(walked, filtered, "{q} without date");
        assert_eq!(n, 5);
    }
    // Offsets keep working under a sort.
    let r = app
        .admin(Method::GET, "/items?sort=qty&offset=2&limit=2")
        .send()
        .await
        .unwrap();
    assert_eq!(total(&r), 6);
    let body: Json = r.json().await.unwrap();
    assert_eq!(body[0]["name"], "elder");
    assert_eq!(body[1]["name"], "apple");
    assert_eq!(body.as_array().unwrap().len(), 2);
    // A cursor handed out under one sort does not fit another (of another length or type).
    let r = app
        .admin(Method::GET, "/items?sort=-qty&limit=2")
        .send()
        .await
        .unwrap();
    let link = next_link(&r).unwrap();
    let cursor = link.split("cursor=").nth(1).unwrap().to_string();
    for other in ["sort=qty,name", "sort=name", ""] {
        let (code, body) = error(&app, &format!("{other}&cursor={cursor}")).await;
        assert_eq!(code, "validation_failed", "{other}: {body}");
        assert!(body["fields"]["cursor"].is_string(), "{body}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_sorted_cursor_walk_while_rows_are_created_returns_every_earlier_row_once() {
    let app = spawn_items().await;
    seed(&app).await;
    for sort in ["-qty", "qty,-name", "-price,day", "note"] {
        let mut names: Vec<String> = Vec::new();
        let mut next = Some(format!("/items?sort={sort}&limit=2"));
        let mut added = 0;
        while let Some(p) = next {
            let r = app.admin(Method::GET, &p).send().await.unwrap();
            assert_eq!(r.status(), 200);
            next = next_link(&r);
            let body: Json = r.json().await.unwrap();
            for o in body.as_array().unwrap() {
                names.push(o["name"].as_str().unwrap().to_string());
            }
            // Rows that sort before, among and after the ones walked so far.
            for (qty, price) in [(-100, 0.01), (5, 3.0), (100, 99.0)] {
                added += 1;
                app.create(
                    "items",
                    json!({"name": format!("new-{sort}-{added}"), "qty": qty, "price": price, "note": format!("n{added}")}),
                )
                .await;
            }
        }
        let mut seen = BTreeMap::new();
        for n in &names {
            *seen.entry(n.as_str()).or_insert(0) += 1;
        }
        for n in ["apple", "banana", "cherry", "date", "elder", "fig"] {
            assert_eq!(seen.get(n), Some(&1), "{sort}: {n} in {names:?}");
        }
        assert!(seen.values().all(|&c| c == 1), "{sort}: {names:?}");
        // Later rows are removed again so the next sort starts from the seed.
        let r = app
            .admin(
                Method::GET,
                "/items?name[contains]=new-&fields=id&limit=10000",
            )
            .send()
            .await
            .unwrap();
        let ids: Json = r.json().await.unwrap();
        let ids: Vec<Json> = ids
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].clone())
            .collect();
        let r = app
            .admin(Method::DELETE, "/items?bgrs=false")
            .json(&ids)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(walk(&app, "/items").await.1, 6);
    }
    app.stop().await;
}

#[tokio::test]
async fn fields_choose_the_columns_in_json_and_csv() {
    let app = spawn_items().await;
    seed(&app).await;
    let r = app
        .admin(Method::GET, "/items?fields=name,id,price&sort=name&limit=2")
        .send()
        .await
        .unwrap();
    assert_eq!(total(&r), 6);
    let link = next_link(&r).expect("more follow");
    let body: Json = r.json().await.unwrap();
    for o in body.as_array().unwrap() {
        let keys: Vec<&str> = o.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(keys, ["name", "id", "price"], "{o}");
    }
    assert_eq!(body[0]["name"], "apple");
    assert_eq!(body[0]["price"], 1.5);
    // The next page keeps the choice.
    let body: Json = app
        .admin(Method::GET, &link)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body[0].as_object().unwrap().len(), 3, "{body}");
    assert_eq!(body[0]["name"], "cherry");

    let r = app
        .admin(
            Method::GET,
            "/items?fields=name,qty,updated_dt&t=csv&sort=-qty&qty[gte]=3",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(total(&r), 3);
    let csv = r.text().await.unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "name,qty,updated_dt");
    assert!(lines[1].starts_with("date,10,20"), "{csv}");
    assert!(lines[2].starts_with("apple,3,"), "{csv}");
    assert!(lines[3].starts_with("cherry,3,"), "{csv}");
    assert_eq!(lines.len(), 4);
    // Repeats are left out.
    let body: Json = app
        .admin(Method::GET, "/items?fields=id,id&limit=1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body[0].as_object().unwrap().len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn unknown_names_operators_and_bad_values_are_400s_naming_them() {
    let app = spawn_items().await;
    seed(&app).await;
    // Unknown names, with the nearest known one; secrets behave as unknown.
    for (q, name, hint) in [
        ("nme=apple", "nme", Some("name")),
        ("qtty[gt]=1", "qtty", Some("qty")),
        ("sort=-nme", "nme", Some("name")),
        ("sort=name,priice", "priice", Some("price")),
        ("fields=id,statuss", "statuss", Some("status")),
        ("fields=-name", "-name", None),
        ("pin=p1", "pin", None),
        ("pin[contains]=p", "pin", None),
        ("sort=pin", "pin", None),
        ("fields=name,pin", "pin", None),
    ] {
        let (code, body) = error(&app, q).await;
        assert_eq!(code, "unknown_field", "{q}: {body}");
        let d = body["description"].as_str().unwrap();
        assert!(d.contains(&format!("`{name}`")), "{q}: {d}");
        if let Some(h) = hint {
            assert!(d.contains(&format!("did you mean `{h}`")), "{q}: {d}");
        }
        assert!(!d.contains("`pin`)"), "{d}");
    }
    // Unknown operators name the parameter, with the nearest operator.
    let (code, body) = error(&app, "qty[gtt]=1").await;
    assert_eq!(code, "validation_failed");
    let d = body["fields"]["qty[gtt]"]
        .as_str()
        .expect("names the parameter");
    assert!(d.contains("unknown operator `gtt`"), "{d}");
    assert!(d.contains("did you mean `qty[gt]`"), "{d}");
    let (_, body) = error(&app, "name[like]=a").await;
    assert!(body["fields"]["name[like]"].is_string(), "{body}");
    // Bad values name the field.
    for (q, field) in [
        ("qty[gt]=abc", "qty"),
        ("qty[in]=1,x", "qty"),
        ("qty[in]=1,,2", "qty"),
        ("price[lt]=cheap", "price"),
        ("active[ne]=maybe", "active"),
        ("day[gte]=2026-02-30", "day"),
        ("status[in]=new,closed", "status"),
        ("created_dt[gt]=yesterday", "created_dt"),
        ("id[lte]=x", "id"),
        ("qty[contains]=1", "qty"),
        ("qty[gt]=", "qty"),
        ("sort=", "sort"),
        ("sort=name,", "sort"),
        ("sort=name,%20qty", "sort"),
        ("fields=", "fields"),
    ] {
        let (code, body) = error(&app, q).await;
        if code == "unknown_field" {
            // `sort=name, qty` names ` qty`, which is no field.
            assert!(q.contains("%20"), "{q}: {body}");
            continue;
        }
        assert_eq!(code, "validation_failed", "{q}: {body}");
        assert!(body["fields"][field].is_string(), "{q}: {body}");
    }
    let many = vec!["1"; 1001].join(",");
    let (_, body) = error(&app, &format!("qty[in]={many}")).await;
    assert!(
        body["fields"]["qty"].as_str().unwrap().contains("1000"),
        "{body}"
    );
    // Filters hold together; more of them than a query names is a 400, not the database's
    // limit on nesting (a thousand of them were a 500 on SQLite).
    let filters = |n: usize| {
        (0..n)
            .map(|i| format!("qty[ne]={i}"))
            .collect::<Vec<_>>()
            .join("&")
    };
    let r = app
        .admin(Method::GET, &format!("/items?{}", filters(100)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for n in [101, 1000, 5000] {
        let (code, body) = error(&app, &filters(n)).await;
        assert_eq!(code, "validation_failed", "{body}");
        let d = body["description"].as_str().unwrap();
        assert!(
            d.contains(&format!(
                "at most 100 filters in one query; this one has {n}"
            )),
            "{d}"
        );
        assert!(
            body.get("fields").is_none(),
            "no field in particular: {body}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn filters_sort_and_fields_are_in_the_openapi_document() {
    let app = spawn_items().await;
    let doc = openapi_document(&app).await;
    let params = doc["paths"]["/items"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .clone();
    let names: Vec<&str> = params.iter().map(|p| p["name"].as_str().unwrap()).collect();
    for n in [
        "name",
        "name[gt]",
        "name[gte]",
        "name[lt]",
        "name[lte]",
        "name[ne]",
        "name[in]",
        "name[contains]",
        "qty[gt]",
        "qty[in]",
        "price[lte]",
        "id[in]",
        "created_dt[gte]",
        "status[contains]",
        "sort",
        "fields",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    for absent in ["qty[contains]", "pin", "pin[gt]", "pin[contains]"] {
        assert!(!names.contains(&absent), "{absent} is declared");
    }
    let sort = params.iter().find(|p| p["name"] == "sort").unwrap();
    let pattern = sort["schema"]["pattern"].as_str().unwrap();
    assert!(
        pattern.contains("created_dt") && !pattern.contains("pin"),
        "{pattern}"
    );
    // A page with chosen columns matches the list's item schema: the full object or the
    // columns without required ones.
    let items = &doc["paths"]["/items"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        ["items"];
    let refs = json_refs(items);
    assert!(
        refs.contains(&"#/components/schemas/ItemsColumns".to_string()),
        "{items}"
    );
    let columns = resolve_ref(&doc, "#/components/schemas/ItemsColumns");
    assert!(columns.get("required").is_none(), "{columns}");
    assert!(columns["properties"]["name"].is_object(), "{columns}");
    app.stop().await;
}
