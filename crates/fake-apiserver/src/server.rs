//! `FakeApiServer`: binds the router on a local port and hands out URLs, kube clients and
//! kubeconfigs pointing at it.

use std::net::SocketAddr;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::cluster::Cluster;
use crate::error::ServerError;
use crate::faults::Faults;
use crate::routes::{Shared, router};
use crate::store::{DEFAULT_HISTORY, Store};

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// Changes kept for watch replay.
    pub history: usize,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history: DEFAULT_HISTORY,
            bookmark_interval: Duration::from_secs(1),
        }
    }
}

/// A running fake Kubernetes API server; stops when dropped. Derefs to [`Cluster`] for
/// direct state access.
#[derive(Debug)]
pub struct FakeApiServer {
    cluster: Cluster,
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
}

impl FakeApiServer {
    /// Starts a server on `127.0.0.1:0` with default options.
    pub async fn start() -> Result<Self, ServerError> {
        Self::start_with(ServerOptions::default()).await
    }

    /// Starts a server with the given options.
    pub async fn start_with(options: ServerOptions) -> Result<Self, ServerError> {
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|source| ServerError::Bind {
                addr: options.listen.to_string(),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: options.listen.to_string(),
            source,
        })?;
        let shared = Arc::new(Shared {
            store: Store::new(options.history),
            faults: Faults::default(),
            bookmark_interval: options.bookmark_interval,
        });
        let app = router(shared.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let serving = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(error) = serving.await {
                tracing::error!(%error, "fake API server stopped");
            }
        });
        Ok(Self {
            cluster: Cluster { shared },
            addr,
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

    /// A cloneable handle on the state.
    pub fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    /// A `kube::Client` for this server with default namespace `default`.
    pub fn kube_client(&self) -> Result<kube::Client, ServerError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = self.url();
        let uri = url.parse().expect("a socket address forms a valid URI");
        kube::Client::try_from(kube::Config::new(uri))
            .map_err(|source| ServerError::Client { url, source })
    }

    /// A kubeconfig (context `fake`, namespace `default`) for kubectl or a separate process.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_yaml(&self.url())
    }

    /// Writes [`Self::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), ServerError> {
        std::fs::write(path, self.kubeconfig_yaml()).map_err(|source| ServerError::Kubeconfig {
            path: path.display().to_string(),
            source,
        })
    }
}

/// A kubeconfig pointing at `url` without credentials.
pub fn kubeconfig_yaml(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {url}\n\
         contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\n\
         current-context: fake\nusers:\n- name: fake\n  user: {{}}\npreferences: {{}}\n"
    )
}

impl Deref for FakeApiServer {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.cluster.drop_watches();
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}
