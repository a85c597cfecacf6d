//! Single calls that arrive together: creates and reads by id sent at the same moment (which
//! PostgreSQL answers with statements they share) each get the outcome they would have had
//! alone: their own object, their own conflict or missing reference, their own 404.

mod common;

use common::*;
use futures::future::join_all;
use reqwest::Method;
use serde_json::{Value as Json, json};

const NAMED: usize = 40;
const SAME_NAME: usize = 10;
const NO_CAMPAIGN: usize = 10;
const CAMPAIGNS: usize = 10;

#[tokio::test]
async fn creates_and_reads_sent_together_each_get_their_own_outcome() {
    let server = spawn_app().await;
    let app = &server;
    let campaign = app.create("campaigns", json!({"name": "home"})).await["id"]
        .as_i64()
        .unwrap();

    // Markers of distinct names, markers all named alike (one key), markers of a campaign that
    // does not exist, and campaigns (another entity), all at once.
    let mut bodies: Vec<(&str, Json)> = Vec::new();
    for i in 0..NAMED {
        bodies.push((
            "markers",
            json!({"name": format!("m{i}"), "campaign_id": campaign}),
        ));
    }
    for _ in 0..SAME_NAME {
        bodies.push(("markers", json!({"name": "same", "campaign_id": campaign})));
    }
    for i in 0..NO_CAMPAIGN {
        bodies.push((
            "markers",
            json!({"name": format!("x{i}"), "campaign_id": 999_999}),
        ));
    }
    for i in 0..CAMPAIGNS {
        bodies.push(("campaigns", json!({"name": format!("c{i}"), "type": 2})));
    }
    let sent = bodies.iter().map(|(entity, body)| async move {
        json(
            app.admin(Method::POST, &format!("/{entity}"))
                .json(body)
                .send()
                .await
                .unwrap(),
        )
        .await
    });
    let answers = join_all(sent).await;

    let mut created: Vec<Json> = Vec::new();
    let (mut same_ok, mut same_taken) = (0, 0);
    for ((entity, body), (s, b)) in bodies.iter().zip(&answers) {
        let name = body["name"].as_str().unwrap();
        if name == "same" {
            match s {
                200 => same_ok += 1,
                409 => {
                    assert_eq!(error_code(b), "conflict", "{b}");
                    same_taken += 1;
                }
                _ => panic!("a marker of a taken key: {s} {b}"),
            }
        } else if body["campaign_id"] == 999_999 {
            assert_eq!(
                (*s, error_code(b).as_str()),
                (400, "invalid_reference"),
                "{b}"
            );
            continue;
        } else {
            assert_eq!(*s, 200, "{entity} {body}: {b}");
        }
        if *s == 200 {
            // Its own object, not another's.
            assert_eq!(b["name"], body["name"], "{b}");
            if *entity == "campaigns" {
                assert_eq!(b["type"], 2, "{b}");
            } else {
                assert_eq!(b["campaign_id"], campaign, "{b}");
            }
            created.push(json!({"entity": entity, "object": b}));
        }
    }
    assert_eq!((same_ok, same_taken), (1, SAME_NAME - 1));
    let mut ids: Vec<(String, i64)> = created
        .iter()
        .map(|c| {
            (
                c["entity"].as_str().unwrap().to_string(),
                c["object"]["id"].as_i64().unwrap(),
            )
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        created.len(),
        "every create has an id of its own"
    );

    // Nothing else was written: the counts are those of the successful creates.
    for (entity, n) in [("markers", NAMED + 1), ("campaigns", CAMPAIGNS + 1)] {
        let r = app
            .admin(Method::GET, &format!("/{entity}?limit=1"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["x-total-count"], n.to_string().as_str());
    }

    // Every object read at once, with ids that name nothing between them.
    let mut reads: Vec<(String, Option<Json>)> = created
        .iter()
        .map(|c| {
            let path = format!("/{}/{}", c["entity"].as_str().unwrap(), c["object"]["id"]);
            (path, Some(c["object"].clone()))
        })
        .collect();
    for id in [999_991, 999_992, 999_993] {
        reads.push((format!("/markers/{id}"), None));
        reads.push((format!("/campaigns/{id}"), None));
    }
    let sent = reads
        .iter()
        .map(|(path, _)| async { json(app.admin(Method::GET, path).send().await.unwrap()).await });
    for ((path, want), (s, b)) in reads.iter().zip(join_all(sent).await) {
        match want {
            Some(obj) => assert_eq!((s, &b), (200, obj), "{path}"),
            None => assert_eq!((s, error_code(&b).as_str()), (404, "not_found"), "{path}"),
        }
    }
    server.stop().await;
}
