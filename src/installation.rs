//! The commands that copy an installation's data: `backup`, `restore` and `migrate-data` (part
//! of the `entiserve` binary; the work itself is in `entiserve::backup` and
//! `entiserve::migrate_data`).

use crate::compile_entities;
use entiserve::settings::Settings;
use std::path::PathBuf;
use std::process::ExitCode;

pub fn migrate_data(
    from: &str,
    to: &str,
    entities: Option<PathBuf>,
    storage_url: Option<&str>,
    data_dir: &std::path::Path,
) -> ExitCode {
    let (catalog, _) = match compile_entities(entities) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let store = match storage_url.map(|u| entiserve::files::Files::open(Some(u), data_dir)) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            eprintln!("error: --storage-url: {e:#}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    match rt.block_on(entiserve::migrate_data::run(from, to, &catalog)) {
        Ok(copied) => {
            let rows: u64 = copied.iter().map(|c| c.rows).sum();
            println!(
                "copied {rows} rows of {} tables from {} to {}",
                copied.len(),
                entiserve::storage::redact(from),
                entiserve::storage::redact(to)
            );
            let Some(store) = store else {
                return ExitCode::SUCCESS;
            };
            match rt.block_on(entiserve::migrate_data::copy_files(data_dir, &store)) {
                Ok((files, bytes)) => {
                    println!(
                        "copied {files} files ({bytes} bytes) from {} to {}",
                        data_dir.display(),
                        store.describe()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: copying the files: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

pub fn backup(
    to: String,
    list: bool,
    data_dir: PathBuf,
    database_url: Option<String>,
    storage_url: Option<String>,
) -> ExitCode {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let target = match entiserve::backup::Target::parse(&to) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    if list {
        return match rt.block_on(entiserve::backup::target::list(&target)) {
            Ok(all) => {
                for b in all {
                    println!("{b}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let mut s = Settings::new(data_dir.clone(), PathBuf::from("./entities"));
    s.database_url = database_url.filter(|u| !u.is_empty());
    let inst = entiserve::backup::Installation {
        data_dir,
        database_url: s.database_url(),
    };
    let store = storage_url.filter(|u| !u.trim().is_empty());
    match rt.block_on(entiserve::backup::target::take_from(
        &inst,
        store.as_deref(),
        &target,
    )) {
        Ok(location) => {
            println!("{location}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: the backup is not complete: {e:#}");
            ExitCode::FAILURE
        }
    }
}

pub fn restore(
    from: &str,
    data_dir: &std::path::Path,
    url: Option<String>,
    storage_url: Option<String>,
) -> ExitCode {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let store = storage_url.filter(|u| !u.trim().is_empty());
    match rt.block_on(entiserve::backup::target::restore_into(
        from,
        data_dir,
        store.as_deref(),
    )) {
        Ok(m) => {
            println!(
                "restored the backup of {} into {}: {} files{}",
                m.taken_dt,
                data_dir.display(),
                m.files.len(),
                if m.database.is_some() {
                    " and the SQLite database"
                } else {
                    ""
                }
            );
            if let Some(pg) = m.postgres.or(url) {
                match m.postgres_lsn {
                    Some(lsn) => println!(
                        "the database ({pg}) is restored with PostgreSQL's own tools; \
                         these files match it at write-ahead log position {lsn}"
                    ),
                    None => println!("the database ({pg}) is restored with PostgreSQL's own tools"),
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            let told = format!("{e:#}");
            // A refusal before anything was written says so itself.
            if told.contains("nothing was restored") {
                eprintln!("error: {told}");
            } else {
                eprintln!("error: the restore is not complete: {told}");
            }
            ExitCode::FAILURE
        }
    }
}
