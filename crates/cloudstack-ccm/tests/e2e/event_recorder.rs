//! The Event recorder against the API server, request by request: core v1 Events, a
//! repeat patched in place (client-go's `EventLogger`), a new message as a new Event, and
//! a patched Event that is gone created again (client-go's `recordEvent`).

use crate::common;

use cloudstack_ccm::controllers::events::{Event, EventType, Recorder, Reporter};
use fake_apiserver::{FakeApiServer, Verb};
use k8s_openapi::api::core::v1::ObjectReference;

fn warning(note: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "SyncLoadBalancerFailed".into(),
        note: Some(note.into()),
        action: "EnsureLoadBalancer".into(),
        secondary: None,
    }
}

fn service_ref() -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        name: Some("web".into()),
        namespace: Some("default".into()),
        uid: Some("uid-1".into()),
        ..ObjectReference::default()
    }
}

#[tokio::test]
async fn repeats_are_patched_new_messages_are_new_events_and_lost_events_come_back() {
    common::init();
    let server = FakeApiServer::start().await.unwrap();
    let recorder = Recorder::new(
        server.kube_client().unwrap(),
        Reporter {
            controller: "service-controller".into(),
            instance: None,
        },
    );
    let reference = service_ref();
    for _ in 0..3 {
        recorder
            .publish(&warning("annotation algorithm: bad"), &reference)
            .await
            .unwrap();
    }
    let events = server.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event["count"], 3);
    assert_eq!(event["message"], "annotation algorithm: bad");
    assert_eq!(event["source"]["component"], "service-controller");
    assert_eq!(event["reportingComponent"], "service-controller");
    assert_eq!(event["involvedObject"]["name"], "web");
    assert_eq!(server.request_count(Verb::Create, "events"), 1);
    assert_eq!(server.request_count(Verb::Patch, "events"), 2);
    assert_eq!(
        server.request_count(Verb::Create, "events.events.k8s.io"),
        0
    );

    // Another cause: another Event, the first keeps its count.
    recorder
        .publish(&warning("annotation source-cidrs: bad"), &reference)
        .await
        .unwrap();
    let events = server.events();
    assert_eq!(events.len(), 2);
    assert!(events.iter().any(|e| e["count"] == 3));

    // The first Event expired on the server: the next repeat creates it again.
    let name = event["metadata"]["name"].as_str().unwrap();
    server.delete("events", Some("default"), name).unwrap();
    recorder
        .publish(&warning("annotation algorithm: bad"), &reference)
        .await
        .unwrap();
    let again = server.get("events", Some("default"), name).unwrap();
    assert_eq!(again["count"], 4);
    assert_eq!(again["firstTimestamp"], event["firstTimestamp"]);
}
