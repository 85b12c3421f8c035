//! `FakeApiServer`: binds the router on a local port and hands out URLs, kube clients and
//! kubeconfigs pointing at it.

use std::net::SocketAddr;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::auth::{ADMIN_USER, AUTHENTICATED, MASTERS, UserInfo};
use crate::cluster::Cluster;
use crate::endpoint::Endpoint;
use crate::error::ServerError;
use crate::faults::Faults;
use crate::rbac;
use crate::routes::{Shared, router};
use crate::shared::Access;
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
    /// Authorise every request by RBAC (kube-apiserver's `--authorization-mode=RBAC`). The
    /// server then holds the bootstrap ClusterRoles and bindings, and
    /// [`FakeApiServer::kube_client`] and the kubeconfig use an admin token
    /// (`kubernetes-admin` in `system:masters`). Off (`AlwaysAllow`), every request is
    /// allowed once authenticated: without a bearer token it is anonymous, and a bearer
    /// token the server does not know is refused with 401 either way.
    ///
    /// kubectl sends a kubeconfig's credentials only over TLS (clientcmd checks
    /// `IsConfigTransportTLS`), and this server speaks plain HTTP: kubectl is anonymous
    /// against it, kube clients are not.
    pub rbac: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history: DEFAULT_HISTORY,
            bookmark_interval: Duration::from_secs(1),
            rbac: false,
        }
    }
}

impl ServerOptions {
    /// The default options with RBAC enforced.
    pub fn with_rbac() -> Self {
        Self {
            rbac: true,
            ..Self::default()
        }
    }
}

/// A running fake Kubernetes API server; stops when dropped. Derefs to [`Cluster`] for
/// direct state access.
#[derive(Debug)]
pub struct FakeApiServer {
    cluster: Cluster,
    endpoint: Endpoint,
    admin_token: Option<String>,
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
        let store = Store::new(options.history);
        let access = Access::default();
        let admin_token = options.rbac.then(|| {
            for (kind, object) in rbac::bootstrap_objects() {
                store
                    .create(kind, None, object)
                    .expect("the bootstrap policy is valid");
            }
            let token = uuid::Uuid::new_v4().simple().to_string();
            access.tokens.add_static(
                &token,
                UserInfo {
                    name: ADMIN_USER.into(),
                    groups: vec![MASTERS.into(), AUTHENTICATED.into()],
                },
            );
            token
        });
        let shared = Arc::new(Shared {
            store,
            faults: Faults::default(),
            bookmark_interval: options.bookmark_interval,
            access,
            rbac: options.rbac,
        });
        let endpoint = Endpoint::serve(listener, router(shared.clone())).map_err(|source| {
            ServerError::Bind {
                addr: options.listen.to_string(),
                source,
            }
        })?;
        Ok(Self {
            cluster: Cluster { shared },
            endpoint,
            admin_token,
        })
    }

    /// Starts a server on `127.0.0.1:0` that enforces RBAC ([`ServerOptions::with_rbac`]).
    pub async fn start_with_rbac() -> Result<Self, ServerError> {
        Self::start_with(ServerOptions::with_rbac()).await
    }

    /// The admin bearer token when RBAC is on.
    pub fn admin_token(&self) -> Option<&str> {
        self.admin_token.as_deref()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.endpoint.addr()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.endpoint.url()
    }

    /// Stops answering (see [`Endpoint`]): connections to [`Self::url`] are refused and
    /// the open ones, watches included, are cut. The store and its watch history are kept,
    /// as when the address fails over to another replica whose watch cache is warm; a
    /// restarted kube-apiserver starts its watch cache at the current revision and answers
    /// older resourceVersions 410, which is [`Cluster::compact`] before
    /// [`Self::resume_answering`]. Returns once a new connection would be refused.
    pub async fn stop_answering(&self) {
        self.endpoint.stop().await;
    }

    /// Answers again on the same address with the same store (and, unless it was
    /// compacted meanwhile, the same watch history). Returns once it listens.
    pub async fn resume_answering(&self) {
        self.endpoint.resume().await;
    }

    /// Another address serving this server's store, with its own [`Endpoint::stop`] and
    /// [`Endpoint::resume`]: a client that uses it can be cut off (a network partition)
    /// while the others are served. Stops serving when dropped.
    pub async fn open_endpoint(&self) -> Result<Endpoint, ServerError> {
        let listen = SocketAddr::from(([127, 0, 0, 1], 0));
        let bind_error = |source| ServerError::Bind {
            addr: listen.to_string(),
            source,
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(bind_error)?;
        Endpoint::serve(listener, router(self.cluster.shared.clone())).map_err(bind_error)
    }

    /// A cloneable handle on the state.
    pub fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    /// A `kube::Client` for this server with default namespace `default` (with the admin
    /// token when RBAC is on).
    pub fn kube_client(&self) -> Result<kube::Client, ServerError> {
        self.client_for(self.admin_token.as_deref())
    }

    /// A `kube::Client` sending `token` as its bearer token.
    pub fn kube_client_with_token(&self, token: &str) -> Result<kube::Client, ServerError> {
        self.client_for(Some(token))
    }

    fn client_for(&self, token: Option<&str>) -> Result<kube::Client, ServerError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = self.url();
        let uri = url.parse().expect("a socket address forms a valid URI");
        let mut config = kube::Config::new(uri);
        if let Some(token) = token {
            config.auth_info.token = Some(token.to_string().into());
        }
        kube::Client::try_from(config).map_err(|source| ServerError::Client { url, source })
    }

    /// A kubeconfig (context `fake`, namespace `default`) for kubectl or a separate process
    /// (with the admin token when RBAC is on).
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_with_token(&self.url(), self.admin_token.as_deref())
    }

    /// A kubeconfig like [`Self::kubeconfig_yaml`] authenticating with `token`.
    pub fn kubeconfig_yaml_with_token(&self, token: &str) -> String {
        kubeconfig_with_token(&self.url(), Some(token))
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
    kubeconfig_with_token(url, None)
}

fn kubeconfig_with_token(url: &str, token: Option<&str>) -> String {
    let user = match token {
        Some(token) => format!("\n    token: {token}"),
        None => " {}".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {url}\n\
         contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\n\
         current-context: fake\nusers:\n- name: fake\n  user:{user}\npreferences: {{}}\n"
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
    }
}
