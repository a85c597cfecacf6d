//! The browser tools (`/tools/uploader`, `/tools/requests`, `/tools/data`, `/docs`) driven in
//! headless Chromium through chromedriver at 1366x768: sign in, upload a 20,000-row CSV and
//! follow it to the end, download the result, see a broken file refused, list the request; then
//! the console ([`console`]): create, edit and delete on the data page, a multi-delete and its
//! undo, an upload's failed rows, the requests page's width, a request sent from `/docs`.
//! Screenshots of each state go to `target/screenshots/`, the console's to the book.
//!
//! Needs `/usr/bin/chromedriver` and `/usr/bin/chromium` (Debian: `apt-get install chromium
//! chromium-driver`). Without them the test says so and passes, unless `ENTISERVE_REQUIRE_BROWSER`
//! is set (CI sets it), in which case it fails.
//!
//! The WebDriver protocol (W3C) is spoken here directly over reqwest: the few commands the test
//! needs are plain JSON over HTTP.

mod common;
#[path = "browser/console.rs"]
mod console;

use common::*;
use futures::FutureExt;
use reqwest::Method;
use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
const ROWS: usize = 20_000;
/// The W3C WebDriver key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver on a free port, killed (by its pid) when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start(log: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = http.get(format!("{}/status", driver.url)).send().await
                && r.status().is_success()
            {
                return driver;
            }
            assert!(Instant::now() < deadline, "chromedriver did not answer");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One WebDriver session.
#[derive(Clone)]
struct Browser {
    http: reqwest::Client,
    session: String,
    shots: PathBuf,
}

