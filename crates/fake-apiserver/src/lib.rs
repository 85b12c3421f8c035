//! A small, faithful, in-process Kubernetes API server for tests and the demo.
//!
//! It serves core/v1 Nodes, Services, Pods, Namespaces and Events, events.k8s.io/v1
//! Events and coordination.k8s.io/v1 Leases over real HTTP, with a global
//! `resourceVersion`, optimistic concurrency, `metav1.Status` errors, status subresources,
//! finalizers, JSON / merge / strategic merge patches, label and field selectors, watches
//! with replay and 410 Gone, discovery for kubectl, and fault injection.
//!
//! ```no_run
//! # async fn demo() -> Result<(), fake_apiserver::ServerError> {
//! let server = fake_apiserver::FakeApiServer::start().await?;
//! let client = server.kube_client()?;
//! server.create("nodes", None, serde_json::json!({ "metadata": { "name": "n1" } }))?;
//! # let _ = client; Ok(()) }
//! ```

mod cluster;
mod discovery;
mod error;
mod faults;
mod object;
mod openapi;
mod patch;
mod resources;
mod routes;
mod selector;
mod server;
mod store;
mod watch;

pub use cluster::Cluster;
pub use error::{ApiError, ServerError};
pub use faults::{Fault, Verb};
pub use patch::PatchType;
pub use resources::{RESOURCES, ResourceKind};
pub use server::{FakeApiServer, ServerOptions, kubeconfig_yaml};
pub use store::{DEFAULT_HISTORY, DeleteOutcome};
