//! Connection timeouts. A connection must start its next request within the header timeout
//! of being accepted or of its last activity (its previous request ending, or the server
//! writing to it): a keep-alive connection left idle, or a client trickling its headers a byte
//! at a time, is closed then. While a request is being handled (its body read, its work done)
//! the connection is never closed for waiting; a streamed response keeps it open as long as it
//! writes.

use poem::listener::Acceptor;
use poem::web::{LocalAddr, RemoteAddr};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

type Key = (SocketAddr, SocketAddr);

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
}

/// The open connections, so that a request can find its own.
#[derive(Default)]
pub struct Connections {
    open: Mutex<HashMap<Key, Arc<ConnState>>>,
}

/// Marks a request as being handled on its connection until dropped.
pub struct Busy(Option<Arc<ConnState>>);

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(s) = &self.0 {
            s.touch();
            s.busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Connections {
    /// Marks the request from `remote` to `local` as being handled.
    pub fn busy(&self, local: &LocalAddr, remote: &RemoteAddr) -> Busy {
        let key = match (local.as_socket_addr(), remote.as_socket_addr()) {
            (Some(l), Some(r)) => (*l, *r),
            _ => return Busy(None),
        };
        let state = self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(s) = &state {
            s.busy.fetch_add(1, Ordering::AcqRel);
            s.touch();
        }
        Busy(state)
    }
}

/// An acceptor whose connections close when they wait too long for a request.
pub struct TimedAcceptor<A> {
    inner: A,
    timeout: Duration,
    conns: Arc<Connections>,
}

impl<A> TimedAcceptor<A> {
    pub fn new(inner: A, timeout: Duration, conns: Arc<Connections>) -> Self {
        TimedAcceptor {
            inner,
            timeout,
            conns,
        }
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
        let key = match (local.as_socket_addr(), remote.as_socket_addr()) {
            (Some(l), Some(r)) => {
                let key = (*l, *r);
                self.conns
                    .open
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, state.clone());
                Some(key)
            }
            _ => None,
        };
        let io = TimedIo {
            inner: io,
            state,
            timeout: self.timeout,
            deadline: Box::pin(tokio::time::sleep(self.timeout)),
            conns: self.conns.clone(),
            key,
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
    conns: Arc<Connections>,
    key: Option<Key>,
}

impl<T> Drop for TimedIo<T> {
    fn drop(&mut self) {
        if let Some(k) = &self.key {
            self.conns
                .open
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(k);
        }
    }
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
