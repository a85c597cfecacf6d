//! Test support: a real server on port 0 with a fresh database (a temp SQLite file, or a new
//! uniquely named PostgreSQL database when `TEST_DATABASE_URL` is set).
#![allow(dead_code)]

pub mod process;
pub mod sse;
pub mod upload;
pub mod zips;

use entiserve::plugins::Registry;
use entiserve::settings::Settings;
use reqwest::{Client, Method, RequestBuilder, Response};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

pub const ADMIN_PASSWORD: &str = "admin-secret";

/// A running server and what a test needs to talk to it.
pub struct TestApp {
    pub base: String,
    pub client: Client,
    pub dir: TempDir,
    pub entities: PathBuf,
    pub db: Option<PgDb>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<()>>,
}

/// A throwaway PostgreSQL database, dropped with the test.
pub struct PgDb {
    pub admin_url: String,
    pub name: String,
    pub url: String,
}

impl PgDb {
    pub async fn create(admin_url: &str) -> PgDb {
        use sqlx::Connection;
        let name = format!("entiserve_test_{}", hex::encode(rand::random::<[u8; 6]>()));
        let mut conn = sqlx::PgConnection::connect(admin_url)
            .await
            .expect("connect to TEST_DATABASE_URL");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut conn)
            .await
            .expect("create test database");
        let base = admin_url
            .rsplit_once('/')
            .map(|(b, _)| b)
            .unwrap_or(admin_url);
        PgDb {
            admin_url: admin_url.to_string(),
            url: format!("{base}/{name}"),
            name,
        }
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let (url, name) = (self.admin_url.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                use sqlx::Connection;
                if let Ok(mut c) = sqlx::PgConnection::connect(&url).await {
                    let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                    let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut c).await;
                }
            })
        })
        .join();
    }
}

/// The database URL of a server whose data directory is under `dir` (or of `db`).
pub fn database_url(dir: &Path, db: &Option<PgDb>) -> String {
    match db {
        Some(d) => d.url.clone(),
        None => format!("sqlite://{}", dir.join("data/entiserve.db").display()),
    }
}

/// A fresh PostgreSQL database when `TEST_DATABASE_URL` names a server, else None (SQLite).
pub async fn test_pg() -> Option<PgDb> {
    match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => Some(PgDb::create(&u).await),
        _ => None,
    }
}