impl Browser {
    async fn open(driver: &Driver, shots: PathBuf, downloads: &Path) -> Browser {
        let http = reqwest::Client::new();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1366,768",
                         "--hide-scrollbars"],
                "prefs": {
                    "download.default_directory": downloads,
                    "download.prompt_for_download": false,
                },
            },
        }}});
        let r = http
            .post(format!("{}/session", driver.url))
            .json(&caps)
            .send()
            .await
            .expect("new session");
        let body: Json = r.json().await.unwrap();
        let id = body["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {body}"))
            .to_string();
        let b = Browser {
            http,
            session: format!("{}/session/{id}", driver.url),
            shots,
        };
        b.viewport(1366, 768).await;
        b
    }

    /// Sizes the window so that the page itself gets `width` x `height`.
    async fn viewport(&self, width: i64, height: i64) {
        for _ in 0..3 {
            let inner = self
                .js("return [window.innerWidth, window.innerHeight];", json!([]))
                .await;
            let (w, h) = (inner[0].as_i64().unwrap(), inner[1].as_i64().unwrap());
            if (w, h) == (width, height) {
                return;
            }
            let rect = self.cmd(Method::GET, "/window/rect", None).await.unwrap();
            let (ow, oh) = (
                rect["width"].as_i64().unwrap(),
                rect["height"].as_i64().unwrap(),
            );
            self.cmd(
                Method::POST,
                "/window/rect",
                Some(json!({"width": ow + width - w, "height": oh + height - h})),
            )
            .await
            .unwrap();
        }
    }

    async fn cmd(&self, m: Method, path: &str, body: Option<Json>) -> Result<Json, String> {
        let mut req = self.http.request(m, format!("{}{path}", self.session));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.map_err(|e| e.to_string())?;
        let ok = r.status().is_success();
        let body: Json = r.json().await.map_err(|e| e.to_string())?;
        if ok {
            Ok(body["value"].clone())
        } else {
            Err(format!("{path}: {}", body["value"]))
        }
    }

    async fn close(&self) {
        let _ = self.cmd(Method::DELETE, "", None).await;
    }

    async fn goto(&self, url: &str) {
        self.cmd(Method::POST, "/url", Some(json!({ "url": url })))
            .await
            .unwrap();
    }

    async fn find(&self, css: &str) -> Result<String, String> {
        let v = self
            .cmd(
                Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await?;
        Ok(v[ELEMENT].as_str().unwrap_or_default().to_string())
    }

    async fn click(&self, css: &str) {
        let e = self.find(css).await.unwrap();
        self.cmd(
            Method::POST,
            &format!("/element/{e}/click"),
            Some(json!({})),
        )
        .await
        .unwrap_or_else(|err| panic!("click {css}: {err}"));
    }

    async fn clear(&self, css: &str) {
        let e = self.find(css).await.unwrap();
        self.cmd(
            Method::POST,
            &format!("/element/{e}/clear"),
            Some(json!({})),
        )
        .await
        .unwrap_or_else(|err| panic!("clear {css}: {err}"));
    }

    async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await.unwrap();
        self.cmd(
            Method::POST,
            &format!("/element/{e}/value"),
            Some(json!({ "text": text })),
        )
        .await
        .unwrap_or_else(|err| panic!("type into {css}: {err}"));
    }

    /// Runs `script` (a function body; `arguments` are `args`) and returns its value.
    async fn js(&self, script: &str, args: Json) -> Json {
        self.cmd(
            Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
        .unwrap_or_else(|e| panic!("script failed: {e}"))
    }

    /// Runs an asynchronous script: it ends by calling `arguments[arguments.length - 1]`.
    async fn js_async(&self, script: &str, args: Json) -> Json {
        self.cmd(
            Method::POST,
            "/execute/async",
            Some(json!({"script": script, "args": args})),
        )
        .await
        .unwrap_or_else(|e| panic!("async script failed: {e}"))
    }

    /// The text of the element `css`, or `None` when it is missing or hidden.
    async fn visible_text(&self, css: &str) -> Option<String> {
        let v = self
            .js(
                "const e = document.querySelector(arguments[0]);
                 return e && e.offsetParent !== null ? e.textContent : null;",
                json!([css]),
            )
            .await;
        v.as_str().map(str::to_string)
    }

    /// Polls `script` until it returns something other than `null` or `false`.
    async fn wait_js(&self, what: &str, secs: u64, script: &str, args: Json) -> Json {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let v = self.js(script, args.clone()).await;
            if !v.is_null() && v != json!(false) {
                return v;
            }
            if Instant::now() > deadline {
                self.screenshot("timeout").await;
                panic!("timed out waiting for {what}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_visible(&self, css: &str, secs: u64) -> String {
        let v = self
            .wait_js(
                css,
                secs,
                "const e = document.querySelector(arguments[0]);
                 return e && e.offsetParent !== null ? e.textContent : null;",
                json!([css]),
            )
            .await;
        v.as_str().unwrap_or_default().to_string()
    }

    async fn screenshot(&self, name: &str) {
        use base64::Engine;
        let Ok(v) = self.cmd(Method::GET, "/screenshot", None).await else {
            return;
        };
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .expect("a base64 PNG");
        assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }
}

/// `n` with thousands separated by commas, as the pages show counts.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Starts the upload chosen on the upload page, once its Start button is enabled.
async fn start_upload(b: &Browser) {
    b.wait_js(
        "an enabled Start",
        10,
        "return !document.getElementById('start').disabled;",
        json!([]),
    )
    .await;
    b.click("#start").await;
}

fn csv_rows(text: &str) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .delimiter(b';')
        .has_headers(false)
        .from_reader(text.as_bytes())
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

/// Asserts a result CSV: the header starts with `res`, and all `ROWS` rows are `OK` with an id.
fn assert_all_ok(text: &str) {
    let rows = csv_rows(text.trim_start_matches('\u{feff}'));
    assert_eq!(rows[0][0], "res", "header {:?}", rows[0]);
    assert_eq!(rows.len(), ROWS + 1);
    for (i, r) in rows[1..].iter().enumerate() {
        assert_eq!(r[0], "OK", "row {}: {r:?}", i + 1);
        assert!(
            r[1].parse::<i64>().is_ok(),
            "row {} has an id: {r:?}",
            i + 1
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upload_page_and_requests_page_in_a_browser() {
    if !Path::new(CHROMEDRIVER).exists() {
        if std::env::var_os("ENTISERVE_REQUIRE_BROWSER").is_some() {
            panic!(
                "{CHROMEDRIVER} is missing and ENTISERVE_REQUIRE_BROWSER is set: \
                 apt-get install chromium chromium-driver"
            );
        }
        eprintln!(
            "SKIPPED: the browser test needs {CHROMEDRIVER} and {CHROMIUM} \
             (apt-get install chromium chromium-driver); set ENTISERVE_REQUIRE_BROWSER=1 to fail instead"
        );
        return;
    }
    let app = spawn_app().await;
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let driver = Driver::start(&app.dir.path().join("chromedriver.log")).await;
    let downloads = app.dir.path().join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let browser = Browser::open(&driver, shots, &downloads).await;

    let console_app = spawn_with(|s| {
        std::fs::write(s.entities_dir.join("products.yaml"), console::PRODUCTS).unwrap();
        std::fs::write(s.entities_dir.join("regions.yaml"), console::REGIONS).unwrap();
    })
    .await;
    let both = async {
        scenario(&app, &browser).await;
        console::scenario(&console_app, &browser).await;
    };
    let outcome = tokio::time::timeout(
        Duration::from_secs(900),
        std::panic::AssertUnwindSafe(both).catch_unwind(),
    )
    .await;
    browser.close().await;
    drop(driver);
    app.stop().await;
    console_app.stop().await;
    match outcome {
        Err(_) => panic!("the browser test took more than 15 minutes"),
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Ok(Ok(())) => {}
    }
}

async fn scenario(app: &TestApp, b: &Browser) {
    let started = Instant::now();

    // The pages are static shells: no credentials, both prefixes, the entities rendered in.
    for path in ["/tools/uploader", "/v2.5/tools/uploader"] {
        let r = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        let html = r.text().await.unwrap();
        for option in ["id=\"dry-run\"", "id=\"atomic\""] {
            assert!(html.contains(option), "{path}: {option}");
        }
        for e in ["campaigns", "markers", "assets", "users"] {
            assert!(
                html.contains(&format!("<option value=\"{e}\">")),
                "{path}: {e}"
            );
        }
    }
    for path in [
        "/tools/requests",
        "/v2.5/tools/requests",
        "/tools/assets/common.js",
        "/v2.5/tools/assets/uploader.js",
        "/tools/assets/common.css",
    ] {
        let r = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    let r = app
        .client
        .get(app.url("/tools/assets/nope.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = app
        .client
        .post(app.url("/tools/uploader"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "GET");

    // Sign in.
    b.goto(&app.url("/tools/uploader")).await;
    b.wait_visible("#login", 20).await;
    b.type_into("#login", "admin").await;
    b.type_into("#password", ADMIN_PASSWORD).await;
    b.click("#signin").await;
    let who = b.wait_visible("#whoami", 20).await;
    assert_eq!(who, "admin");
    assert!(b.visible_text("#signout").await.is_some());
    b.screenshot("01-uploader-signed-in").await;

    // A 20,000-row file, previewed in the page.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("campaigns20k.csv");
    let mut text = String::from("op;name;description\n");
    for n in 1..=ROWS {
        text.push_str(&format!("c;name {n};text {n}\n"));
    }
    std::fs::write(&file, &text).unwrap();
    b.click("#entity option[value=\"campaigns\"]").await;
    b.type_into("#file", file.to_str().unwrap()).await;
    let sep = b.wait_visible("#preview-sep", 10).await;
    assert_eq!(sep, ";");
    let head = b
        .js(
            "return [...document.querySelectorAll('#preview-table thead th')].map(t => t.textContent);",
            json!([]),
        )
        .await;
    assert_eq!(head, json!(["op", "name", "description"]));
    assert!(b.visible_text("#zip-options").await.is_none());

    // Start, and follow the progress bar.
    start_upload(b).await;
    let t0 = Instant::now();
    let mut seen: Vec<f64> = Vec::new();
    let mut running_shot = false;
    let mut max_details = 0usize;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let v = b
            .js(
                "const p = document.getElementById('progress');
                 const s = document.getElementById('summary');
                 return {
                   run: document.getElementById('run').hidden === false,
                   value: p.dataset.value,
                   details: document.querySelectorAll('#details li:not(.empty)').length,
                   count: document.getElementById('details').dataset.count || '0',
                   ok: s.hidden ? null : (s.dataset.ok || null),
                   error: document.getElementById('error').hidden ? null
                          : document.getElementById('error').textContent,
                 };",
                json!([]),
            )
            .await;
        assert!(
            v["error"].is_null(),
            "the upload was refused: {}",
            v["error"]
        );
        if v["run"] == json!(true) {
            let p: f64 = v["value"].as_str().unwrap_or("0").parse().unwrap();
            if seen.last() != Some(&p) {
                seen.push(p);
            }
            max_details = max_details.max(v["details"].as_u64().unwrap_or(0) as usize);
            if p < 100.0 && max_details > 0 && !running_shot {
                b.screenshot("02-uploader-running").await;
                running_shot = true;
            }
            if p >= 100.0 && v["ok"].is_string() {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the upload did not finish; progress seen {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let run_time = t0.elapsed();
    eprintln!("progress values seen: {seen:?} in {run_time:?}");
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "progress never goes down: {seen:?}"
    );
    assert_eq!(seen.last(), Some(&100.0));
    // Seen below 100 while running; or, if it ran faster than the page was read, the log lines
    // arrived all the same.
    let saw_running = seen.iter().any(|p| *p < 100.0);
    if !saw_running {
        eprintln!("the upload finished before the page showed less than 100 %");
    }
    assert!(max_details > 0, "the log lines were shown");
    let shown = b
        .js(
            "return [...document.querySelectorAll('#details li')].map(l => l.textContent);",
            json!([]),
        )
        .await;
    let shown: Vec<String> = serde_json::from_value(shown).unwrap();
    assert!(shown.len() <= 10 && !shown.is_empty(), "{shown:?}");
    assert!(shown.last().unwrap().ends_with("done"), "{shown:?}");
    assert!(
        shown
            .iter()
            .any(|l| l.contains("Line: 20000 done. Result: 200")),
        "{shown:?}"
    );
    let count = b
        .js(
            "return document.getElementById('details').dataset.count;",
            json!([]),
        )
        .await;
    assert!(
        count.as_str().unwrap().parse::<usize>().unwrap() >= ROWS + 2,
        "every log line arrived: {count}"
    );

    // The summary and the result file.
    let summary = b
        .js(
            "const s = document.getElementById('summary');
             return {ok: s.dataset.ok, failed: s.dataset.failed, text: s.textContent};",
            json!([]),
        )
        .await;
    assert_eq!(summary["ok"], "20000", "{summary}");
    assert_eq!(summary["failed"], "0", "{summary}");
    let summary_text = summary["text"].as_str().unwrap();
    assert!(
        summary_text.contains("20,000 rows OK") && summary_text.contains("0 rows failed"),
        "{summary_text}"
    );
    b.wait_visible("#download", 10).await;
    let link = b
        .js(
            "const a = document.getElementById('download');
             return {href: a.href, name: a.download};",
            json!([]),
        )
        .await;
    assert!(
        link["href"].as_str().unwrap().starts_with("blob:"),
        "{link}"
    );
    assert_eq!(link["name"], "campaigns20k.csvres.csv");
    assert!(
        b.visible_text("#cancel").await.is_none(),
        "no Cancel once finished"
    );
    b.screenshot("03-uploader-finished").await;

    let blob = b
        .js_async(
            "const done = arguments[arguments.length - 1];
             fetch(document.getElementById('download').href)
               .then(r => r.text()).then(done, e => done('ERROR ' + e));",
            json!([]),
        )
        .await;
    assert_all_ok(blob.as_str().unwrap());

    let rid = b
        .js(
            "return JSON.parse(sessionStorage.getItem('entiserve.upload')).rid;",
            json!([]),
        )
        .await;
    let rid = rid.as_str().unwrap().to_string();
    let r = app
        .admin(Method::GET, &format!("/bgrs/{rid}/result"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_all_ok(&r.text().await.unwrap());
    let r = app
        .admin(Method::GET, "/campaigns?limit=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], ROWS.to_string().as_str());

    // A broken file: an unclosed quote on data line 3 is refused, naming the line.
    b.click("#again").await;
    let broken = dir.path().join("broken.csv");
    std::fs::write(
        &broken,
        "op;name;description\nc;one;x\nc;two;y\nc;\"three;z\nc;four;w\n",
    )
    .unwrap();
    b.click("#entity option[value=\"campaigns\"]").await;
    b.type_into("#file", broken.to_str().unwrap()).await;
    b.wait_visible("#preview-sep", 10).await;
    b.click("#start").await;
    let error = b.wait_visible("#error", 30).await;
    assert!(
        error.starts_with("The file was refused: ") && error.contains("line 3"),
        "{error}"
    );
    assert!(b.visible_text("#run").await.is_none());
    b.screenshot("04-uploader-error").await;

    // An unknown column is refused, naming it.
    let unknown = dir.path().join("unknown.csv");
    std::fs::write(&unknown, "op;name;colour\nc;one;red\n").unwrap();
    b.type_into("#file", unknown.to_str().unwrap()).await;
    b.wait_js(
        "the new preview",
        10,
        "return document.querySelector('#preview-table thead th:last-child')?.textContent === 'colour';",
        json!([]),
    )
    .await;
    b.wait_js(
        "the error box cleared",
        10,
        "return document.getElementById('error').hidden;",
        json!([]),
    )
    .await;
    b.click("#start").await;
    let error = b.wait_visible("#error", 30).await;
    assert!(
        error.starts_with("The file was refused: ") && error.contains("colour"),
        "{error}"
    );
    let r = app
        .admin(Method::GET, "/campaigns?limit=1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["x-total-count"],
        ROWS.to_string().as_str(),
        "refused files change nothing"
    );

    // A ZIP offers the campaign for its PDF pages: a new one by default, or one of the 1,000
    // first campaigns.
    let zip = dir.path().join("bundle.zip");
    std::fs::write(&zip, b"PK\x03\x04not really a zip").unwrap();
    b.type_into("#file", zip.to_str().unwrap()).await;
    b.wait_visible("#zip-options", 10).await;
    let options = b
        .wait_js(
            "the campaigns in the select",
            20,
            "const o = document.querySelectorAll('#campaign option');
             return o.length > 1 ? {n: o.length, first: o[0].textContent, value: o[0].value} : null;",
            json!([]),
        )
        .await;
    assert_eq!(options["n"], 1001, "{options}");
    assert_eq!(options["first"], "New campaign named after the file");
    assert_eq!(options["value"], "");

    // A background batch with one failing item, so that the list has more than one kind.
    let r = app
        .admin(Method::POST, "/campaigns")
        .json(&json!([{"name": "batch one"}, {"name": "batch two"}, {"colour": "red"}]))
        .send()
        .await
        .unwrap();
    let (s, body) = json(r).await;
    assert_eq!(s, 202, "{body}");
    let batch = body["request"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = app
            .admin(Method::GET, &format!("/bgrs/{batch}"))
            .send()
            .await
            .unwrap();
        let (_, rec) = json(r).await;
        if rec[0]["status_id"] == "4" {
            break;
        }
        assert!(Instant::now() < deadline, "the batch did not finish: {rec}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The requests page: the upload listed as finished, its log, its result.
    b.click("#nav-requests").await;
    let row = format!("#rows tr[data-rid=\"{rid}\"]");
    b.wait_visible(&row, 20).await;
    assert_eq!(b.visible_text("#whoami").await.as_deref(), Some("admin"));
    let cells = b
        .js(
            "return [...document.querySelectorAll(arguments[0] + ' td')].map(t => t.textContent);",
            json!([row]),
        )
        .await;
    let cells: Vec<String> = serde_json::from_value(cells).unwrap();
    assert!(
        cells[0].starts_with("upload of campaigns20k.csv into campaigns"),
        "{cells:?}"
    );
    assert!(
        cells[1].starts_with("finished") && cells[1].contains("100.00"),
        "{cells:?}"
    );
    assert_eq!(cells[3], "200", "{cells:?}");
    let kinds = b
        .js(
            "return [...document.querySelectorAll('#rows tr[data-rid]')].map(t => t.dataset.kind);",
            json!([]),
        )
        .await;
    assert_eq!(kinds, json!(["batch", "upload"]), "newest first");
    let title = b
        .wait_js(
            "the batch's title with its failure",
            20,
            "const t = document.querySelector('#rows tr[data-kind=batch] .title');
             return t && t.textContent.includes('failed') ? t.textContent : null;",
            json!([]),
        )
        .await;
    assert_eq!(title, "batch of 3 creates of campaigns, 1 item failed");
    b.click(&format!("{row} button[data-action=\"result\"]"))
        .await;
    let saved = app.dir.path().join("downloads/campaigns20k.csvres.csv");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !saved.exists() {
        assert!(Instant::now() < deadline, "the Result button saved no file");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Chrome writes to a temporary name and renames it when complete.
    assert_all_ok(&std::fs::read_to_string(&saved).unwrap());
    b.click(&format!("{row} button[data-action=\"details\"]"))
        .await;
    let log = b
        .wait_visible(&format!("tr[data-details-of=\"{rid}\"] pre"), 20)
        .await;
    let tail = log.get(log.len().saturating_sub(200)..).unwrap_or(&log);
    assert!(log.trim_end().ends_with("done"), "{tail}");
    b.screenshot("05-requests").await;

    // The same page under /v2.5 keeps the session.
    b.goto(&app.url("/v2.5/tools/requests")).await;
    b.wait_visible(&row, 20).await;

    // The data page: the uploaded campaigns a page at a time, sorted by a column heading
    // (twice: descending) and filtered, as the API lists them.
    b.goto(&app.url("/tools/data?entity=campaigns")).await;
    b.wait_visible("#rows tr", 20).await;
    let range = b.wait_visible("#range", 20).await;
    assert!(range.starts_with("1–100 of "), "{range}");
    // The page follows the entity's live changes: a campaign created elsewhere shows in the
    // total without a reload.
    let live = b.wait_visible("#live", 20).await;
    assert!(live.starts_with("Live"), "{live}");
    let total: i64 = range.rsplit(' ').next().unwrap().parse().unwrap();
    let made = app
        .create("campaigns", json!({"name": "made while watching"}))
        .await;
    let shows =
        "return document.getElementById('range').textContent.endsWith(' of ' + arguments[0]);";
    b.wait_js(
        "the total to follow a create",
        20,
        shows,
        json!([total + 1]),
    )
    .await;
    let gone = app
        .admin(Method::DELETE, &format!("/campaigns/{}", made["id"]))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 200);
    b.wait_js("the total to follow a delete", 20, shows, json!([total]))
        .await;
    let click_name = "[...document.querySelectorAll('#heads button')]\
                      .find(x => x.textContent.startsWith('name')).click(); return true;";
    b.js(click_name, json!([])).await;
    b.wait_js("the sort to be name", 20, "return document.getElementById('sort').value === 'name' \
               && [...document.querySelectorAll('#heads button')].some(x => x.textContent === 'name ▲');", json!([])).await;
    b.js(click_name, json!([])).await;
    let (_, top) = json(
        app.admin(Method::GET, "/campaigns?sort=-name&limit=1&fields=id,name")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let top_name = top[0]["name"].as_str().unwrap().to_string();
    b.wait_js(
        "the first row to be the greatest name",
        20,
        "const i = [...document.querySelectorAll('#heads th')].findIndex(x => x.textContent === 'name ▼');
         const r = document.querySelector('#rows tr');
         return i >= 0 && r && r.children[i].textContent === arguments[0];",
        json!([top_name]),
    )
    .await;
    // A filter: id above the 10th-from-last, ten rows.
    let (_, ids) = json(
        app.admin(Method::GET, "/campaigns?sort=-id&limit=11&fields=id")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let tenth = ids[10]["id"].as_i64().unwrap();
    b.click("#add-filter").await;
    b.type_into("#filters .f-field", "id").await;
    b.js(
        "document.querySelector('#filters .f-op').value = 'gt'; return true;",
        json!([]),
    )
    .await;
    b.type_into("#filters .f-value", &tenth.to_string()).await;
    b.click("#apply").await;
    b.wait_js(
        "ten filtered rows",
        20,
        "return document.getElementById('range').textContent === '1–10 of 10';",
        json!([]),
    )
    .await;
    b.screenshot("06-data").await;

    // What the upload changed, from its row on the requests page: the data page lists the
    // campaigns it created.
    b.goto(&app.url("/tools/requests")).await;
    b.wait_visible(&row, 20).await;
    b.click(&format!("{row} a[data-action=\"changed\"]")).await;
    b.wait_js(
        "the upload's campaigns",
        20,
        "return document.getElementById('entity').value === 'campaigns' \
           && document.getElementById('changed-by').value === arguments[0] \
           && document.getElementById('range').textContent === '1–100 of ' + arguments[1];",
        json!([rid, ROWS.to_string()]),
    )
    .await;
    let note = b.wait_visible("#changed-note", 20).await;
    assert!(
        note.contains(&format!("campaigns ({})", thousands(ROWS))),
        "{note}"
    );
    b.screenshot("07-changed-by").await;

    // Undo it: the confirmation counts the objects; the campaigns go, the batch's stay.
    b.goto(&app.url("/tools/requests")).await;
    b.wait_visible(&row, 20).await;
    b.click(&format!("{row} button[data-action=\"undo\"]"))
        .await;
    let asked = b.wait_visible("#undo-what", 20).await;
    assert!(
        asked.contains(&format!("{} objects will change", thousands(ROWS))),
        "{asked}"
    );
    b.screenshot("08-undo-confirm").await;
    b.click("#undo-confirm").await;
    let notice = b.wait_visible("#notice", 20).await;
    let undo_rid = notice
        .split_whitespace()
        .last()
        .unwrap()
        .trim_end_matches('.')
        .to_string();
    app.wait_ended(&undo_rid, Duration::from_secs(120)).await;
    let r = app
        .admin(Method::GET, "/campaigns?limit=1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["x-total-count"],
        "2",
        "only the batch's campaigns"
    );
    b.wait_visible(&format!("#rows tr[data-rid=\"{undo_rid}\"]"), 20)
        .await;
    b.screenshot("09-undone").await;

    eprintln!(
        "browser test: upload of {ROWS} rows in {run_time:?}, whole scenario {:?}",
        started.elapsed()
    );
}
