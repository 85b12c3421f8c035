//! Why the demo failed: one error type shared by the demo's modules.

use std::time::Duration;

use crate::config::ConfigError;
use crate::connect::ConnectError;

/// Why the demo failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The simulator did not start.
    #[error("cannot start the CloudStack simulator: {0}")]
    Simulator(#[from] cloudstack_sim::SimError),
    /// The Kubernetes API server did not start or refused a request.
    #[error("Kubernetes API server: {0}")]
    ApiServer(Box<fake_apiserver::ServerError>),
    /// The demo's own set-up is inconsistent.
    #[error("demo set-up: {0}")]
    Scenario(String),
    /// The generated cloud-config was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The controllers could not connect.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// A request of the demo to the API server failed.
    #[error("cannot {action} {object}: {source}")]
    Kube {
        /// `create`, `patch`, `delete`, `list`.
        action: &'static str,
        /// The object.
        object: String,
        /// The server's answer.
        #[source]
        source: Box<fake_apiserver::ServerError>,
    },
    /// A phase did not reach its goal in time.
    #[error(
        "{phase}: not converged within the {timeout:?} time limit; still waiting for {waiting_for}"
    )]
    NotConverged {
        /// The phase.
        phase: String,
        /// What was still missing.
        waiting_for: String,
        /// The demo's time limit.
        timeout: Duration,
    },
    /// The controllers failed or stopped early.
    #[error("controllers: {0}")]
    Controllers(String),
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

impl From<fake_apiserver::ServerError> for DemoError {
    fn from(error: fake_apiserver::ServerError) -> Self {
        DemoError::ApiServer(Box::new(error))
    }
}
