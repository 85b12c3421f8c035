//! A small, faithful, in-process Kubernetes API server for tests and the demo.
//!
//! It serves core/v1 Nodes, Services, Pods, Namespaces, ServiceAccounts (with the
//! TokenRequest subresource) and Events, events.k8s.io/v1 Events (a second view of the
//! same Events), core/v1 Endpoints, discovery.k8s.io/v1 EndpointSlices,
//! coordination.k8s.io/v1 Leases and rbac.authorization.k8s.io/v1 Roles,
//! ClusterRoles and their bindings over real HTTP, with a global `resourceVersion`,
//! optimistic concurrency, `metav1.Status` errors, status subresources, finalizers,
//! JSON / merge / strategic merge patches, label and field selectors, watches with replay
//! and 410 Gone, discovery for kubectl, and fault injection. Started with
//! [`ServerOptions::rbac`], it authenticates bearer tokens and enforces RBAC like
//! kube-apiserver with `--authorization-mode=RBAC`. It answers TokenReviews and
//! SubjectAccessReviews from its tokens and its authorizer, for servers that delegate, and
//! SelfSubjectAccessReviews (`kubectl auth can-i`) for the requesting user.
//!
//! ```no_run
//! # async fn demo() -> Result<(), fake_apiserver::ServerError> {
//! let server = fake_apiserver::FakeApiServer::start().await?;
//! let client = server.kube_client()?;
//! server.create("nodes", None, serde_json::json!({ "metadata": { "name": "n1" } }))?;
//! # let _ = client; Ok(()) }
//! ```

mod auth;
mod cluster;
mod discovery;
mod endpoint;
mod error;
mod faults;
mod guard;
mod object;
mod openapi;
mod params;
mod patch;
mod protobuf;
mod rbac;
mod request_info;
mod resources;
mod review;
mod routes;
mod selector;
mod server;
mod shared;
mod store;
mod table;
mod validation;
mod watch;

pub use auth::{ADMIN_USER, UserInfo, parse_token_file};
pub use cluster::Cluster;
pub use endpoint::Endpoint;
pub use error::{ApiError, ServerError};
pub use faults::{Fault, Verb};
pub use patch::PatchType;
pub use resources::{RESOURCES, ResourceKind};
pub use server::{FakeApiServer, ServerOptions, kubeconfig_yaml};
pub use shared::Denial;
pub use store::{DEFAULT_HISTORY, DeleteOutcome};
