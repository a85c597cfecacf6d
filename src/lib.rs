//! entiserve: entity definitions in YAML become a REST API with batches, durable background
//! requests and a CSV uploader.
//!
//! [`App::build`] opens the database, compiles the entities, prepares the tables and binds the
//! listener; [`App::run_until`] serves until a shutdown signal.

pub mod auth;
pub mod catalog;
pub mod engine;
pub mod http;
pub mod schema;
pub mod settings;
pub mod storage;
pub mod time;

use anyhow::Context;
use catalog::CatalogHandle;
use engine::Engine;
use poem::listener::{Acceptor, Listener, TcpListener};
use settings::Settings;
use std::net::SocketAddr;
use std::sync::Arc;

/// Plugin names entity files may use.
pub const KNOWN_PLUGINS: &[&str] = &[];

/// A built server, bound and ready to run.
pub struct App {
    state: Arc<http::AppState>,
    acceptor: poem::listener::TcpAcceptor,
    addr: SocketAddr,
    /// The admin password, when it was generated on this start.
    pub generated_admin_password: Option<String>,
}

impl App {
    /// Opens storage, compiles the catalog, prepares tables, creates the first admin and binds.
    pub async fn build(settings: Settings) -> anyhow::Result<App> {
        std::fs::create_dir_all(&settings.data_dir).with_context(|| {
            format!(
                "cannot create the data directory {}",
                settings.data_dir.display()
            )
        })?;
        let catalog =
            schema::compile_dir(&settings.entities_dir, KNOWN_PLUGINS).map_err(|diags| {
                let lines: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
                anyhow::anyhow!("the entity definitions have errors:\n{}", lines.join("\n"))
            })?;
        let url = settings.database_url();
        let storage = storage::connect(&url)
            .await
            .with_context(|| format!("cannot open the database {}", storage::redact(&url)))?;
        storage::ddl::apply(storage.as_ref(), &catalog)
            .await
            .context("cannot prepare the entity tables")?;
        let auth = Arc::new(auth::Auth::new(storage.clone()));
        let forget = auth.clone();
        let engine = Engine {
            catalog: CatalogHandle::new(catalog),
            storage: storage.clone(),
            user_changed: Arc::new(move |id| forget.cache.forget_user(id)),
        };
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
        let state = Arc::new(http::AppState {
            engine,
            auth,
            settings: Arc::new(settings),
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
        tracing::info!(addr = %self.addr, "listening");
        poem::Server::new_with_acceptor(self.acceptor)
            .run_with_graceful_shutdown(http::app(self.state), shutdown, Some(grace))
            .await?;
        storage.close().await;
        tracing::info!("stopped");
        Ok(())
    }
}
