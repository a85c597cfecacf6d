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

use clap::Parser;
use poem::listener::TcpListener;
use poem::{Response, Route, Server, get, handler};
use std::net::SocketAddr;

#[derive(Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:18182")]
    bind: SocketAddr,
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
        Server::new(TcpListener::bind(args.bind)).run(app).await
    })
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
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
