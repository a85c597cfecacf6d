//! entiserve: entity definitions in YAML become a REST API with batches, durable background
//! requests and a CSV uploader.
//!
//! [`App::build`] opens the database, compiles the entities, prepares the tables and binds the
//! listener; [`App::run_until`] serves until a shutdown signal.

pub mod allocator;
pub mod auth;
pub mod backup;
pub mod catalog;
pub mod client;
pub mod csvsafe;
pub mod decimal;
pub mod engine;
pub mod evolve;
pub mod files;
pub mod hook_types;
pub mod http;
pub mod input;
pub mod item_texts;
pub mod jobs;
pub mod live;
pub mod migrate_data;
pub mod objects;
pub mod openapi;
pub mod pdf;
#[path = "../plugins/mod.rs"]
pub mod plugins;
pub mod reload;
pub mod request_id;
pub mod routes;
pub mod schema;
pub mod script;
pub mod settings;
pub mod shipped;
pub mod storage;
pub mod telemetry;
pub mod time;
pub mod uploader;

use anyhow::Context;
use catalog::CatalogHandle;
use engine::Engine;
use poem::listener::{Acceptor, Listener, TcpListener};
use settings::Settings;
use std::net::SocketAddr;
use std::sync::Arc;

/// How this server names itself in the history of entity changes: host, process, address.
pub fn server_name(settings: &Settings) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host} pid {} on {}", std::process::id(), settings.bind)
}

/// The entities in force: the entities directory's, or the shipped ones built in; every
/// error of their definitions at once.
fn compile_catalog(
    settings: &Settings,
    plugins: &plugins::Registry,
) -> anyhow::Result<schema::Catalog> {
    let compiled = if settings.built_in_entities {
        tracing::info!("no entities directory: serving the shipped entities built in");
        schema::compile_sources(&shipped::sources(), &plugins.names())
    } else {
        schema::compile_dir(&settings.entities_dir, &plugins.names())
    };
    compiled.map_err(|diags| {
        let lines: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
        anyhow::anyhow!("the entity definitions have errors:\n{}", lines.join("\n"))
    })
}

/// Opens the database and brings its tables to `catalog`, refusing a change that would hide
/// or lose stored data.
async fn open_storage(
    settings: &Settings,
    catalog: &schema::Catalog,
) -> anyhow::Result<Arc<dyn storage::Storage>> {
    let url = settings.database_url();
    let storage = storage::connect(&url)
        .await
        .with_context(|| format!("cannot open the database {}", storage::redact(&url)))?;
    let outcome = evolve::run(
        storage.as_ref(),
        catalog,
        evolve::Mode::Apply,
        &server_name(settings),
    )
    .await?;
    if !outcome.refusals.is_empty() {
        let lines: Vec<String> = outcome.refusals.iter().map(|r| r.to_string()).collect();
        anyhow::bail!(
            "the entity definitions would hide or lose stored data; nothing was changed (`entiserve plan` shows every step):\n{}",
            lines.join("\n")
        );
    }
    for step in &outcome.steps {
        tracing::info!(%step, "entity tables changed");
    }
    Ok(storage)
}

/// Background workers per server.
const WORKERS: usize = 2;

/// A built server, bound and ready to run.
pub struct App {
    state: Arc<http::AppState>,
    acceptor: http::conn::TimedAcceptor<poem::listener::TcpAcceptor>,
    addr: SocketAddr,
    /// The admin password, when it was generated on this start.
    pub generated_admin_password: Option<String>,
}

impl App {
    /// [`App::build_with`] the built-in plugins.
    pub async fn build(settings: Settings) -> anyhow::Result<App> {
        App::build_with(settings, plugins::Registry::builtin()).await
    }

