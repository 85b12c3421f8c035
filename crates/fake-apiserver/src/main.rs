//! `fake-apiserver`: runs the fake Kubernetes API server standalone (for the demo and
//! kubectl) and prints its URL.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use fake_apiserver::{DEFAULT_HISTORY, FakeApiServer, ServerOptions};

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
    })
    .await
    .context("starting the fake API server")?;
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
