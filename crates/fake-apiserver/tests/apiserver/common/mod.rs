//! Shared helpers for the integration tests: a started server with a ready client, and a
//! bounded wait for a condition.

use std::future::Future;
use std::time::Duration;

use fake_apiserver::FakeApiServer;

/// Upper bound for any single wait in the tests.
pub const WAIT: Duration = Duration::from_secs(10);

/// A started server and a client for it.
pub async fn start() -> (FakeApiServer, kube::Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start().await.expect("server starts");
    let client = server.kube_client().expect("client builds");
    (server, client)
}

/// Polls `check` every 20 ms until it returns `Some`, failing after [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let poll = async {
        loop {
            if let Some(value) = check().await {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(WAIT, poll)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// The API error code and reason of a failed kube call.
pub fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> (u16, String, String) {
    match result {
        Err(kube::Error::Api(status)) => {
            (status.code, status.reason.clone(), status.message.clone())
        }
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The Status of a failed kube call.
pub fn api_status<T: std::fmt::Debug>(result: kube::Result<T>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// `(field, reason)` of each cause of a Status.
pub fn causes(status: &kube::core::Status) -> Vec<(String, String)> {
    status
        .details
        .iter()
        .flat_map(|d| &d.causes)
        .map(|c| (c.field.clone(), c.reason.clone()))
        .collect()
}