/// Sends `body` as the admin, as JSON text exactly as written (no float on the way).
pub async fn send_raw(app: &TestApp, m: Method, path: &str, body: &str) -> (u16, Json) {
    json(
        app.admin(m, path)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// The body of `GET path` as the admin, as text (to see numbers as the server wrote them).
pub async fn get_text(app: &TestApp, path: &str) -> String {
    let r = app.admin(Method::GET, path).send().await.unwrap();
    r.text().await.unwrap()
}

/// How many objects of `entity` there are (`x-total-count`).
pub async fn count(app: &TestApp, entity: &str) -> i64 {
    let r = app
        .admin(Method::GET, &format!("/{entity}?limit=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// How many campaigns, markers and assets there are: what a bundle upload makes.
pub async fn bundle_counts(app: &TestApp) -> [i64; 3] {
    [
        count(app, "campaigns").await,
        count(app, "markers").await,
        count(app, "assets").await,
    ]
}

/// Every regular file below `dir` (none when it does not exist).
pub fn files_below(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The shipped entity files.
pub fn shipped_entities() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("entities")
}

/// Settings for a test server in `dir`.
pub async fn test_settings(dir: &Path, entities: &Path) -> (Settings, Option<PgDb>) {
    let mut s = Settings::new(dir.join("data"), entities);
    s.bind = "127.0.0.1:0".parse().unwrap();
    s.admin_password = Some(ADMIN_PASSWORD.into());
    s.shutdown_grace = std::time::Duration::from_secs(2);
    // PDFs are read by the real binary's `pdf-pages` child, not by the test executable.
    s.helper_exe = PathBuf::from(env!("CARGO_BIN_EXE_entiserve"));
    let db = match std::env::var("TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => Some(PgDb::create(&u).await),
        _ => None,
    };
    s.database_url = db.as_ref().map(|d| d.url.clone());
    // TEST_STORAGE_URL (an object store, e.g. SeaweedFS's s3://bucket) keeps each test
    // server's files under a prefix of its own there instead of in its data directory.
    if let Ok(u) = std::env::var("TEST_STORAGE_URL")
        && !u.is_empty()
    {
        let tag = hex::encode(rand::random::<[u8; 6]>());
        s.storage_url = Some(format!("{}/t-{tag}", u.trim_end_matches('/')));
    }
    (s, db)
}

/// Starts a server on the shipped entities.
pub async fn spawn_app() -> TestApp {
    spawn_with(|_| {}).await
}

/// Starts a server; `adjust` may change the settings (its entities dir is a copy of the
/// shipped one, free to edit).
pub async fn spawn_with(adjust: impl FnOnce(&mut Settings)) -> TestApp {
    spawn_with_plugins(Registry::builtin(), adjust).await
}

/// [`spawn_with`], the server built with the plugins of `plugins`.
pub async fn spawn_with_plugins(plugins: Registry, adjust: impl FnOnce(&mut Settings)) -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    let entities = dir.path().join("entities");
    std::fs::create_dir_all(&entities).unwrap();
    for e in std::fs::read_dir(shipped_entities()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, entities.join(p.file_name().unwrap())).unwrap();
    }
    let (mut s, db) = test_settings(dir.path(), &entities).await;
    adjust(&mut s);
    start_with(dir, entities, s, db, plugins).await
}

pub async fn start(dir: TempDir, entities: PathBuf, s: Settings, db: Option<PgDb>) -> TestApp {
    start_with(dir, entities, s, db, Registry::builtin()).await
}

async fn start_with(
    dir: TempDir,
    entities: PathBuf,
    s: Settings,
    db: Option<PgDb>,
    plugins: Registry,
) -> TestApp {
    let app = entiserve::App::build_with(s, plugins)
        .await
        .expect("server builds");
    let base = format!("http://{}", app.addr());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        app.run_until(async {
            let _ = rx.await;
        })
        .await
        .expect("server runs");
    });
    TestApp {
        base,
        client: Client::new(),
        dir,
        entities,
        db,
        shutdown: Some(tx),
        handle: Some(handle),
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A request as `admin`.
    pub fn admin(&self, m: Method, path: &str) -> RequestBuilder {
        self.client
            .request(m, self.url(path))
            .basic_auth("admin", Some(ADMIN_PASSWORD))
    }

    /// A request as `login` with `password`.
    pub fn as_user(&self, login: &str, password: &str, m: Method, path: &str) -> RequestBuilder {
        self.client
            .request(m, self.url(path))
            .basic_auth(login, Some(password))
    }

    /// Creates a user with role `user` and returns its id.
    pub async fn create_user(&self, login: &str, password: &str) -> i64 {
        let r = self
            .admin(Method::POST, "/users")
            .json(&serde_json::json!({"login": login, "password": password}))
            .send()
            .await
            .unwrap();
        let (s, b) = json(r).await;
        assert_eq!(s, 200, "{b}");
        b["id"].as_i64().unwrap()
    }

    /// Creates an object as admin and returns it.
    pub async fn create(&self, entity: &str, body: Json) -> Json {
        let r = self
            .admin(Method::POST, &format!("/{entity}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let (s, b) = json(r).await;
        assert_eq!(s, 200, "create {entity}: {b}");
        b
    }

    /// `GET /bgrs/<rid>` as the admin: the status and the request's record (null when there
    /// is none).
    pub async fn bg_record(&self, rid: &str) -> (u16, Json) {
        let (s, b) = json(
            self.admin(Method::GET, &format!("/bgrs/{rid}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        (s, b[0].clone())
    }

    /// Polls `GET /bgrs/<rid>` until the request has ended (finished or cancelled) and
    /// returns its record; panics after `limit`.
    pub async fn wait_ended(&self, rid: &str, limit: std::time::Duration) -> Json {
        let start = std::time::Instant::now();
        loop {
            let (s, rec) = self.bg_record(rid).await;
            assert_eq!(s, 200, "{rec}");
            if rec["status_id"] != "2" {
                return rec;
            }
            assert!(
                start.elapsed() < limit,
                "request {rid} did not finish: {rec}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// [`TestApp::wait_ended`] within two minutes, for a request that must finish (not be
    /// cancelled): its record.
    pub async fn wait_finished(&self, rid: &str) -> Json {
        let rec = self
            .wait_ended(rid, std::time::Duration::from_secs(120))
            .await;
        assert_eq!(rec["status_id"], "4", "request {rid} did not finish: {rec}");
        rec
    }

    /// The stored result of an ended request, as text.
    pub async fn result_text(&self, rid: &str) -> String {
        let r = self
            .admin(Method::GET, &format!("/v2.5/bgrs/{rid}/result"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.text().await.unwrap()
    }

    /// The name of every campaign, by id.
    pub async fn campaign_names(&self) -> std::collections::BTreeMap<i64, String> {
        let (s, b) = json(
            self.admin(Method::GET, "/campaigns?limit=10000")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        b.as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["id"].as_i64().unwrap(),
                    c["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    pub async fn stop(self) {
        self.stop_keeping().await;
    }

    /// Stops the server and hands back its directory, entities and database, for a restart
    /// with [`start`].
    pub async fn stop_keeping(mut self) -> (TempDir, PathBuf, Option<PgDb>) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = h.await;
        }
        (self.dir, self.entities, self.db)
    }
}

/// Status and JSON body of a response.
pub async fn json(r: Response) -> (u16, Json) {
    let s = r.status().as_u16();
    let text = r.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({s}): {text}"));
    (s, body)
}

/// Asserts the contract's error shape and returns the code.
pub fn error_code(body: &Json) -> String {
    let obj = body.as_object().expect("error body is an object");
    assert!(obj["description"].is_string(), "{body}");
    for k in obj.keys() {
        assert!(
            ["error", "description", "fields"].contains(&k.as_str()),
            "unexpected key {k} in {body}"
        );
    }
    obj["error"].as_str().unwrap().to_string()
}

/// Every details entry of request `rid`, walking the pages of `GET /bgrs/<rid>/details`.
pub async fn all_details(app: &TestApp, rid: &str) -> Vec<Json> {
    let mut all: Vec<Json> = Vec::new();
    loop {
        let since = all.last().map_or("0", |e| e["id"].as_str().unwrap());
        let (s, page) = json(
            app.admin(Method::GET, &format!("/bgrs/{rid}/details?since={since}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 200, "{page}");
        let page = page.as_array().unwrap().clone();
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}

/// Every `$ref` inside `v`, in document order.
pub fn json_refs(v: &Json) -> Vec<String> {
    fn walk(v: &Json, out: &mut Vec<String>) {
        match v {
            Json::Object(m) => {
                if let Some(Json::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|v| walk(v, out));
            }
            Json::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

/// What a local `$ref` (`#/components/...`) names in `doc`; `Null` when nothing.
pub fn resolve_ref<'a>(doc: &'a Json, r: &str) -> &'a Json {
    r.trim_start_matches("#/")
        .split('/')
        .fold(doc, |o, k| &o[k])
}

/// `GET /openapi.json`, without credentials (none are needed).
pub async fn openapi_document(app: &TestApp) -> Json {
    let r = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "no credentials needed");
    r.json().await.unwrap()
}

/// Polls `check` every 100 ms until it holds, failing after `limit`.
pub async fn eventually<F, Fut>(what: &str, limit: std::time::Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "timed out waiting for: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
