//! The health and metrics server: `/healthz`, `/readyz` and `/metrics` over plain HTTP on
//! `--bind-address:--secure-port`.
//!
//! The Go CCM served these over HTTPS with a self-signed certificate; this server speaks
//! plain HTTP, so probes must use `scheme: HTTP`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

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
    pub fn caches_synced(&self) -> bool {
        self.caches_synced.load(Ordering::Acquire)
    }

    /// The election status this readiness follows.
    pub fn leader(&self) -> &LeaderStatus {
        &self.leader
    }

    /// Ready when standing by, or leading with caches synced.
    pub fn is_ready(&self) -> bool {
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

/// Serves [`router`] on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
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
