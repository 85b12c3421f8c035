//! cloudstack-ccm: a Kubernetes cloud controller manager for Apache CloudStack.
//!
//! Layout (see `docs/architecture.md`): `cloud/` asks CloudStack on behalf of
//! Kubernetes, `controllers/` watches and writes Kubernetes objects.

pub mod check;
pub mod cli;
pub mod cloud;
pub mod config;
pub mod connect;
pub mod controllers;
pub mod credentials;
#[cfg(feature = "demo")]
pub mod demo;

mod der;
pub mod dry_run;
pub mod file_watch;
pub mod leader;
pub mod metrics;
pub mod orphans;
pub mod reload;
pub mod server;
pub mod tool;

pub use cli::ManagerArgs;
pub use cloud::loadbalancer::ensure::Engine;
pub use config::CloudConfig;
pub use controllers::Context;
pub use metrics::Metrics;
