//! The `entiserve` command line: `serve`, `check` and `init`; `plan`, `backup`, `restore` and
//! `migrate-data` on an installation; `entity-schema` and `hook-types` for editors; `upload`
//! and `bgrs`, the client of a running server (in `entiserve::client`).

mod args;
mod installation;

use args::{Cli, Command, LogFormat};
use clap::Parser;
use entiserve::settings::Settings;
use std::path::PathBuf;
use std::process::ExitCode;

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
static ALLOC: entiserve::allocator::MiMalloc = entiserve::allocator::MiMalloc;
