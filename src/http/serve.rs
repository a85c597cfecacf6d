//! Serves an endpoint on the connections an acceptor gives, with hyper directly (HTTP/1.1, and
//! HTTP/2 with prior knowledge), until a shutdown signal, then lets open requests finish for up
//! to a grace period.
//!
//! poem's own `Server` does the same, but hands hyper every connection behind a boxed,
//! split stream that cannot write vectored: hyper then copies every response chunk into its
//! buffer before writing it, which is most of the cost of a large streamed response (live
//! changes, an export). Here hyper gets the accepted stream itself, queues the chunks and
//! writes them with one system call.
//!
//! A connection whose stream is [`Watched`] by the header timeout ([`super::conn`]) is marked
//! busy while each of its requests is being handled.

use super::conn::{ConnState, Watched};
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use poem::listener::Acceptor;
use poem::web::{LocalAddr, RemoteAddr};
use poem::{Endpoint, IntoEndpoint};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The HTTP/2 limits poem's server sets: streams a client may reset before being accepted,
/// and the size of a header list.
const H2_PENDING_RESETS: usize = 20;
const H2_MAX_HEADER_LIST: u32 = 16 * 1024;

/// Serves `ep` on what `acceptor` accepts until `shutdown` completes; then stops accepting,
/// asks every connection to close once its requests are done, and waits for them up to
/// `grace` (without end when `None`) before dropping those left.
pub async fn run<A, E>(
    mut acceptor: A,
    ep: E,
    shutdown: impl Future<Output = ()>,
    grace: Option<Duration>,
) -> std::io::Result<()>
where
    A: Acceptor,
    A::Io: Watched,
    E: IntoEndpoint,
    E::Endpoint: 'static,
{
    // The endpoint keeps its own type: a boxed one would box every request's future again,
    // inside the box `serve_one` puts it in.
    let ep = Arc::new(ep.into_endpoint());
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .max_pending_accept_reset_streams(H2_PENDING_RESETS)
        .max_header_list_size(H2_MAX_HEADER_LIST);
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let cut = CancellationToken::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = acceptor.accept() => match accepted {
                Ok((io, local, remote, scheme)) => {
                    let watched = io.watched();
                    let conn = Conn { ep: ep.clone(), local, remote, scheme, watched };
                    serve_one(&builder, &graceful, &cut, io, conn);
                }
                Err(e) => tracing::debug!(error = %e, "accepting a connection failed"),
            },
        }
    }
    drop(acceptor);
    let done = graceful.shutdown();
    match grace {
        Some(t) => {
            if tokio::time::timeout(t, done).await.is_err() {
                tracing::info!("grace period over: closing the connections left");
            }
        }
        None => done.await,
    }
    cut.cancel();
    Ok(())
}

/// A response as hyper takes it.
type Reply = poem::http::Response<BoxBody<bytes::Bytes, std::io::Error>>;

/// What every request of one connection is served with.
struct Conn<E> {
    ep: Arc<E>,
    local: LocalAddr,
    remote: RemoteAddr,
    scheme: poem::http::uri::Scheme,
    /// The state the header timeout watches, when it watches this connection.
    watched: Option<Arc<ConnState>>,
}

impl<E> Clone for Conn<E> {
    fn clone(&self) -> Self {
        Conn {
            ep: self.ep.clone(),
            local: self.local.clone(),
            remote: self.remote.clone(),
            scheme: self.scheme.clone(),
            watched: self.watched.clone(),
        }
    }
}

impl<E: Endpoint> Conn<E> {
    async fn respond(self, req: poem::http::Request<Incoming>) -> Result<Reply, Infallible> {
        let _busy = self.watched.as_ref().map(ConnState::busy);
        let req = poem::Request::from((req, self.local, self.remote, self.scheme));
        Ok(self.ep.get_response(req).await.into())
    }
}

/// Serves one connection on its own task, watched by `graceful` and dropped when `cut` is
/// cancelled.
fn serve_one<I, E>(
    builder: &Arc<auto::Builder<TokioExecutor>>,
    graceful: &GracefulShutdown,
    cut: &CancellationToken,
    io: I,
    conn: Conn<E>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    E: Endpoint + 'static,
{
    // Each request's future is boxed: hyper keeps a place for the future of the request in
    // flight for as long as the connection lives, and the endpoint's whole future (several KB)
    // there would cost every idle connection, a held event stream among them, that much.
    let service = hyper::service::service_fn(move |req| Box::pin(conn.clone().respond(req)));
    let serving = builder
        .serve_connection(TokioIo::new(io), service)
        .into_owned();
    let serving = graceful.watch(serving);
    let cut = cut.clone();
    tokio::spawn(async move {
        tokio::select! {
            r = serving => if let Err(e) = r {
                tracing::debug!(error = %e, "a connection ended with an error");
            },
            _ = cut.cancelled() => {}
        }
    });
}
