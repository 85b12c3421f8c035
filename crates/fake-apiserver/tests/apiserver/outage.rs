//! The server stopping and coming back, as a kube-apiserver restarted on the same etcd:
//! connections refused while it is down, open watches cut, the same objects and
//! resourceVersions after, a watcher resuming from its resourceVersion, and one that
//! relists after a compaction answers its resourceVersion with 410 Gone. A second
//! endpoint on the same store can be cut off alone (a network partition).

use crate::common;

use std::time::Duration;

use common::{WAIT, eventually, start};
use fake_apiserver::Verb;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

fn service(name: &str) -> Service {
    serde_json::from_value(
        json!({ "metadata": { "name": name }, "spec": { "ports": [{ "port": 80 }] } }),
    )
    .unwrap()
}

/// Whether a TCP connection to `addr` is refused.
async fn refused(addr: std::net::SocketAddr) -> bool {
    match tokio::net::TcpStream::connect(addr).await {
        Err(error) => error.kind() == std::io::ErrorKind::ConnectionRefused,
        Ok(_) => false,
    }
}

#[tokio::test]
async fn a_stopped_server_refuses_connections_cuts_watches_and_comes_back_with_its_store() {
    let (server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    let created = services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    let version = created.metadata.resource_version.clone().unwrap();
    let mut stream = services
        .watch(&WatchParams::default().timeout(60), &version)
        .await
        .unwrap()
        .boxed();

    server.stop_answering().await;
    assert!(refused(server.addr()).await, "connections are refused");
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match stream.try_next().await {
                Ok(Some(WatchEvent::Bookmark(_))) => continue,
                Ok(None) | Err(_) => return,
                Ok(Some(other)) => panic!("no event while down: {other:?}"),
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the open watch ends with the server");
    let error = services.get("a").await.expect_err("no answer while down");
    assert!(!matches!(error, kube::Error::Api(_)), "{error:?}");

    server.resume_answering().await;
    let again = services.get("a").await.expect("answers again");
    assert_eq!(again.metadata.resource_version, Some(version.clone()));
    assert_eq!(again.metadata.uid, created.metadata.uid);
    // A watch from the version seen before the stop replays what changed meanwhile.
    server
        .create(
            "services",
            Some("default"),
            json!({ "metadata": { "name": "b" } }),
        )
        .unwrap();
    let mut resumed = services
        .watch(&WatchParams::default().timeout(5), &version)
        .await
        .unwrap()
        .boxed();
    match resumed.try_next().await.unwrap() {
        Some(WatchEvent::Added(svc)) => assert_eq!(svc.metadata.name.as_deref(), Some("b")),
        other => panic!("expected b ADDED, got {other:?}"),
    }
}

#[tokio::test]
async fn compaction_answers_an_older_resource_version_with_410_gone() {
    let (server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    let first = services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    services
        .create(&PostParams::default(), &service("b"))
        .await
        .unwrap();
    server.compact();
    let old = first.metadata.resource_version.unwrap();
    let mut stream = services
        .watch(&WatchParams::default().timeout(5), &old)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await {
        Ok(Some(WatchEvent::Error(status))) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    // The latest version is still watchable.
    let latest = server.resource_version().to_string();
    let mut stream = services
        .watch(&WatchParams::default().timeout(1), &latest)
        .await
        .unwrap()
        .boxed();
    assert!(
        !matches!(stream.try_next().await, Ok(Some(WatchEvent::Error(_)))),
        "a watch from the latest version is served"
    );
}

/// A reflector over Services and its task; the task ends with the test.
fn reflect(services: Api<Service>) -> (reflector::Store<Service>, tokio::task::JoinHandle<()>) {
    let (reader, writer) = reflector::store::<Service>();
    let stream = reflector(
        writer,
        watcher(services, watcher::Config::default()).default_backoff(),
    );
    (reader, tokio::spawn(stream.for_each(|_| async {})))
}

async fn outage_then_change(compact: bool) -> (u64, usize) {
    let (server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    let (reader, task) = reflect(services);
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    eventually("the watch to open", || {
        let watches = server.request_count(Verb::Watch, "services");
        async move { (watches >= 1).then_some(()) }
    })
    .await;

    server.stop_answering().await;
    server
        .create(
            "services",
            Some("default"),
            json!({ "metadata": { "name": "made-while-down" } }),
        )
        .unwrap();
    if compact {
        server.compact();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.resume_answering().await;
    eventually("the reflector to see the change made while down", || {
        let count = reader.state().len();
        async move { (count == 2).then_some(()) }
    })
    .await;
    task.abort();
    (
        server.request_count(Verb::List, "services"),
        reader.state().len(),
    )
}

#[tokio::test]
async fn a_watcher_resumes_from_its_resource_version_after_the_server_comes_back() {
    let (lists, seen) = outage_then_change(false).await;
    assert_eq!(seen, 2);
    assert_eq!(lists, 1, "no relist: the watch resumed from its version");
}

#[tokio::test]
async fn a_watcher_relists_when_its_version_was_compacted_during_the_outage() {
    let (lists, seen) = outage_then_change(true).await;
    assert_eq!(seen, 2);
    assert_eq!(lists, 2, "one initial list, one relist after 410 Gone");
}

#[tokio::test]
async fn stopping_a_second_endpoint_partitions_only_its_clients() {
    let (server, client) = start().await;
    let endpoint = server.open_endpoint().await.unwrap();
    let mut config = kube::Config::new(endpoint.url().parse().unwrap());
    config.read_timeout = Some(Duration::from_secs(5));
    let partitioned: Api<Service> =
        Api::default_namespaced(kube::Client::try_from(config).unwrap());
    let served: Api<Service> = Api::default_namespaced(client);
    partitioned
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();

    endpoint.stop().await;
    assert!(!endpoint.is_answering());
    assert!(refused(endpoint.addr()).await);
    assert!(partitioned.get("a").await.is_err(), "cut off");
    assert!(
        served.get("a").await.is_ok(),
        "the main address still answers"
    );

    endpoint.resume().await;
    assert_eq!(
        partitioned.get("a").await.unwrap().metadata.name.as_deref(),
        Some("a")
    );
}
