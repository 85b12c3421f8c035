//! The addresses the server answers on, each of which a test can take down and bring back.
//!
//! A stopped kube-apiserver (a control-plane upgrade, a certificate rotation, a crash) is a
//! closed port: new connections are refused (`ECONNREFUSED`), and the connections that were
//! open, watch streams included, end with the process. When it comes back it serves the
//! same etcd, so every object and `resourceVersion` is as it was; watches resume from
//! their `resourceVersion` unless it was compacted meanwhile (see
//! [`Cluster::compact`](crate::Cluster::compact)).
//!
//! An [`Endpoint`] models that: [`Endpoint::stop`] closes its listening socket and cuts
//! every connection it accepted (reads and writes on them fail, so the HTTP connection and
//! any watch stream end), [`Endpoint::resume`] binds the same address again. The store
//! lives in the server, not in the endpoint, so nothing is lost. A server can open more
//! than one endpoint on the same store ([`FakeApiServer::open_endpoint`](crate::FakeApiServer::open_endpoint)):
//! stopping one of them is a network partition of the clients that use it.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

/// One address the server answers on.
#[derive(Debug)]
pub struct Endpoint {
    addr: SocketAddr,
    switch: Arc<Switch>,
    shutdown: Option<oneshot::Sender<()>>,
}

/// What a test asks of an endpoint and what its listener did about it.
#[derive(Debug)]
struct Switch {
    /// Whether the endpoint should answer.
    answering: watch::Sender<bool>,
    /// Whether its socket listens (the listener's acknowledgement).
    listening: watch::Sender<bool>,
    /// Bumped by every stop: connections accepted before it are cut.
    generation: watch::Sender<u64>,
}

impl Endpoint {
    /// Serves `app` on `listener` until the endpoint is dropped.
    pub(crate) fn serve(listener: TcpListener, app: Router) -> Result<Self, io::Error> {
        let addr = listener.local_addr()?;
        let switch = Arc::new(Switch {
            answering: watch::Sender::new(true),
            listening: watch::Sender::new(true),
            generation: watch::Sender::new(0),
        });
        let switched = SwitchedListener {
            addr,
            listener: Some(listener),
            answering: switch.answering.subscribe(),
            switch: switch.clone(),
        };
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let serving = axum::serve(switched, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(error) = serving.await {
                tracing::error!(%error, "fake API server stopped");
            }
        });
        Ok(Self {
            addr,
            switch,
            shutdown: Some(shutdown),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops answering, as a stopped kube-apiserver: returns once the socket is closed (a
    /// new connection is refused), after cutting every open connection.
    pub async fn stop(&self) {
        self.switch.answering.send_replace(false);
        self.switch.generation.send_modify(|g| *g += 1);
        let mut listening = self.switch.listening.subscribe();
        let _ = listening.wait_for(|listening| !*listening).await;
    }

    /// Answers again on the same address; returns once it listens.
    pub async fn resume(&self) {
        self.switch.answering.send_replace(true);
        let mut listening = self.switch.listening.subscribe();
        let _ = listening.wait_for(|listening| *listening).await;
    }

    /// Whether the endpoint answers.
    pub fn is_answering(&self) -> bool {
        *self.switch.answering.borrow()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// The listener of one endpoint: closes its socket while the endpoint is stopped and
/// binds the same address again when it resumes.
struct SwitchedListener {
    addr: SocketAddr,
    listener: Option<TcpListener>,
    answering: watch::Receiver<bool>,
    switch: Arc<Switch>,
}

/// A pause after a failed bind or accept, so a busy port is not spun on.
const RETRY: Duration = Duration::from_millis(20);

impl axum::serve::Listener for SwitchedListener {
    type Io = Severable;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if !*self.answering.borrow_and_update() {
                // Dropping the listener closes the socket: connections are refused.
                self.listener = None;
                self.switch.listening.send_replace(false);
                let _ = self.answering.changed().await;
                continue;
            }
            let listener = match self.listener.take() {
                Some(listener) => listener,
                None => match TcpListener::bind(self.addr).await {
                    Ok(listener) => listener,
                    Err(error) => {
                        tracing::warn!(addr = %self.addr, %error, "cannot listen again; retrying");
                        tokio::time::sleep(RETRY).await;
                        continue;
                    }
                },
            };
            self.switch.listening.send_replace(true);
            let accepted = tokio::select! {
                accepted = listener.accept() => Some(accepted),
                _ = self.answering.changed() => None,
            };
            self.listener = Some(listener);
            match accepted {
                Some(Ok((stream, remote))) => return (self.severable(stream), remote),
                Some(Err(error)) => {
                    tracing::debug!(%error, "accept failed");
                    tokio::time::sleep(RETRY).await;
                }
                None => {}
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

impl SwitchedListener {
    /// `stream`, cut when the endpoint stops next.
    fn severable(&self, stream: TcpStream) -> Severable {
        let mut generation = self.switch.generation.subscribe();
        let accepted_in = *generation.borrow_and_update();
        let cut = Box::pin(async move {
            let _ = generation.wait_for(|g| *g != accepted_in).await;
        });
        Severable {
            stream,
            cut: Some(cut),
        }
    }
}

/// An accepted connection that fails every read and write once its endpoint stops (and
/// so is closed by the HTTP server, as the connections of a stopped process are).
pub(crate) struct Severable {
    stream: TcpStream,
    /// Resolves when the endpoint stops; `None` once it has.
    cut: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Severable {
    /// Whether the endpoint stopped since this connection was accepted.
    fn is_cut(&mut self, cx: &mut Context<'_>) -> bool {
        match &mut self.cut {
            None => true,
            Some(cut) => {
                if cut.as_mut().poll(cx).is_ready() {
                    self.cut = None;
                    true
                } else {
                    false
                }
            }
        }
    }
}

fn reset() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "the API server stopped answering",
    )
}

impl AsyncRead for Severable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.is_cut(cx) {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Severable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.is_cut(cx) {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.is_cut(cx) {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
