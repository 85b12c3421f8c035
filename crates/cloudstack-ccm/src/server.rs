//! The health and metrics server: `/healthz`, `/readyz`, `/livez` and `/metrics` on
//! `--bind-address:--secure-port`, over HTTPS with delegated authentication and
//! authorization as the Kubernetes cloud controller manager framework serves them
//! ([`Security::Secure`]: [`tls`], [`authn`], [`authz`], [`access`]), or over plain HTTP
//! open to everyone with `--insecure-plain-http` ([`Security::Plain`], not for production).
//!
//! The port is reachable by anything in the cluster network, so the server bounds what a
//! client can hold ([`ServerLimits`]): at most `max_connections` connections at once (one
//! more is accepted and closed at once), and a connection that does not complete its TLS
//! handshake or send a complete request header within `header_read_timeout` — a new one,
//! or a kept-alive one idle between requests — is closed. Idle or slow clients can
//! therefore take neither the process's file descriptors nor the runtime the controllers
//! share.

pub mod access;
pub mod authn;
pub mod authz;
mod cache;
pub mod client_cert;
pub mod front_proxy;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::cli::serving::ServingArgs;
use crate::leader::{ElectionState, LeaderStatus};
use crate::metrics::{self, Metrics};

/// Whether this replica is ready to serve: it leads with its caches synced, or it stands
/// by (has read the Lease and waits to take over).
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    leader: LeaderStatus,
    caches_synced: Arc<AtomicBool>,
}

impl Readiness {
    /// Readiness following `leader`, with caches not yet synced.
    pub fn new(leader: LeaderStatus) -> Self {
        Readiness {
            leader,
            caches_synced: Arc::default(),
        }
    }

    /// Marks the controllers' caches as synced (the first inventory refresh and watches done).
    pub fn mark_synced(&self) {
        self.caches_synced.store(true, Ordering::Release);
    }

    /// Whether the controllers' caches are synced.
    pub(crate) fn caches_synced(&self) -> bool {
        self.caches_synced.load(Ordering::Acquire)
    }

    /// The election status this readiness follows.
    pub fn leader(&self) -> &LeaderStatus {
        &self.leader
    }

    /// Ready when standing by, or leading with caches synced.
    pub(crate) fn is_ready(&self) -> bool {
        match self.leader.state() {
            ElectionState::Standby => true,
            ElectionState::Leading => self.caches_synced(),
            ElectionState::Starting | ElectionState::Stopped => false,
        }
    }
}

/// What the handlers read.
#[derive(Debug, Clone)]
pub struct ServerState {
    /// Served on `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Answers `/readyz`.
    pub readiness: Readiness,
}

/// The routes: `/healthz`, `/readyz`, `/metrics`.
pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(state)
}

/// Binds `addr` (port 0 picks a free port; see `TcpListener::local_addr`).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// What one client may hold of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections served at once; further ones are closed on accept.
    pub max_connections: usize,
    /// Time to send a complete request header, on a new connection and between the
    /// requests of a kept-alive one; the connection is closed after it.
    pub header_read_timeout: Duration,
}

impl Default for ServerLimits {
    /// 64 connections (probes and a few scrapers need a handful), 5 s per request header.
    fn default() -> Self {
        Self {
            max_connections: 64,
            header_read_timeout: Duration::from_secs(5),
        }
    }
}

/// Serves [`router`] on `listener` with the default [`ServerLimits`] until `shutdown`
/// resolves.
pub async fn serve(
    listener: TcpListener,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, state, ServerLimits::default(), shutdown).await
}

/// Serves [`router`] over plain HTTP on `listener` within `limits` until `shutdown`
/// resolves; open connections are closed then.
pub async fn serve_with(
    listener: TcpListener,
    state: ServerState,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_secured(listener, state, limits, Security::Plain, shutdown).await
}

/// How the port is served.
#[derive(Debug, Clone)]
pub enum Security {
    /// Plain HTTP, every path open to everyone (`--insecure-plain-http`).
    Plain,
    /// HTTPS, every path behind delegated authentication and authorization.
    Secure {
        /// The certificate and rustls configuration.
        tls: Box<tls::Tls>,
        /// Who may see what.
        delegation: Arc<access::Delegation>,
    },
}