    /// Opens storage, compiles the catalog (entity files may name the plugins of `plugins`),
    /// prepares tables, creates the first admin and binds.
    pub async fn build_with(settings: Settings, plugins: plugins::Registry) -> anyhow::Result<App> {
        let plugins = Arc::new(plugins);
        telemetry::install();
        std::fs::create_dir_all(&settings.data_dir).with_context(|| {
            format!(
                "cannot create the data directory {}",
                settings.data_dir.display()
            )
        })?;
        let catalog = compile_catalog(&settings, &plugins)?;
        let storage = open_storage(&settings, &catalog).await?;
        let auth = Arc::new(auth::Auth::new(
            storage.clone(),
            settings.signin_free_failures,
        ));
        let forget = auth.clone();
        let engine = Engine::new(
            CatalogHandle::new(catalog),
            storage.clone(),
            Arc::new(move |id| forget.cache.forget_user(id)),
            plugins.clone(),
        )
        .named(server_name(&settings));
        let generated_admin_password = auth
            .bootstrap(&engine, settings.admin_password.clone())
            .await?;
        let acceptor = TcpListener::bind(settings.bind.to_string())
            .into_acceptor()
            .await
            .with_context(|| format!("cannot listen on {}", settings.bind))?;
        let addr = acceptor
            .local_addr()
            .first()
            .and_then(|a| a.as_socket_addr().copied())
            .context("the listener has no address")?;
        let settings = Arc::new(settings);
        let store = files::Files::open(settings.storage_url.as_deref(), &settings.data_dir)
            .context("--storage-url")?;
        if store.is_shared() {
            tracing::info!(store = %store.describe(), "files are kept in an object store; the data directory is scratch space");
        }
        let files = store.child(files::MEDIA_FILES);
        let kinds = jobs::kinds::Registry::default()
            .with(Arc::new(jobs::Items::batch()))
            .with(Arc::new(jobs::Items::call()))
            .with(Arc::new(jobs::undo::Undo))
            .with(Arc::new(uploader::kind::Upload {
                plugins: plugins.clone(),
                files: files.clone(),
            }));
        let jobs = jobs::Jobs::new(engine.clone(), settings.clone(), store, kinds);
        jobs.release_stale_local().await?;
        // Before anything is accepted, every scratch file no request owns is an orphan.
        jobs.sweep_scratch(std::time::Duration::ZERO).await?;
        engine::password::set_min_length(settings.min_password_length);
        script::pool::set_limits(settings.hook_limits);
        let acceptor = http::conn::TimedAcceptor::new(acceptor, settings.header_timeout);
        let live = live::Live::new(
            engine.clone(),
            settings.events_lag_max,
            settings.changes_keep,
        )
        .await
        .context("live changes")?;
        let state = Arc::new(http::AppState {
            live,
            engine,
            auth,
            settings,
            jobs,
            plugins,
            files,
            fixed_document: openapi::fixed_part(http::api::spec()),
        });
        Ok(App {
            state,
            acceptor,
            addr,
            generated_admin_password,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then lets running requests finish.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let grace = self.state.settings.shutdown_grace;
        let storage = self.state.engine.storage.clone();
        let jobs = self.state.jobs.clone();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut tasks = jobs.spawn_workers(WORKERS, stop_rx.clone());
        tasks.push(jobs.spawn_sweeper(stop_rx.clone()));
        tasks.push(spawn_token_purge(self.state.auth.clone(), stop_rx.clone()));
        tasks.extend(self.state.live.spawn(stop_rx.clone()));
        tasks.push(evolve::fleet::spawn(
            self.state.engine.clone(),
            stop_rx.clone(),
        ));
        if let Some(to) = self.state.settings.backup_to.as_deref() {
            tasks.push(backup::schedule::spawn(
                &self.state.settings,
                backup::Target::parse(to)?,
                stop_rx.clone(),
            ));
        }
        if let Some(addr) = self.state.settings.metrics_bind {
            tasks.push(http::metrics_server(addr, self.state.clone(), stop_rx.clone()).await?);
        }
        let entities = self.state.settings.entities_dir.clone();
        let engine = self.state.engine.clone();
        if !self.state.settings.built_in_entities {
            tasks.push(reload::spawn_sighup(
                engine.clone(),
                entities.clone(),
                stop_rx.clone(),
            ));
            if self.state.settings.dev {
                tasks.push(reload::spawn_watcher(engine, entities, stop_rx));
            }
        }
        tracing::info!(addr = %self.addr, worker = %jobs.worker_id, "listening");
        let live = self.state.live.clone();
        let shutdown = async move {
            shutdown.await;
            live.close();
        };
        http::serve::run(self.acceptor, http::app(self.state), shutdown, Some(grace)).await?;
        // Running chunks commit; then the leases are handed back for the next start.
        let _ = stop_tx.send(true);
        for t in tasks {
            let _ = t.await;
        }
        if let Err(e) = jobs.release_all().await {
            tracing::warn!(error = %e, "cannot release background request leases");
        }
        storage.close().await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// Removes expired tokens every minute.
fn spawn_token_purge(
    auth: Arc<auth::Auth>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match auth.purge().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "removed expired tokens"),
                Err(e) => tracing::error!(error = %e, "purging expired tokens failed"),
            }
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
                _ = stop.changed() => return,
            }
        }
    })
}
