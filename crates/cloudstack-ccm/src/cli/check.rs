//! The flags of `cloudstack-ccm check`.

use clap::{Args, ValueEnum};

/// How `cloudstack-ccm check` prints its report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum CheckOutput {
    /// Grouped lines for a person (coloured on a terminal).
    #[default]
    Text,
    /// One JSON document.
    Json,
}

/// Arguments of `cloudstack-ccm check`.
#[derive(Debug, Clone, Default, Args)]
pub struct CheckArgs {
    /// Report format.
    #[arg(long, value_enum, default_value = "text")]
    pub output: CheckOutput,
    /// Check the RBAC of this user instead of the kubeconfig's (an admin checking the
    /// controller's ServiceAccount: system:serviceaccount:kube-system:cloud-controller-manager).
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,
    /// Colour the report (default: only when standard output is a terminal).
    #[arg(long, value_name = "WHEN", default_value = "auto", value_parser = ["auto", "always", "never"])]
    pub color: String,
}

impl CheckArgs {
    /// Whether the text report is coloured.
    pub fn color(&self) -> bool {
        match self.color.as_str() {
            "always" => true,
            "never" => false,
            _ => std::io::IsTerminal::is_terminal(&std::io::stdout()),
        }
    }
}