impl Security {
    /// From the flags: plain with `--insecure-plain-http`, else HTTPS with the certificate
    /// of [`tls::from_args`] and the delegation of [`access::Delegation::from_args`]
    /// (reviews through `client` unless a kubeconfig flag names another server).
    pub async fn from_args(
        args: &ServingArgs,
        bind: std::net::IpAddr,
        client: &kube::Client,
    ) -> Result<Self, String> {
        if args.insecure_plain_http {
            tracing::warn!(
                "--insecure-plain-http: serving /healthz, /readyz, /livez and /metrics over plain HTTP to everyone; not for production"
            );
            return Ok(Security::Plain);
        }
        let tls = tls::from_args(args, bind).map_err(|error| error.to_string())?;
        let delegation = access::Delegation::from_args(args, client).await?;
        Ok(Security::Secure {
            tls: Box::new(tls),
            delegation: Arc::new(delegation),
        })
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        match self {
            Security::Plain => "http",
            Security::Secure { .. } => "https",
        }
    }
}

/// Serves [`router`] on `listener` within `limits`, secured as `security` says, until
/// `shutdown` resolves; open connections are closed then.
pub async fn serve_secured(
    listener: TcpListener,
    state: ServerState,
    limits: ServerLimits,
    security: Security,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    /// Pause after a failed accept (e.g. out of file descriptors), as axum does.
    const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
    let (app, acceptor, client_auth, _watch) = match security {
        Security::Plain => (router(state), None, None, None),
        Security::Secure { tls, delegation } => {
            let app = router(state).layer(axum::middleware::from_fn_with_state(
                delegation,
                access::guard,
            ));
            let watch = tls.watch().map(AbortOnDrop);
            (
                app,
                Some(tokio_rustls::TlsAcceptor::from(tls.config.clone())),
                tls.client_auth.clone(),
                watch,
            )
        }
    };
    let service = hyper_util::service::TowerToHyperService::new(app);
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        while connections.try_join_next().is_some() {}
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "health server: accepting a connection failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::debug!(
                max = limits.max_connections,
                "health server: connection limit reached; closing a new connection"
            );
            drop(stream);
            continue;
        };
        let service = service.clone();
        let acceptor = acceptor.clone();
        let client_auth = client_auth.clone();
        connections.spawn(async move {
            let _permit = permit;
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout);
            let result = match acceptor {
                None => {
                    http.serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await
                }
                Some(acceptor) => {
                    let handshake =
                        tokio::time::timeout(limits.header_read_timeout, acceptor.accept(stream));
                    match handshake.await {
                        Ok(Ok(stream)) => {
                            let identity = client_auth.map(|auth| {
                                auth.identify(stream.get_ref().1.peer_certificates().unwrap_or(&[]))
                            });
                            let service = WithClientCert { service, identity };
                            http.serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                                .await
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(%error, "health server: TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!("health server: TLS handshake timed out");
                            return;
                        }
                    }
                }
            };
            if let Err(error) = result {
                tracing::debug!(%error, "health server: connection ended with an error");
            }
        });
    }
    connections.shutdown().await;
    Ok(())
}

/// The connection's service, attaching who its client certificate says it is (when
/// client certificates are asked for) to each request.
struct WithClientCert<S> {
    service: S,
    identity: Option<client_cert::ConnectionIdentity>,
}

impl<S, B> hyper::service::Service<axum::http::Request<B>> for WithClientCert<S>
where
    S: hyper::service::Service<axum::http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, mut request: axum::http::Request<B>) -> Self::Future {
        if let Some(identity) = &self.identity {
            request.extensions_mut().insert(identity.clone());
        }
        self.service.call(request)
    }
}

/// Aborts a background task when dropped (the certificate watch ends with the server).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<ServerState>) -> impl IntoResponse {
    let readiness = &state.readiness;
    if readiness.is_ready() {
        return (StatusCode::OK, "ok".to_owned());
    }
    let reason = match readiness.leader().state() {
        ElectionState::Starting => "the leader lease has not been read yet",
        ElectionState::Stopped => "leader election has stopped",
        ElectionState::Leading | ElectionState::Standby => "caches are not synced yet",
    };
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("not ready: {reason}"),
    )
}

async fn metrics_text(State(state): State<ServerState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        state.metrics.encode(),
    )
}

#[cfg(test)]
mod tests {
    use super::Readiness;
    use crate::leader::{ElectionState, LeaderStatus};

    #[test]
    fn readiness_table() {
        let cases = [
            (ElectionState::Starting, false, false),
            (ElectionState::Starting, true, false),
            (ElectionState::Standby, false, true),
            (ElectionState::Leading, false, false),
            (ElectionState::Leading, true, true),
            (ElectionState::Stopped, true, false),
        ];
        for (state, synced, want) in cases {
            let readiness = Readiness::new(LeaderStatus::new());
            readiness.leader().set(state);
            if synced {
                readiness.mark_synced();
            }
            assert_eq!(readiness.is_ready(), want, "{state:?} synced={synced}");
        }
    }
}
