//! `fake-apiserver`: runs the fake Kubernetes API server standalone (for the demo and
//! kubectl) and prints its URL.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use fake_apiserver::{DEFAULT_HISTORY, FakeApiServer, ServerOptions, parse_token_file};

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    version,
    about = "A small, faithful Kubernetes API server for tests and demos"
)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8001")]
    listen: SocketAddr,
    /// Changes kept for watch replay.
    #[arg(long, default_value_t = DEFAULT_HISTORY)]
    history: usize,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 1)]
    bookmark_interval_seconds: u64,
    /// Also write a kubeconfig pointing at the server to this file.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Authorise requests by RBAC (`RBAC`) or allow everything (`AlwaysAllow`); bearer
    /// tokens are checked either way.
    #[arg(long, default_value = "AlwaysAllow", value_parser = ["AlwaysAllow", "RBAC"])]
    authorization_mode: String,
    /// Bearer tokens: lines of `token,user,uid[,"group1,group2"]`, as kube-apiserver's; any
    /// other bearer token is refused with 401, whatever the authorization mode.
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let server = FakeApiServer::start_with(ServerOptions {
        listen: args.listen,
        history: args.history,
        bookmark_interval: Duration::from_secs(args.bookmark_interval_seconds.max(1)),
        rbac: args.authorization_mode == "RBAC",
    })
    .await
    .context("starting the fake API server")?;
    if let Some(path) = &args.token_auth_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --token-auth-file {}", path.display()))?;
        let entries = parse_token_file(&text)
            .map_err(|error| anyhow::anyhow!("--token-auth-file {}: {error}", path.display()))?;
        for (token, user) in entries {
            server.add_token(&token, user);
        }
    }
    if let Some(path) = &args.kubeconfig {
        server
            .write_kubeconfig(path)
            .with_context(|| format!("writing kubeconfig {}", path.display()))?;
    }
    println!("{}", server.url());
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}
