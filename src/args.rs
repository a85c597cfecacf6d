//! The command line's words: the subcommands, their flags and environment variables, and the
//! parsers of the sizes, times and durations they take.

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "entiserve",
    version,
    about = "Entities from YAML become a REST API"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the server.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "ENTISERVE_BIND", default_value = "127.0.0.1:8080")]
        bind: SocketAddr,
        /// Directory of the SQLite file and stored files.
        #[arg(long, env = "ENTISERVE_DATA_DIR", default_value = "./data")]
        data_dir: PathBuf,
        /// Directory of entity YAML files [default: ./entities, or the shipped entities built
        /// into the binary when there is no such directory].
        #[arg(long, env = "ENTISERVE_ENTITIES")]
        entities: Option<PathBuf>,
        /// sqlite:... or postgres://...; default: SQLite in the data directory.
        #[arg(long, env = "DATABASE_URL")]
        database_url: Option<String>,
        /// Watch the entity files and reload them on change.
        #[arg(long, env = "ENTISERVE_DEV")]
        dev: bool,
        #[command(flatten)]
        limits: Box<Limits>,
    },
    /// Check entity definitions: exit 0, or print every error as file:line: message and exit 1.
    Check {
        /// Directory of entity YAML files [default: ./entities, or the shipped entities built
        /// into the binary when there is no such directory].
        #[arg(long, env = "ENTISERVE_ENTITIES")]
        entities: Option<PathBuf>,
    },
    /// Write the shipped entities (DIR/entities) with an example of JavaScript hooks
    /// (campaigns.js, the audit entity it writes to and entiserve.d.ts for editors), and an
    /// example upload (DIR/uploads) to start from; refuses to overwrite a file.
    Init {
        /// Where to write them.
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
    /// Print what a start with these definitions would do to the tables (create, add, rename,
    /// convert, check, refuse), changing nothing.
    ///
    /// Exit codes: 0 everything would apply, 1 something would be refused, 2 the definitions do
    /// not compile.
    Plan {
        /// Directory of the SQLite file [as for serve].
        #[arg(long, env = "ENTISERVE_DATA_DIR", default_value = "./data")]
        data_dir: PathBuf,
        /// Directory of entity YAML files [as for serve].
        #[arg(long, env = "ENTISERVE_ENTITIES")]
        entities: Option<PathBuf>,
        /// sqlite:... or postgres://...; default: SQLite in the data directory.
        #[arg(long, env = "DATABASE_URL")]
        database_url: Option<String>,
    },
    /// Back up an installation while its server runs: a consistent snapshot of the SQLite
    /// database and every file of the data directory, with a manifest of checksums written
    /// last. Prints the new backup's location as its last line; exits 0 only when it is
    /// complete. With --list, prints the complete backups of TARGET, one a line.
    Backup {
        /// Where backups go: a directory (one folder each) or an object-store URL as for
        /// --storage-url (s3://bucket/prefix, gs://, az://, file://; one prefix each).
        #[arg(long)]
        to: String,
        /// List the complete backups instead of taking one.
        #[arg(long)]
        list: bool,
        /// Directory of the SQLite file and stored files [as for serve].
        #[arg(long, env = "ENTISERVE_DATA_DIR", default_value = "./data")]
        data_dir: PathBuf,
        /// sqlite:... or postgres://... [as for serve]; on PostgreSQL only the files are
        /// copied (back the database up with pg_dump or pgBackRest).
        #[arg(long, env = "DATABASE_URL")]
        database_url: Option<String>,
        /// The object store the server keeps its files in [as for serve]: they are copied
        /// into the backup from there.
        #[arg(long, env = "ENTISERVE_STORAGE_URL")]
        storage_url: Option<String>,
    },
    /// Restore a backup into an empty data directory, after checking every checksum; exits 0
    /// only when the installation is whole.
    Restore {
        /// The backup's location, as `backup` printed it: a folder or an object-store URL.
        #[arg(long)]
        from: String,
        /// The new data directory: absent or empty.
        #[arg(long)]
        data_dir: PathBuf,
        /// postgres://... when the installation's database is PostgreSQL (restored with its own
        /// tools); only the files are restored then.
        #[arg(long)]
        database_url: Option<String>,
        /// An empty object store (or prefix) for the restored installation's files, as for
        /// serve --storage-url; without it they go into the data directory.
        #[arg(long)]
        storage_url: Option<String>,
    },
    /// Copy every row of one database into another, empty one (typically the SQLite file of
    /// the data directory into PostgreSQL): objects, users, tokens, background requests, their
    /// change records, idempotency keys and the history of entity changes, ids kept. The source
    /// is read in one snapshot and may be in use by a running server. Stored files are not
    /// copied (copy the data directory). Prints one line per table.
    MigrateData {
        /// The database to copy: sqlite:///path/to/entiserve.db (or sqlite:PATH) or
        /// postgres://...
        #[arg(long)]
        from: String,
        /// The empty database to fill: postgres://... (or sqlite:PATH).
        #[arg(long)]
        to: String,
        /// Directory of entity YAML files the source's server runs on [as for serve].
        #[arg(long, env = "ENTISERVE_ENTITIES")]
        entities: Option<PathBuf>,
        /// Also copy the stored files of the source's data directory (--data-dir) into this
        /// object store, as for serve --storage-url.
        #[arg(long)]
        storage_url: Option<String>,
        /// The source's data directory, whose files --storage-url copies [default: ./data].
        #[arg(long, default_value = "./data")]
        data_dir: PathBuf,
    },
    /// Print the JSON Schema (2020-12) of the entity file format, for editors that check YAML
    /// as it is typed (yaml-language-server and others).
    EntitySchema,
    /// Write a TypeScript declaration file of the entities, for editors that check JavaScript
    /// hook files (`// @ts-check`): the objects and inputs of each entity, `ctx`, `Refuse` and
    /// the types of the six hooks. On errors in the entity files, prints them and exits 1.
    HookTypes {
        /// Directory of entity YAML files [as for check].
        #[arg(long, env = "ENTISERVE_ENTITIES")]
        entities: Option<PathBuf>,
        /// Where to write it; `-` prints it [default: entiserve.d.ts in the entities
        /// directory, or in the current directory for the shipped entities built in].
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Upload a CSV file to a server's uploader, follow it and download the result CSV.
    ///
    /// Exit codes: 0 every row OK, 2 some rows failed, 1 an error, 130 interrupted by Ctrl-C.
    Upload(entiserve::client::upload::UploadArgs),
    /// List your background requests on a server, or show one with its details.
    Bgrs(entiserve::client::bgrs::BgrsArgs),
    /// Split a PDF into one-page PDFs (the contained child the server starts for pages.pdf).
    #[command(hide = true)]
    PdfPages {
        #[arg(long)]
        max_pages: usize,
        /// Most bytes of one-page PDFs to write; the split stops as soon as they would pass it.
        #[arg(long, default_value_t = u64::MAX)]
        max_bytes: u64,
        input: PathBuf,
        out_dir: PathBuf,
    },
}

/// Size limits of requests and uploads (defaults: the contract's).
#[derive(clap::Args)]
pub struct Limits {
    /// Largest uploaded file, bytes.
    #[arg(long, env = "ENTISERVE_MAX_UPLOAD_BYTES", default_value_t = 1 << 30)]
    pub max_upload_bytes: u64,
    /// Most items in one batch.
    #[arg(long, env = "ENTISERVE_MAX_BATCH_ITEMS", default_value_t = 100_000)]
    pub max_batch_items: usize,
    /// Most entries in an uploaded ZIP.
    #[arg(long, env = "ENTISERVE_ZIP_MAX_ENTRIES", default_value_t = 10_000)]
    pub zip_max_entries: usize,
    /// Most uncompressed bytes in an uploaded ZIP.
    #[arg(long, env = "ENTISERVE_ZIP_MAX_BYTES", default_value_t = 4 << 30)]
    pub zip_max_bytes: u64,
    /// Largest expansion of one ZIP entry (uncompressed : compressed).
    #[arg(long, env = "ENTISERVE_ZIP_MAX_RATIO", default_value_t = 200)]
    pub zip_max_ratio: u64,
    /// Most pages in a bundle's pages.pdf.
    #[arg(long, env = "ENTISERVE_PDF_MAX_PAGES", default_value_t = 5000)]
    pub pdf_max_pages: usize,
    /// Largest JSON object or form body of a single call, bytes.
    #[arg(long, env = "ENTISERVE_MAX_BODY_BYTES", default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// Largest text field of a multipart form, bytes.
    #[arg(long, env = "ENTISERVE_MAX_FIELD_BYTES", default_value_t = 64 * 1024)]
    pub max_field_bytes: usize,
    /// Largest batch body (a JSON array), bytes.
    #[arg(long, env = "ENTISERVE_MAX_BATCH_BYTES", default_value_t = 64 << 20)]
    pub max_batch_bytes: usize,
    /// Shortest password a call may set.
    #[arg(long, env = "ENTISERVE_MIN_PASSWORD_LENGTH", default_value_t = 8)]
    pub min_password_length: usize,
    /// Longest time one JavaScript hook call may run: 100ms, 2s (time spent in its ctx calls
    /// does not count).
    #[arg(long, env = "ENTISERVE_HOOK_TIMEOUT", default_value = "100ms", value_parser = parse_hook_timeout)]
    pub hook_timeout: std::time::Duration,
    /// Most memory of one JavaScript runtime (one per worker thread and hook level): 64MiB,
    /// 512KiB, 1GiB.
    #[arg(long, env = "ENTISERVE_HOOK_MEMORY", default_value = "64MiB", value_parser = parse_size)]
    pub hook_memory: usize,
    /// Failed sign-ins of one login from one address before attempts are throttled (429);
    /// four times as many from one address over all logins.
    #[arg(long, env = "ENTISERVE_SIGNIN_FREE_FAILURES", default_value_t = 5)]
    pub signin_free_failures: u32,
    /// Other sites (`https://app.example.com`, comma-separated) whose pages may send
    /// state-changing requests; they also get CORS answers.
    #[arg(long, env = "ENTISERVE_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
    /// Seconds a client may take to send a request's headers; also the idle keep-alive time.
    #[arg(long, env = "ENTISERVE_HEADER_TIMEOUT", default_value_t = 30)]
    pub header_timeout: u64,
    /// Most Server-Sent-Events streams (`/bgrs/<rid>/events`) one user may hold open.
    #[arg(long, env = "ENTISERVE_MAX_STREAMS_PER_USER", default_value_t = 16)]
    pub max_streams_per_user: usize,
    /// How long live changes are kept for streams and pages to resume from: 24h, 30m, 90s.
    #[arg(long, env = "ENTISERVE_CHANGES_KEEP", default_value = "24h", value_parser = parse_duration)]
    pub changes_keep: std::time::Duration,
    /// Most changes a live stream (`/<res>/events`) may fall behind once it has caught up;
    /// beyond, it gets `reset` and is closed.
    #[arg(long, env = "ENTISERVE_EVENTS_LAG_MAX", default_value_t = 10_000)]
    pub events_lag_max: u64,
    /// Most bytes one upload may store (one-page PDFs and res/ files together).
    #[arg(long, env = "ENTISERVE_MAX_UPLOAD_STORE_BYTES", default_value_t = 1 << 30)]
    pub max_upload_store_bytes: u64,
    /// Keep every file (uploads being run, result files, one-page PDFs, res/ files) in this
    /// object store instead of the data directory, which is then scratch space only:
    /// s3://bucket/prefix (with the AWS_* variables; AWS_ENDPOINT_URL and AWS_ALLOW_HTTP=true
    /// for S3-compatible servers), gs://bucket/prefix, az://container/prefix or file:///path.
    /// Servers on one database and one store each serve and resume everything.
    #[arg(long, env = "ENTISERVE_STORAGE_URL")]
    pub storage_url: Option<String>,
    /// Take a backup into this directory or object-store URL on a schedule (see
    /// `entiserve backup`).
    #[arg(long, env = "ENTISERVE_BACKUP_TO")]
    pub backup_to: Option<String>,
    /// Time between scheduled backups: 30s, 15m, 6h, 1d.
    #[arg(long, env = "ENTISERVE_BACKUP_EVERY", default_value = "1d", value_parser = parse_duration)]
    pub backup_every: std::time::Duration,
    /// Complete scheduled backups to keep; older ones are removed.
    #[arg(long, env = "ENTISERVE_BACKUP_KEEP", default_value_t = 7)]
    pub backup_keep: usize,
    /// Also serve GET /metrics on this address, without credentials (keep it private: a
    /// network only the scrapers reach).
    #[arg(long, env = "ENTISERVE_METRICS_BIND")]
    pub metrics_bind: Option<SocketAddr>,
    /// Log lines as text for people or as JSON objects (one a line) for log collectors.
    #[arg(long, env = "ENTISERVE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `100ms`, `2s`, or plain milliseconds.
fn parse_hook_timeout(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (n, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = n
        .parse()
        .map_err(|_| format!("`{s}` is not a time such as 100ms"))?;
    let d = match unit.trim() {
        "" | "ms" => std::time::Duration::from_millis(n),
        "s" => std::time::Duration::from_secs(n),
        _ => return Err(format!("`{s}`: use ms or s")),
    };
    if d.is_zero() {
        return Err("the hook timeout must be above zero".into());
    }
    Ok(d)
}

/// `64MiB`, `512KiB`, `1GiB` (or KB/MB/GB, K/M/G, meaning the same), or plain bytes.
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (n, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: usize = n
        .parse()
        .map_err(|_| format!("`{s}` is not a size such as 64MiB"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("`{s}`: use KiB, MiB or GiB")),
    };
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("`{s}` is too large"))?;
    if bytes < 1 << 20 {
        return Err("the hook memory must be at least 1MiB".into());
    }
    Ok(bytes)
}

/// `30s`, `15m`, `6h`, `1d`, or plain seconds.
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = n
        .parse()
        .map_err(|_| format!("`{s}` is not a duration such as 6h"))?;
    let secs = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(format!("`{s}`: use s, m, h or d")),
    };
    if n == 0 {
        return Err("a duration must be more than 0".into());
    }
    Ok(std::time::Duration::from_secs(n * secs))
}
