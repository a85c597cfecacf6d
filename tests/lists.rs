//! Lists at scale (CONTRACT.md section 10, "Many clients at once" and "Lists"): the `Link`
//! header and its cursor, cursor walks while rows are being created, and `X-Total-Count` kept
//! exact through creates, deletes, batches, uploads and failed items.

mod common;

use common::*;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value as Json, json};
use std::collections::BTreeSet;

/// The target of a `Link: <...>; rel="next"` header, if the reply has one.
fn next_link(r: &reqwest::Response) -> Option<String> {
    let v = r.headers().get("link")?.to_str().unwrap().to_string();
    let (target, rel) = v.split_once(';').expect("link has parameters");
    assert_eq!(rel.trim(), "rel=\"next\"", "{v}");
    let target = target.trim();
    assert!(target.starts_with('<') && target.ends_with('>'), "{v}");
    Some(target[1..target.len() - 1].to_string())
}

fn total(r: &reqwest::Response) -> i64 {
    r.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Query parameters of a link target.
fn query_of(target: &str) -> Vec<(String, String)> {
    let q = target.split_once('?').map(|(_, q)| q).unwrap_or("");
    serde_urlencoded::from_str(q).unwrap()
}

/// Follows `Link` headers from `path` and returns the ids of every page, in order.
async fn walk(app: &TestApp, path: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut next = Some(path.to_string());
    while let Some(p) = next {
        let r = app.admin(Method::GET, &p).send().await.unwrap();
        assert_eq!(r.status(), 200, "{p}");
        next = next_link(&r);
        let body: Json = r.json().await.unwrap();
        ids.extend(
            body.as_array()
                .unwrap()
                .iter()
                .map(|o| o["id"].as_i64().unwrap()),
        );
    }
    ids
}

/// `X-Total-Count` of `path` and the number of objects a full walk of it returns.
async fn counted(app: &TestApp, path: &str) -> (i64, usize) {
    let sep = if path.contains('?') { '&' } else { '?' };
    let r = app
        .admin(Method::GET, &format!("{path}{sep}limit=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let n = total(&r);
    (n, walk(app, &format!("{path}{sep}limit=10000")).await.len())
}

async fn assert_count(app: &TestApp, path: &str, expected: usize) {
    let (header, walked) = counted(app, path).await;
    assert_eq!(walked, expected, "objects listed at {path}");
    assert_eq!(header, expected as i64, "X-Total-Count of {path}");
}

async fn create_campaigns(app: &TestApp, n: usize, ty: i64) -> Vec<i64> {
    let items: Vec<Json> = (0..n)
        .map(|i| json!({"name": format!("c{i}"), "type": ty}))
        .collect();
    let r = app
        .admin(Method::POST, "/campaigns?bgrs=false")
        .json(&items)
        .send()
        .await
        .unwrap();
    let (s, body) = json(r).await;
    assert_eq!(s, 200, "{body}");
    body.as_array()
        .unwrap()
        .iter()
        .map(|item| {
            assert_eq!(item["status"], 200, "{item}");
            let obj: Json = serde_json::from_str(item["body"].as_str().unwrap()).unwrap();
            obj["id"].as_i64().unwrap()
        })
        .collect()
}

#[tokio::test]
async fn link_header_while_more_rows_follow_and_not_on_the_last_page() {
    let app = spawn_app().await;
    let ids = create_campaigns(&app, 5, 1).await;

    // Pages of 2: two pages with a link, the last without.
    let r = app
        .admin(Method::GET, "/v2.5/campaigns?limit=2&type=1")
        .send()
        .await
        .unwrap();
    assert_eq!(total(&r), 5);
    let link = next_link(&r).expect("more rows follow");
    assert!(link.starts_with("/v2.5/campaigns?"), "{link}");
    let q = query_of(&link);
    assert!(q.contains(&("limit".into(), "2".into())), "{link}");
    assert!(q.contains(&("type".into(), "1".into())), "{link}");
    assert!(q.iter().any(|(k, _)| k == "cursor"), "{link}");
    let body: Json = r.json().await.unwrap();
    assert_eq!(body.as_array().unwrap().len(), 2);
    assert_eq!(walk(&app, "/v2.5/campaigns?limit=2&type=1").await, ids);

    // A page that ends exactly at the last row has no link, nor has a short page.
    let r = app
        .admin(Method::GET, "/campaigns?limit=5")
        .send()
        .await
        .unwrap();
    assert_eq!(next_link(&r), None);
    let r = app
        .admin(Method::GET, "/campaigns?limit=4")
        .send()
        .await
        .unwrap();
    assert!(next_link(&r).is_some());
    let r = app
        .admin(Method::GET, "/campaigns?limit=10")
        .send()
        .await
        .unwrap();
    assert_eq!(next_link(&r), None);

    // From an offset page, the link drops `offset` and continues after that page's last row.
    let r = app
        .admin(Method::GET, "/campaigns?offset=1&limit=2&t=csv")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(total(&r), 5);
    let link = next_link(&r).expect("more rows follow");
    let q = query_of(&link);
    assert!(!q.iter().any(|(k, _)| k == "offset"), "{link}");
    assert!(q.contains(&("t".into(), "csv".into())), "{link}");
    let r = app.admin(Method::GET, &link).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(next_link(&r), None, "rows 4 and 5 end the list");
    let csv = r.text().await.unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    assert!(rows[0].starts_with(&format!("{},", ids[3])), "{csv}");
    assert!(rows[1].starts_with(&format!("{},", ids[4])), "{csv}");

    // `offset` keeps working on its own.
    let r = app
        .admin(Method::GET, "/campaigns?offset=3&limit=10")
        .send()
        .await
        .unwrap();
    let body: Json = r.json().await.unwrap();
    let got: Vec<i64> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_i64().unwrap())
        .collect();
    assert_eq!(got, ids[3..]);
    app.stop().await;
}

#[tokio::test]
async fn a_malformed_cursor_is_a_400() {
    let app = spawn_app().await;
    create_campaigns(&app, 3, 1).await;
    for q in [
        "cursor=",
        "cursor=not-a-cursor",
        "cursor=%5B1%5D",
        "cursor=WyJhIl0",
        "cursor=WzEsMl0",
        "cursor=e30",
    ] {
        let r = app
            .admin(Method::GET, &format!("/campaigns?{q}"))
            .send()
            .await
            .unwrap();
        let (s, body) = json(r).await;
        assert_eq!(s, 400, "{q}: {body}");
        assert_eq!(error_code(&body), "validation_failed", "{q}");
        assert!(body["fields"]["cursor"].is_string(), "{body}");
    }
    // A real cursor next to an offset is ambiguous.
    let r = app
        .admin(Method::GET, "/campaigns?limit=1")
        .send()
        .await
        .unwrap();
    let link = next_link(&r).unwrap();
    let r = app
        .admin(Method::GET, &format!("{link}&offset=1"))
        .send()
        .await
        .unwrap();
    let (s, body) = json(r).await;
    assert_eq!(s, 400, "{body}");
    error_code(&body);
    app.stop().await;
}

#[tokio::test]
async fn a_cursor_walk_while_rows_are_created_returns_every_earlier_row_once() {
    let app = std::sync::Arc::new(spawn_app().await);
    let before = create_campaigns(&app, 300, 1).await;

    let writer = {
        let app = app.clone();
        tokio::spawn(async move {
            let mut created = Vec::new();
            for i in 0..150 {
                let c = app
                    .create("campaigns", json!({"name": format!("late {i}"), "type": 1}))
                    .await;
                created.push(c["id"].as_i64().unwrap());
                if i % 10 == 9 {
                    // Deleting rows created meanwhile must not shift the walk either.
                    let r = app
                        .admin(Method::DELETE, &format!("/campaigns/{}", created[i - 5]))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 200);
                }
            }
            created
        })
    };
    let mut seen = Vec::new();
    let mut next = Some("/campaigns?limit=7&type=1".to_string());
    let mut pages = 0;
    while let Some(p) = next {
        let r = app.admin(Method::GET, &p).send().await.unwrap();
        assert_eq!(r.status(), 200, "{p}");
        next = next_link(&r);
        let body: Json = r.json().await.unwrap();
        let page: Vec<i64> = body
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_i64().unwrap())
            .collect();
        // Deleting a row the walk has passed must not make it skip or repeat any other row
        // (as a walk by `offset` would).
        if let Some(passed) = page.first().filter(|id| before.contains(id)) {
            let r = app
                .admin(Method::DELETE, &format!("/campaigns/{passed}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
        }
        seen.extend(page);
        pages += 1;
    }
    let late = writer.await.unwrap();
    assert!(pages > 40, "the walk took {pages} pages");
    let unique: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "no row twice");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in id order");
    for id in &before {
        assert!(unique.contains(id), "row {id} existed when the walk began");
    }
    // Rows created meanwhile may or may not be seen; nothing else is.
    let late: BTreeSet<i64> = late.into_iter().collect();
    for id in &seen {
        assert!(
            before.contains(id) || late.contains(id),
            "row {id} was never created"
        );
    }
    std::sync::Arc::try_unwrap(app).ok().unwrap().stop().await;
}

fn upload_form(csv: &str) -> Form {
    Form::new().text("entity", "markers").part(
        "csvfile",
        Part::bytes(csv.as_bytes().to_vec()).file_name("markers.csv"),
    )
}

#[tokio::test]
async fn total_count_stays_exact_through_every_kind_of_write() {
    let app = spawn_app().await;
    assert_count(&app, "/markers", 0).await;
    let c1 = app.create("campaigns", json!({"name": "one"})).await["id"]
        .as_i64()
        .unwrap();
    let c2 = app
        .create("campaigns", json!({"name": "two", "type": 2}))
        .await["id"]
        .as_i64()
        .unwrap();
    assert_count(&app, "/campaigns", 2).await;

    // Single creates and deletes.
    let mut markers = Vec::new();
    for i in 0..4 {
        let m = app
            .create(
                "markers",
                json!({"name": format!("m{i}"), "campaign_id": c1}),
            )
            .await;
        markers.push(m["id"].as_i64().unwrap());
    }
    assert_count(&app, "/markers", 4).await;
    let r = app
        .admin(
            Method::DELETE,
            &format!("/markers/{}", markers.pop().unwrap()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_count(&app, "/markers", 3).await;

    // A failed single create (missing reference) and a refused delete (still referenced).
    let r = app
        .admin(Method::POST, "/markers")
        .json(&json!({"name": "orphan", "campaign_id": 999_999}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = app
        .admin(Method::DELETE, &format!("/campaigns/{c1}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    assert_count(&app, "/markers", 3).await;
    assert_count(&app, "/campaigns", 2).await;

    // A synchronous batch where some items fail at the database: their savepoints roll back.
    let items: Vec<Json> = (0..40)
        .map(|i| {
            let campaign = if i % 4 == 3 { 999_999 } else { c2 };
            json!({"name": format!("b{i}"), "campaign_id": campaign})
        })
        .collect();
    let r = app
        .admin(Method::POST, "/markers?bgrs=false")
        .json(&items)
        .send()
        .await
        .unwrap();
    let (s, body) = json(r).await;
    assert_eq!(s, 200, "{body}");
    let ok = body
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["status"] == 200)
        .count();
    assert_eq!(ok, 30, "{body}");
    assert_count(&app, "/markers", 33).await;
    assert_count(&app, &format!("/markers?campaign_id={c2}"), 30).await;
    assert_count(&app, &format!("/markers?campaign_id={c1}"), 3).await;

    // A batch delete with ids that do not exist.
    let r = app
        .admin(Method::DELETE, "/markers?bgrs=false")
        .json(&json!([markers[0], 999_998, markers[1]]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_count(&app, "/markers", 31).await;

    // A background batch, with failing items too (other names: markers are keyed by
    // campaign and name).
    let items: Vec<Json> = items
        .into_iter()
        .map(|mut i| {
            i["name"] = json!(format!("bg-{}", i["name"].as_str().unwrap()));
            i
        })
        .collect();
    let r = app
        .admin(Method::POST, "/markers")
        .json(&items)
        .send()
        .await
        .unwrap();
    let (s, body) = json(r).await;
    assert_eq!(s, 202, "{body}");
    app.wait_finished(body["request"].as_str().unwrap()).await;
    assert_count(&app, "/markers", 61).await;

    // An upload: creates, a failing create, a delete, a failing delete.
    let csv = format!(
        "op,id,name,campaign_id\nc,,u1,{c2}\nc,,u2,{c2}\nc,,bad,999999\nd,{},,\nd,999997,,\n",
        markers[2]
    );
    let r = app
        .admin(Method::POST, "/tools/uploader.ex.php")
        .multipart(upload_form(&csv))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let result = r.text().await.unwrap();
    assert_eq!(result.matches("OK").count(), 3, "{result}");
    assert_count(&app, "/markers", 62).await;
    assert_count(&app, &format!("/markers?campaign_id={c2}"), 62).await;
    assert_count(&app, &format!("/markers?campaign_id={c1}&name=m2"), 0).await;
    assert_count(&app, "/markers?name=u1", 1).await;

    // Filtered counts follow the filter, also across pages of a walk.
    let (header, walked) = counted(&app, &format!("/markers?campaign_id={c2}&limit=7")).await;
    assert_eq!((header, walked), (62, 62));
    assert_count(&app, "/campaigns?type=2", 1).await;
    app.stop().await;
}

#[tokio::test]
async fn rows_written_by_another_program_while_stopped_are_counted_at_the_next_start() {
    use entiserve::storage::{self, Value};
    let app = spawn_app().await;
    create_campaigns(&app, 3, 1).await;
    assert_count(&app, "/campaigns", 3).await;
    let (dir, entities, db) = app.stop_keeping().await;
    let url = match &db {
        Some(d) => d.url.clone(),
        None => format!(
            "sqlite://{}",
            dir.path().join("data/entiserve.db").display()
        ),
    };
    {
        let store = storage::connect(&url).await.unwrap();
        let sql = "INSERT INTO \"campaigns\" (\"name\", \"created_dt\", \"updated_dt\") \
                   VALUES ($1, '2026-01-01 00:00:00', '2026-01-01 00:00:00')";
        let sql = if db.is_none() {
            sql.replace("$1", "?1")
        } else {
            sql.to_string()
        };
        for name in ["outside 1", "outside 2"] {
            store.execute(&sql, &[Value::text(name)]).await.unwrap();
        }
        store
            .execute(
                "DELETE FROM \"campaigns\" WHERE \"name\" = 'outside 1'",
                &[],
            )
            .await
            .unwrap();
        store.close().await;
    }
    let (s, _) = test_settings(dir.path(), &entities).await;
    let mut s = s;
    s.database_url = db.as_ref().map(|d| d.url.clone());
    let app = start(dir, entities, s, db).await;
    assert_count(&app, "/campaigns", 4).await;
    create_campaigns(&app, 2, 1).await;
    assert_count(&app, "/campaigns", 6).await;
    app.stop().await;
}
