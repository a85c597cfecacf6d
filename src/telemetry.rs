//! Prometheus metrics, served by `GET /metrics` (admins, or anyone on `--metrics-bind`):
//!
//! - `entiserve_http_requests_total{method, route, status}` and
//!   `entiserve_http_request_duration_seconds{method, route}` (a histogram), the route being the
//!   route table's pattern (`/:entity/:id`), so the label set stays small;
//! - `entiserve_changes_applied_total{entity, op}`: objects created, updated, saved or deleted,
//!   whichever path they came by (REST, batch item, CSV row);
//! - `entiserve_background_requests{kind, status}`: the queue, read at each scrape;
//! - `entiserve_lease_takeovers_total`: background requests claimed again after they had been
//!   claimed before: their worker died, its lease ran out, or its server stopped or restarted;
//! - `entiserve_upload_bytes_total`: bytes of uploaded files received;
//! - `entiserve_store_errors_total`: failed reads and writes of stored files;
//! - `entiserve_backup_age_seconds`: age of the last good scheduled backup (once there is one).
//!
//! One recorder serves the process: servers started in one process (tests) share it.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
/// The (kind, status) pairs of the queue gauge set so far: a pair no request has any more is
/// set to 0 rather than left at its last count.
static QUEUE_SEEN: std::sync::Mutex<std::collections::BTreeSet<(String, String)>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());
/// Unix time of the last good scheduled backup; 0 before the first.
static LAST_BACKUP: AtomicI64 = AtomicI64::new(0);

/// Buckets of the latency histograms, in seconds.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// How often the recorded latencies are folded into their buckets between scrapes.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Installs the process's recorder (once); later calls return the same handle. Inside a tokio
/// runtime the first call also starts the upkeep task: a histogram keeps each sample until
/// upkeep folds it into its buckets, so without it (no one scraping) samples would pile up.
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
            .expect("non-empty buckets")
            .build_recorder();
        let handle = recorder.handle();
        // Another recorder may already be installed (a program embedding this library):
        // then the metrics go there, and this handle renders what it has.
        let _ = metrics::set_global_recorder(recorder);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let h = handle.clone();
            rt.spawn(async move {
                let mut every = tokio::time::interval(UPKEEP_EVERY);
                loop {
                    every.tick().await;
                    h.run_upkeep();
                }
            });
        }
        handle
    })
}

/// The counter and histogram of each (method, route, status); the route by the address of its
/// label, which is static. The key is hashed with a fast hash, not SipHash: it is made by the
/// server, not chosen by a client.
type HttpSeries = std::collections::HashMap<
    (poem::http::Method, usize, u16),
    (metrics::Counter, metrics::Histogram),
    foldhash::fast::FixedState,
>;

thread_local! {
    /// The series this thread has answered: registered once, so a request costs a lookup by a
    /// small key (nothing allocated) and two atomic updates, not a lookup by labels.
    static HTTP: std::cell::RefCell<HttpSeries> = std::cell::RefCell::new(HttpSeries::default());
}

/// One answered HTTP request.
pub fn http(method: &poem::http::Method, route: &'static str, status: u16, seconds: f64) {
    HTTP.with(|cache| {
        let mut cache = cache.borrow_mut();
        let key = (method.clone(), route.as_ptr() as usize, status);
        let (counter, histogram) = cache.entry(key).or_insert_with(|| {
            (
                metrics::counter!(
                    "entiserve_http_requests_total",
                    "method" => method.as_str().to_string(),
                    "route" => route,
                    "status" => status.to_string()
                ),
                metrics::histogram!(
                    "entiserve_http_request_duration_seconds",
                    "method" => method.as_str().to_string(),
                    "route" => route
                ),
            )
        });
        counter.increment(1);
        histogram.record(seconds);
    });
}

/// `n` changes of `op` applied to `entity`.
pub fn applied(entity: &str, op: &'static str, n: u64) {
    metrics::counter!(
        "entiserve_changes_applied_total",
        "entity" => entity.to_string(),
        "op" => op
    )
    .increment(n);
}

/// A background request claimed again after its earlier worker stopped.
pub fn lease_taken_over() {
    metrics::counter!("entiserve_lease_takeovers_total").increment(1);
}

/// `n` bytes of an uploaded file received.
pub fn upload_bytes(n: u64) {
    metrics::counter!("entiserve_upload_bytes_total").increment(n);
}

/// A failed read or write of a stored file.
pub fn store_error() {
    metrics::counter!("entiserve_store_errors_total").increment(1);
}

/// A scheduled backup completed now.
pub fn backup_taken() {
    LAST_BACKUP.store(crate::time::unix_now(), Ordering::Relaxed);
}

/// The scrape: `queue` is the number of background requests per kind and status name.
pub fn render(queue: &[(String, String, i64)]) -> String {
    let handle = install();
    let mut seen = QUEUE_SEEN.lock().unwrap_or_else(|e| e.into_inner());
    for (kind, status) in seen.iter() {
        if !queue.iter().any(|(k, s, _)| k == kind && s == status) {
            metrics::gauge!(
                "entiserve_background_requests",
                "kind" => kind.clone(),
                "status" => status.clone()
            )
            .set(0.0);
        }
    }
    for (kind, status, n) in queue {
        metrics::gauge!(
            "entiserve_background_requests",
            "kind" => kind.clone(),
            "status" => status.clone()
        )
        .set(*n as f64);
        seen.insert((kind.clone(), status.clone()));
    }
    drop(seen);
    let last = LAST_BACKUP.load(Ordering::Relaxed);
    if last > 0 {
        metrics::gauge!("entiserve_backup_age_seconds")
            .set((crate::time::unix_now() - last).max(0) as f64);
    }
    handle.run_upkeep();
    handle.render()
}
