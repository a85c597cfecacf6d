//! The `entiserve` command line: `serve`, `check` and `init`; `plan`, `backup`, `restore` and
//! `migrate-data` on an installation; `entity-schema` and `hook-types` for editors; `upload`
//! and `bgrs`, the client of a running server (in `entiserve::client`).

mod installation;

use clap::{Parser, Subcommand};
use entiserve::settings::Settings;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "entiserve",
    version,
    about = "Entities from YAML become a REST API"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
struct Limits {
    /// Largest uploaded file, bytes.
    #[arg(long, env = "ENTISERVE_MAX_UPLOAD_BYTES", default_value_t = 1 << 30)]
    max_upload_bytes: u64,
    /// Most items in one batch.
    #[arg(long, env = "ENTISERVE_MAX_BATCH_ITEMS", default_value_t = 100_000)]
    max_batch_items: usize,
    /// Most entries in an uploaded ZIP.
    #[arg(long, env = "ENTISERVE_ZIP_MAX_ENTRIES", default_value_t = 10_000)]
    zip_max_entries: usize,
    /// Most uncompressed bytes in an uploaded ZIP.
    #[arg(long, env = "ENTISERVE_ZIP_MAX_BYTES", default_value_t = 4 << 30)]
    zip_max_bytes: u64,
    /// Largest expansion of one ZIP entry (uncompressed : compressed).
    #[arg(long, env = "ENTISERVE_ZIP_MAX_RATIO", default_value_t = 200)]
    zip_max_ratio: u64,
    /// Most pages in a bundle's pages.pdf.
    #[arg(long, env = "ENTISERVE_PDF_MAX_PAGES", default_value_t = 5000)]
    pdf_max_pages: usize,
    /// Largest JSON object or form body of a single call, bytes.
    #[arg(long, env = "ENTISERVE_MAX_BODY_BYTES", default_value_t = 1 << 20)]
    max_body_bytes: usize,
    /// Largest text field of a multipart form, bytes.
    #[arg(long, env = "ENTISERVE_MAX_FIELD_BYTES", default_value_t = 64 * 1024)]
    max_field_bytes: usize,
    /// Largest batch body (a JSON array), bytes.
    #[arg(long, env = "ENTISERVE_MAX_BATCH_BYTES", default_value_t = 64 << 20)]
    max_batch_bytes: usize,
    /// Shortest password a call may set.
    #[arg(long, env = "ENTISERVE_MIN_PASSWORD_LENGTH", default_value_t = 8)]
    min_password_length: usize,
    /// Longest time one JavaScript hook call may run: 100ms, 2s (time spent in its ctx calls
    /// does not count).
    #[arg(long, env = "ENTISERVE_HOOK_TIMEOUT", default_value = "100ms", value_parser = parse_hook_timeout)]
    hook_timeout: std::time::Duration,
    /// Most memory of one JavaScript runtime (one per worker thread and hook level): 64MiB,
    /// 512KiB, 1GiB.
    #[arg(long, env = "ENTISERVE_HOOK_MEMORY", default_value = "64MiB", value_parser = parse_size)]
    hook_memory: usize,
    /// Failed sign-ins of one login from one address before attempts are throttled (429);
    /// four times as many from one address over all logins.
    #[arg(long, env = "ENTISERVE_SIGNIN_FREE_FAILURES", default_value_t = 5)]
    signin_free_failures: u32,
    /// Other sites (`https://app.example.com`, comma-separated) whose pages may send
    /// state-changing requests; they also get CORS answers.
    #[arg(long, env = "ENTISERVE_ALLOWED_ORIGINS", value_delimiter = ',')]
    allowed_origins: Vec<String>,
    /// Seconds a client may take to send a request's headers; also the idle keep-alive time.
    #[arg(long, env = "ENTISERVE_HEADER_TIMEOUT", default_value_t = 30)]
    header_timeout: u64,
    /// Most Server-Sent-Events streams (`/bgrs/<rid>/events`) one user may hold open.
    #[arg(long, env = "ENTISERVE_MAX_STREAMS_PER_USER", default_value_t = 16)]
    max_streams_per_user: usize,
    /// How long live changes are kept for streams and pages to resume from: 24h, 30m, 90s.
    #[arg(long, env = "ENTISERVE_CHANGES_KEEP", default_value = "24h", value_parser = parse_duration)]
    changes_keep: std::time::Duration,
    /// Most changes a live stream (`/<res>/events`) may fall behind once it has caught up;
    /// beyond, it gets `reset` and is closed.
    #[arg(long, env = "ENTISERVE_EVENTS_LAG_MAX", default_value_t = 10_000)]
    events_lag_max: u64,
    /// Most bytes one upload may store (one-page PDFs and res/ files together).
    #[arg(long, env = "ENTISERVE_MAX_UPLOAD_STORE_BYTES", default_value_t = 1 << 30)]
    max_upload_store_bytes: u64,
    /// Keep every file (uploads being run, result files, one-page PDFs, res/ files) in this
    /// object store instead of the data directory, which is then scratch space only:
    /// s3://bucket/prefix (with the AWS_* variables; AWS_ENDPOINT_URL and AWS_ALLOW_HTTP=true
    /// for S3-compatible servers), gs://bucket/prefix, az://container/prefix or file:///path.
    /// Servers on one database and one store each serve and resume everything.
    #[arg(long, env = "ENTISERVE_STORAGE_URL")]
    storage_url: Option<String>,
    /// Take a backup into this directory or object-store URL on a schedule (see
    /// `entiserve backup`).
    #[arg(long, env = "ENTISERVE_BACKUP_TO")]
    backup_to: Option<String>,
    /// Time between scheduled backups: 30s, 15m, 6h, 1d.
    #[arg(long, env = "ENTISERVE_BACKUP_EVERY", default_value = "1d", value_parser = parse_duration)]
    backup_every: std::time::Duration,
    /// Complete scheduled backups to keep; older ones are removed.
    #[arg(long, env = "ENTISERVE_BACKUP_KEEP", default_value_t = 7)]
    backup_keep: usize,
    /// Also serve GET /metrics on this address, without credentials (keep it private: a
    /// network only the scrapers reach).
    #[arg(long, env = "ENTISERVE_METRICS_BIND")]
    metrics_bind: Option<SocketAddr>,
    /// Log lines as text for people or as JSON objects (one a line) for log collectors.
    #[arg(long, env = "ENTISERVE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
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

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    match cli.command {
        Command::Check { entities } => check(entities),
        Command::Init { dir } => init(&dir),
        Command::Plan {
            data_dir,
            entities,
            database_url,
        } => plan(data_dir, entities, database_url),
        Command::Backup {
            to,
            list,
            data_dir,
            database_url,
            storage_url,
        } => installation::backup(to, list, data_dir, database_url, storage_url),
        Command::Restore {
            from,
            data_dir,
            database_url,
            storage_url,
        } => installation::restore(&from, &data_dir, database_url, storage_url),
        Command::MigrateData {
            from,
            to,
            entities,
            storage_url,
            data_dir,
        } => installation::migrate_data(&from, &to, entities, storage_url.as_deref(), &data_dir),
        Command::EntitySchema => {
            let schema = entiserve::plugins::Registry::builtin().entity_schema();
            println!("{schema:#}");
            ExitCode::SUCCESS
        }
        Command::HookTypes { entities, out } => hook_types(entities, out),
        Command::Upload(args) => entiserve::client::upload::run(args),
        Command::Bgrs(args) => entiserve::client::bgrs::run(args),
        Command::PdfPages {
            max_pages,
            max_bytes,
            input,
            out_dir,
        } => entiserve::pdf::child_main(&input, &out_dir, max_pages, max_bytes),
        Command::Serve {
            bind,
            data_dir,
            entities,
            database_url,
            dev,
            limits,
        } => {
            init_logs(limits.log_format);
            let (entities, built_in) = entities_dir(entities);
            let mut s = Settings::new(data_dir, entities);
            s.built_in_entities = built_in;
            s.max_upload_bytes = limits.max_upload_bytes;
            s.max_batch_items = limits.max_batch_items;
            s.zip.max_entries = limits.zip_max_entries;
            s.zip.max_bytes = limits.zip_max_bytes;
            s.zip.max_ratio = limits.zip_max_ratio;
            s.pdf_max_pages = limits.pdf_max_pages;
            s.max_body_bytes = limits.max_body_bytes;
            s.max_field_bytes = limits.max_field_bytes;
            s.max_batch_bytes = limits.max_batch_bytes;
            s.min_password_length = limits.min_password_length;
            s.hook_limits = entiserve::script::Limits {
                timeout: limits.hook_timeout,
                memory: limits.hook_memory,
            };
            s.signin_free_failures = limits.signin_free_failures;
            s.allowed_origins = limits
                .allowed_origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .filter(|o| !o.is_empty())
                .collect();
            s.header_timeout = std::time::Duration::from_secs(limits.header_timeout.max(1));
            s.max_streams_per_user = limits.max_streams_per_user;
            s.changes_keep = limits.changes_keep;
            s.events_lag_max = limits.events_lag_max.max(1);
            s.max_upload_store_bytes = limits.max_upload_store_bytes;
            s.storage_url = limits.storage_url.filter(|u| !u.trim().is_empty());
            s.backup_to = limits.backup_to;
            s.metrics_bind = limits.metrics_bind;
            s.backup_every = limits.backup_every;
            s.backup_keep = limits.backup_keep.max(1);
            s.bind = bind;
            s.database_url = database_url.filter(|u| !u.is_empty());
            s.dev = dev;
            s.admin_password = std::env::var("ENTISERVE_ADMIN_PASSWORD")
                .ok()
                .filter(|p| !p.is_empty());
            // Hooks that write through `ctx` run the hooks they meet on the same thread, at
            // most four levels deep: the workers get room for them.
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_stack_size(8 << 20)
                .build()
                .expect("a tokio runtime");
            match rt.block_on(serve(s)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// The entities directory given, else `./entities`; `true` when neither is given and there is
/// no `./entities`: the shipped entities built in are meant then.
fn entities_dir(given: Option<PathBuf>) -> (PathBuf, bool) {
    match given {
        Some(dir) => (dir, false),
        None => {
            let dir = PathBuf::from("./entities");
            let built_in = !dir.is_dir();
            (dir, built_in)
        }
    }
}

/// The entities of `dir` (or the shipped ones, as for `serve`), compiled; on errors they are
/// printed and the exit code is 2.
fn compile_entities(
    entities: Option<PathBuf>,
) -> Result<(entiserve::schema::Catalog, PathBuf), ExitCode> {
    let (dir, built_in) = entities_dir(entities);
    let plugins = entiserve::plugins::Registry::builtin().names();
    let compiled = if built_in {
        entiserve::schema::compile_sources(&entiserve::shipped::sources(), &plugins)
    } else {
        entiserve::schema::compile_dir(&dir, &plugins)
    };
    match compiled {
        Ok(c) => Ok((c, dir)),
        Err(diags) => {
            for d in diags {
                println!("{d}");
            }
            Err(ExitCode::from(2))
        }
    }
}

fn plan(data_dir: PathBuf, entities: Option<PathBuf>, database_url: Option<String>) -> ExitCode {
    let (catalog, dir) = match compile_entities(entities) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut s = Settings::new(data_dir, dir);
    s.database_url = database_url.filter(|u| !u.is_empty());
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let (report, verdict) =
        rt.block_on(entiserve::evolve::report::plan(&catalog, &s.database_url()));
    print!("{report}");
    match verdict {
        entiserve::evolve::report::Verdict::Applies => ExitCode::SUCCESS,
        entiserve::evolve::report::Verdict::Refused => ExitCode::FAILURE,
        entiserve::evolve::report::Verdict::DoesNotCompile => ExitCode::from(2),
    }
}

fn init(dir: &std::path::Path) -> ExitCode {
    match entiserve::shipped::init(dir) {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn check(dir: Option<PathBuf>) -> ExitCode {
    let (dir, built_in) = entities_dir(dir);
    let plugins = entiserve::plugins::Registry::builtin().names();
    let compiled = if built_in {
        println!("no entities directory: checking the shipped entities built in");
        entiserve::schema::compile_sources(&entiserve::shipped::sources(), &plugins)
    } else {
        entiserve::schema::compile_dir(&dir, &plugins)
    };
    match compiled {
        Ok(c) => {
            println!(
                "{} entities OK: {}",
                c.entities.len(),
                c.entities.keys().cloned().collect::<Vec<_>>().join(", ")
            );
            ExitCode::SUCCESS
        }
        Err(diags) => {
            for d in diags {
                println!("{d}");
            }
            ExitCode::FAILURE
        }
    }
}

fn hook_types(dir: Option<PathBuf>, out: Option<PathBuf>) -> ExitCode {
    let (dir, built_in) = entities_dir(dir);
    let to_stdout = out.as_deref() == Some(std::path::Path::new("-"));
    let plugins = entiserve::plugins::Registry::builtin().names();
    let compiled = if built_in {
        eprintln!("no entities directory: the types of the shipped entities built in");
        entiserve::schema::compile_sources(&entiserve::shipped::sources(), &plugins)
    } else {
        entiserve::schema::compile_dir(&dir, &plugins)
    };
    let catalog = match compiled {
        Ok(c) => c,
        Err(diags) => {
            for d in diags {
                if to_stdout {
                    eprintln!("{d}");
                } else {
                    println!("{d}");
                }
            }
            return ExitCode::FAILURE;
        }
    };
    let text = entiserve::hook_types::declarations(&catalog);
    if to_stdout {
        print!("{text}");
        return ExitCode::SUCCESS;
    }
    let file = out.unwrap_or_else(|| {
        let name = entiserve::hook_types::FILE_NAME;
        if built_in {
            PathBuf::from(name)
        } else {
            dir.join(name)
        }
    });
    match std::fs::write(&file, text) {
        Ok(()) => {
            println!("wrote {}", file.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            ExitCode::FAILURE
        }
    }
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only for a person at a terminal: a log file or a collector gets plain text.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.init(),
        // Each line one object: time, level, message and fields, and the spans it is in (the
        // HTTP request's id among them).
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    let app = entiserve::App::build(settings).await?;
    if let Some(p) = &app.generated_admin_password {
        eprintln!("created user `admin` with password: {p}");
        eprintln!("(set ENTISERVE_ADMIN_PASSWORD to choose it; this is shown only once)");
    }
    eprintln!("entiserve listening on http://{}", app.addr());
    app.run_until(shutdown_signal()).await
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
    tracing::info!("shutting down");
}

/// Hands freed memory back to the OS soon (5 ms) and commits arena memory only as it is used, so
/// that the resident size follows the work in hand (an upload of any size stays within a few
/// tens of megabytes). Either is left as mimalloc's own `MIMALLOC_ARENA_EAGER_COMMIT` or
/// `MIMALLOC_PURGE_DELAY` sets it, for an operator who trades memory for speed.
///
/// On Linux the process also opts out of transparent huge pages (unless `MIMALLOC_ALLOW_THP`
/// says otherwise): mimalloc asks for them on its arenas, and with 2 MiB pages a few scattered
/// small objects keep whole huge pages resident, which cost a 1M-row upload about 20 MB of
/// resident memory for no measurable speed.
fn tune_allocator() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process; failure changes nothing.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
    const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: setting documented options; mimalloc reads them on each use.
    unsafe {
        if std::env::var_os("MIMALLOC_ARENA_EAGER_COMMIT").is_none() {
            libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        }
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            libmimalloc_sys::mi_option_set(PURGE_DELAY, 5);
        }
    }
}

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
