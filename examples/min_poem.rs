//! The HTTP stack's own ceiling on this machine: a poem server that answers `GET /healthz` with
//! a fixed body and does nothing else. `benches/http_path.sh` measures it beside entiserve's
//! `/healthz` and GET by id.
//!
//! ```text
//! cargo run --release --example min_poem -- --bind 127.0.0.1:18182
//! ```
//!
//! It runs as `entiserve serve` does: the same global allocator with the same options, the same
//! tokio runtime (`Runtime::new`: multi-threaded, one worker per core), the same poem version and
//! release profile. Its body is the one entiserve's `/healthz` answers.
//!
//! `--layer` adds entiserve's own layers one at a time, so that `benches/http_path.sh`
//! (`LAYERS=1`) can tell what each costs a request: `serve` answers through entiserve's
//! connection handling ([`entiserve::http::serve`]) instead of poem's `Server`, `timed` adds the
//! header timeout ([`entiserve::http::conn`]), and `api` answers with entiserve's fixed API (its
//! poem-openapi service and its own `/healthz` operation) instead of the fixed handler. What
//! `entiserve serve` adds to `api` is its front layer ([`entiserve::http`]: request id, origin
//! check, metrics, the routing by the route table).
//!
//! ```text
//! cargo run --release --example min_poem -- --bind 127.0.0.1:18184 --layer api
//! ```

use clap::{Parser, ValueEnum};
use entiserve::http::conn::TimedAcceptor;
use entiserve::settings::Settings;
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{IntoEndpoint, Response, Route, Server, get, handler};
use std::net::SocketAddr;

#[derive(Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:18182")]
    bind: SocketAddr,
    /// How much of entiserve's stack answers.
    #[arg(long, value_enum, default_value_t = Layer::Poem)]
    layer: Layer,
}

/// The stack a request goes through, each adding to the one before.
#[derive(Clone, Copy, ValueEnum)]
enum Layer {
    /// poem's `Server` and a handler with a fixed body.
    Poem,
    /// entiserve's connection handling instead of poem's `Server`.
    Serve,
    /// and the header timeout on every connection.
    Timed,
    /// and entiserve's fixed API answering instead of the fixed handler.
    Api,
}

#[handler]
fn health() -> Response {
    Response::builder()
        .content_type("application/json; charset=utf-8")
        .body(r#"{"status":"ok"}"#)
}

fn main() -> std::io::Result<()> {
    tune_allocator();
    let args = Args::parse();
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let app = Route::new().at("/healthz", get(health));
        eprintln!("min_poem listening on http://{}", args.bind);
        let listener = TcpListener::bind(args.bind);
        match args.layer {
            Layer::Poem => Server::new(listener).run(app).await,
            Layer::Serve => serve(listener.into_acceptor().await?, app).await,
            Layer::Timed => serve(timed(listener.into_acceptor().await?), app).await,
            Layer::Api => {
                let acceptor = timed(listener.into_acceptor().await?);
                serve(acceptor, entiserve::http::api::service()).await
            }
        }
    })
}

/// The header timeout `entiserve serve` gives its connections by default.
fn timed<A: Acceptor>(acceptor: A) -> TimedAcceptor<A> {
    TimedAcceptor::new(acceptor, Settings::new(".", ".").header_timeout)
}

/// Serves `ep` as `entiserve serve` does, until the process is stopped.
async fn serve<A, E>(acceptor: A, ep: E) -> std::io::Result<()>
where
    A: Acceptor,
    A::Io: entiserve::http::conn::Watched,
    E: IntoEndpoint,
    E::Endpoint: 'static,
{
    entiserve::http::serve::run(acceptor, ep, std::future::pending(), None).await
}

/// The allocator options `entiserve serve` sets (see its `tune_allocator`): no transparent huge
/// pages, arena memory committed as it is used, freed memory handed back after 5 ms.
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
