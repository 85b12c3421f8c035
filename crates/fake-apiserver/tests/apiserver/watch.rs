//! Watches over real HTTP: replay from a resourceVersion, 410 Gone for compacted versions,
//! watcher recovery by relisting, bookmarks, `timeoutSeconds`, streaming lists and
//! reflectors.

use crate::common;

use std::time::Duration;

use common::{WAIT, eventually, start};
use fake_apiserver::{FakeApiServer, Fault, ServerOptions, Verb};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

fn service(name: &str) -> Service {
    serde_json::from_value(
        json!({ "metadata": { "name": name }, "spec": { "ports": [{ "port": 80 }] } }),
    )
    .unwrap()
}

fn rv(svc: &Service) -> String {
    svc.metadata.resource_version.clone().unwrap()
}

#[tokio::test]
async fn watch_replays_changes_after_a_resource_version() {
    let (_server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    let first = services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    services
        .create(&PostParams::default(), &service("b"))
        .await
        .unwrap();
    let labels = json!({ "metadata": { "labels": { "x": "1" } } });
    services
        .patch("a", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    services
        .delete("b", &DeleteParams::default())
        .await
        .unwrap();

    let stream = services
        .watch(&WatchParams::default().timeout(5), &rv(&first))
        .await
        .unwrap();
    let events: Vec<_> = stream.take(3).try_collect().await.unwrap();
    let summary: Vec<(String, String)> = events
        .into_iter()
        .map(|e| match e {
            WatchEvent::Added(s) => ("ADDED".into(), s.metadata.name.unwrap()),
            WatchEvent::Modified(s) => ("MODIFIED".into(), s.metadata.name.unwrap()),
            WatchEvent::Deleted(s) => ("DELETED".into(), s.metadata.name.unwrap()),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("ADDED".into(), "b".into()),
            ("MODIFIED".into(), "a".into()),
            ("DELETED".into(), "b".into())
        ]
    );
}

#[tokio::test]
async fn compacted_resource_version_gets_410_gone() {
    let (server, client) = start().await;
    server.set_history_limit(2);
    let services: Api<Service> = Api::default_namespaced(client);
    let first = services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    for name in ["b", "c", "d"] {
        services
            .create(&PostParams::default(), &service(name))
            .await
            .unwrap();
    }
    let mut stream = services
        .watch(&WatchParams::default().timeout(5), &rv(&first))
        .await
        .unwrap()
        .boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status.message.starts_with("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn finalizer_removal_emits_deleted_event() {
    let (_server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    let mut svc = service("web");
    svc.metadata.finalizers = Some(vec!["example.com/f".into()]);
    let created = services.create(&PostParams::default(), &svc).await.unwrap();
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let clear = json!({ "metadata": { "finalizers": [] } });
    services
        .patch("web", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    let stream = services
        .watch(&WatchParams::default().timeout(5), &rv(&created))
        .await
        .unwrap();
    let events: Vec<_> = stream.take(2).try_collect().await.unwrap();
    assert!(
        matches!(&events[0], WatchEvent::Modified(s) if s.metadata.deletion_timestamp.is_some())
    );
    assert!(matches!(&events[1], WatchEvent::Deleted(_)));
}

#[tokio::test]
async fn bookmarks_arrive_and_timeout_ends_the_stream() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = ServerOptions {
        bookmark_interval: Duration::from_millis(100),
        ..ServerOptions::default()
    };
    let server = FakeApiServer::start_with(options).await.unwrap();
    let services: Api<Service> = Api::default_namespaced(server.kube_client().unwrap());
    let version = server.resource_version().to_string();
    let stream = services
        .watch(&WatchParams::default().timeout(1), &version)
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(WAIT, stream.try_collect::<Vec<_>>())
        .await
        .expect("the stream ends")
        .unwrap();
    assert!(
        events.iter().any(
            |e| matches!(e, WatchEvent::Bookmark(b) if b.metadata.resource_version == version)
        )
    );
}

#[tokio::test]
async fn reflector_fills_and_follows_changes() {
    let (server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store::<Service>();
    let stream = reflector(
        writer,
        watcher(services.clone(), watcher::Config::default()),
    )
    .applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reader.state().len(), 1);
    services
        .create(&PostParams::default(), &service("b"))
        .await
        .unwrap();
    services
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the store to follow", || {
        let names: Vec<String> = reader
            .state()
            .iter()
            .map(|s| s.metadata.name.clone().unwrap())
            .collect();
        async move { (names == ["b"]).then_some(()) }
    })
    .await;
    assert_eq!(server.request_count(Verb::List, "services"), 1);
    task.abort();
}

#[tokio::test]
async fn streaming_list_watcher_fills_a_store() {
    let (_server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    for name in ["a", "b"] {
        services
            .create(&PostParams::default(), &service(name))
            .await
            .unwrap();
    }
    let (reader, writer) = reflector::store::<Service>();
    let config = watcher::Config::default().streaming_lists();
    let task = tokio::spawn(reflector(writer, watcher(services, config)).for_each(|_| async {}));
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reader.state().len(), 2);
    task.abort();
}

#[tokio::test]
async fn watcher_relists_after_410_when_its_version_was_compacted() {
    let (server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store::<Service>();
    let stream = reflector(
        writer,
        watcher(services.clone(), watcher::Config::default()).default_backoff(),
    );
    let task = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    eventually("the first watch to open", || {
        let watches = server.request_count(Verb::Watch, "services");
        async move { (watches >= 1).then_some(()) }
    })
    .await;

    // The re-watch is held back while the history is compacted past the watcher's version.
    server.set_history_limit(1);
    server.set_faults(vec![
        Fault::latency(Duration::from_millis(300)).on(Verb::Watch, "services"),
    ]);
    server.drop_watches();
    for name in ["b", "c", "d"] {
        server
            .create(
                "services",
                Some("default"),
                json!({ "metadata": { "name": name } }),
            )
            .unwrap();
    }
    eventually("the watcher to relist and see every service", || {
        let count = reader.state().len();
        async move { (count == 4).then_some(()) }
    })
    .await;
    assert_eq!(
        server.request_count(Verb::List, "services"),
        2,
        "one initial list, one relist after 410"
    );
    task.abort();
}
