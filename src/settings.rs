//! Typed settings of a server: defaults, overridden by environment variables and flags (the
//! CLI maps both onto this struct).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Failures of one login from one address before attempts are slowed (the default of the
/// `--signin-free-failures` setting).
pub const FREE_PER_LOGIN: u32 = 5;

#[derive(Debug, Clone)]
pub struct Settings {
    /// Address to listen on; port 0 picks a free port.
    pub bind: SocketAddr,
    /// SQLite file (default backend) and stored files.
    pub data_dir: PathBuf,
    /// Directory of entity YAML files.
    pub entities_dir: PathBuf,
    /// Serve the shipped entities built into the binary instead of `entities_dir` (there is
    /// no entities directory); nothing is watched or reloaded then.
    pub built_in_entities: bool,
    /// `sqlite:...` or `postgres://...`; default: SQLite in the data directory.
    pub database_url: Option<String>,
    /// Watch the entities directory and hot-reload.
    pub dev: bool,
    /// Password of the `admin` user created on an empty database; random when absent.
    pub admin_password: Option<String>,
    /// Largest JSON object or form body (a single call), and largest multipart form of text.
    pub max_body_bytes: usize,
    /// Largest text field of a multipart form (the uploader's fields, a form-encoded call).
    pub max_field_bytes: usize,
    /// Largest batch body (a JSON array).
    pub max_batch_bytes: usize,
    /// Shortest password a call may set.
    pub min_password_length: usize,
    /// Bounds of JavaScript hooks: each call's time and each runtime's memory.
    pub hook_limits: crate::script::Limits,
    /// Failed sign-ins of one login from one address before attempts are throttled (four
    /// times as many from one address over all logins).
    pub signin_free_failures: u32,
    /// Other sites whose browsers may send state-changing requests (and get CORS answers),
    /// as `scheme://host[:port]`.
    pub allowed_origins: Vec<String>,
    /// How long a client may take to send a request's headers, and how long an idle
    /// keep-alive connection is kept.
    pub header_timeout: Duration,
    /// Largest uploaded file.
    pub max_upload_bytes: u64,
    /// Largest number of items in one batch.
    pub max_batch_items: usize,
    /// How long background results are kept.
    pub result_keep: Duration,
    /// How long a shutdown waits for running requests.
    pub shutdown_grace: Duration,
    /// Limits of an uploaded ZIP bundle.
    pub zip: ZipLimits,
    /// Most pages a bundle's pages.pdf may have.
    pub pdf_max_pages: usize,
    /// How long live changes are kept for streams and pages to resume from.
    pub changes_keep: Duration,
    /// Most changes a live stream that has caught up may fall behind before it gets `reset`.
    pub events_lag_max: u64,
    /// Most Server-Sent-Events streams one user may hold open at once.
    pub max_streams_per_user: usize,
    /// The object store that holds every file the server keeps (`--storage-url`:
    /// `s3://bucket/prefix`, `gs://`, `az://`, `file://`); the data directory when absent.
    pub storage_url: Option<String>,
    /// Where scheduled backups go ([`crate::backup`]); none when absent.
    pub backup_to: Option<String>,
    /// Where `GET /metrics` is also served, without credentials; none when absent.
    pub metrics_bind: Option<std::net::SocketAddr>,
    /// Time between scheduled backups.
    pub backup_every: Duration,
    /// Complete scheduled backups kept; older ones are removed.
    pub backup_keep: usize,
    /// Most bytes one upload may store (one-page PDFs and `res/` files together).
    pub max_upload_store_bytes: u64,
    /// The `entiserve` executable that reads PDFs in a contained child process
    /// (`entiserve pdf-pages`); default: this process's own executable.
    pub helper_exe: PathBuf,
}

impl Settings {
    /// Defaults for a server in `data_dir` serving `entities_dir`.
    pub fn new(data_dir: impl Into<PathBuf>, entities_dir: impl Into<PathBuf>) -> Settings {
        Settings {
            bind: "127.0.0.1:8080".parse().expect("valid address"),
            data_dir: data_dir.into(),
            entities_dir: entities_dir.into(),
            built_in_entities: false,
            database_url: None,
            dev: false,
            admin_password: None,
            max_body_bytes: 1 << 20,
            max_field_bytes: 64 * 1024,
            max_batch_bytes: 64 << 20,
            min_password_length: 8,
            hook_limits: crate::script::Limits::default(),
            signin_free_failures: FREE_PER_LOGIN,
            allowed_origins: Vec::new(),
            header_timeout: Duration::from_secs(30),
            max_upload_bytes: 1 << 30,
            max_batch_items: 100_000,
            result_keep: Duration::from_secs(30 * 24 * 3600),
            shutdown_grace: Duration::from_secs(30),
            zip: Default::default(),
            pdf_max_pages: 5000,
            changes_keep: Duration::from_secs(24 * 3600),
            events_lag_max: 10_000,
            max_streams_per_user: 16,
            storage_url: None,
            backup_to: None,
            metrics_bind: None,
            backup_every: Duration::from_secs(24 * 3600),
            backup_keep: 7,
            max_upload_store_bytes: 1 << 30,
            helper_exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("entiserve")),
        }
    }

    /// The database URL in force.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(u) => u.clone(),
            None => format!("sqlite://{}", self.data_dir.join("entiserve.db").display()),
        }
    }
}

/// Limits of one archive (settings; the contract's defaults).
#[derive(Debug, Clone)]
pub struct ZipLimits {
    pub max_entries: usize,
    pub max_bytes: u64,
    pub max_ratio: u64,
}

impl Default for ZipLimits {
    fn default() -> Self {
        ZipLimits {
            max_entries: 10_000,
            max_bytes: 4 << 30,
            max_ratio: 200,
        }
    }
}
