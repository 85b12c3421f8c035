//! What the one-shot subcommands (`plan`, [`crate::dry_run`]; `orphans`,
//! [`crate::orphans`]) share: they read the cloud-config, connect, list from both APIs
//! and write a report, and fail for the same reasons.

use crate::config::ConfigError;
use crate::connect::ConnectError;

/// Why a one-shot subcommand could not run.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The cloud-config is missing, unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A client could not be built or CloudStack not be reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Listing Services or Nodes failed.
    #[error("cannot list {what}: {source}")]
    List {
        /// `Services` or `Nodes`.
        what: &'static str,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Listing CloudStack objects failed.
    #[error("reading CloudStack: {0}")]
    CloudStack(#[source] cloudstack::Error),
    /// Writing the report failed.
    #[error("cannot write the report: {0}")]
    Output(#[from] std::io::Error),
}
