//! Connection timeouts. A connection must start its next request within the header timeout
//! of being accepted or of its last activity (its previous request ending, or the server
//! writing to it): a keep-alive connection left idle, or a client trickling its headers a byte
//! at a time, is closed then. While a request is being handled (its body read, its work done)
//! the connection is never closed for waiting; a streamed response keeps it open as long as it
//! writes.
//!
//! The server ([`super::serve`]) marks a connection busy for each request it carries, through
//! the stream's [`Watched`] state; no request has to look its connection up.

use poem::listener::Acceptor;
use poem::web::{LocalAddr, RemoteAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One connection's state, shared by its stream and the requests it carries.
pub struct ConnState {
    /// Requests being handled.
    busy: AtomicUsize,
    /// Milliseconds since `epoch` of the last activity.
    last: AtomicU64,
    epoch: Instant,
}

impl ConnState {
    fn touch(&self) {
        self.last
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let now = self.epoch.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last.load(Ordering::Relaxed)))
    }

    /// Marks a request as being handled on this connection until the mark is dropped.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.touch();
        Busy(self.clone())
    }
}

/// Marks a request as being handled on its connection until dropped.
pub struct Busy(Arc<ConnState>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's stream that may carry the state its timeout watches.
pub trait Watched {
    /// The state, when the stream's connection has a timeout.
    fn watched(&self) -> Option<Arc<ConnState>> {
        None
    }
}

impl Watched for tokio::net::TcpStream {}

impl<T> Watched for TimedIo<T> {
    fn watched(&self) -> Option<Arc<ConnState>> {
        Some(self.state.clone())
    }
}

/// An acceptor whose connections close when they wait too long for a request.
pub struct TimedAcceptor<A> {
    inner: A,
    timeout: Duration,
}

impl<A> TimedAcceptor<A> {
    pub fn new(inner: A, timeout: Duration) -> Self {
        TimedAcceptor { inner, timeout }
    }
}

impl<A: Acceptor> Acceptor for TimedAcceptor<A> {
    type Io = TimedIo<A::Io>;

    fn local_addr(&self) -> Vec<LocalAddr> {
        self.inner.local_addr()
    }

    async fn accept(
        &mut self,
    ) -> std::io::Result<(Self::Io, LocalAddr, RemoteAddr, poem::http::uri::Scheme)> {
        let (io, local, remote, scheme) = self.inner.accept().await?;
        let state = Arc::new(ConnState {
            busy: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let io = TimedIo {
            inner: io,
            state,
            timeout: self.timeout,
            deadline: Box::pin(tokio::time::sleep(self.timeout)),
        };
        Ok((io, local, remote, scheme))
    }
}

/// A connection's stream, closed when it waits for a request past the timeout.
pub struct TimedIo<T> {
    inner: T,
    state: Arc<ConnState>,
    timeout: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<T: AsyncRead + Unpin> AsyncRead for TimedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => {
                // Waiting for the client: check the clock, and re-arm it while the wait is
                // allowed.
                while this.deadline.as_mut().poll(cx).is_ready() {
                    let idle = this.state.idle_for();
                    if this.state.busy.load(Ordering::Acquire) == 0 && idle >= this.timeout {
                        return Poll::Ready(Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "the connection waited too long for a request",
                        )));
                    }
                    let left = this
                        .timeout
                        .saturating_sub(idle)
                        .max(Duration::from_millis(10));
                    this.deadline
                        .as_mut()
                        .reset(tokio::time::Instant::now() + left);
                }
                Poll::Pending
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TimedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.state.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.state.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
