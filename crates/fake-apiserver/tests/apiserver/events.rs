//! core/v1 and events.k8s.io/v1 Events are two views of one store, as in kube-apiserver
//! (both convert to the internal `core.Event`; `pkg/apis/events/v1/conversion.go`): an
//! Event written through either API is read, listed, selected, watched, patched and
//! deleted through both.

use crate::common;

use common::{WAIT, api_status, causes, start};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event as EventsV1;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

#[tokio::test]
async fn core_and_events_v1_show_the_same_events() {
    let (server, client) = start().await;
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let v1: Api<EventsV1> = Api::namespaced(client.clone(), "default");

    let from_core: CoreEvent = serde_json::from_value(json!({
        "metadata": { "name": "web.1" },
        "involvedObject": { "kind": "Service", "namespace": "default", "name": "web", "uid": "u1" },
        "reason": "EnsuredLoadBalancer", "message": "Ensured load balancer", "type": "Normal",
        "source": { "component": "service-controller" }, "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    core.create(&PostParams::default(), &from_core)
        .await
        .unwrap();
    let seen = v1.get("web.1").await.unwrap();
    assert_eq!(seen.note.as_deref(), Some("Ensured load balancer"));
    assert_eq!(seen.regarding.unwrap().name.as_deref(), Some("web"));
    assert_eq!(
        seen.deprecated_source.unwrap().component.as_deref(),
        Some("service-controller")
    );
    assert_eq!(seen.deprecated_count, Some(1));

    let from_v1: EventsV1 = serde_json::from_value(json!({
        "metadata": { "name": "n1.2" },
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": { "kind": "Node", "name": "n1" },
        "reason": "Synced", "note": "Node synced successfully", "type": "Normal",
        "action": "InitializeNode", "reportingController": "cloud-node-controller",
        "reportingInstance": "ccm-1",
    }))
    .unwrap();
    v1.create(&PostParams::default(), &from_v1).await.unwrap();
    let seen = core.get("n1.2").await.unwrap();
    assert_eq!(seen.message.as_deref(), Some("Node synced successfully"));
    assert_eq!(seen.involved_object.name.as_deref(), Some("n1"));
    assert_eq!(
        seen.reporting_component.as_deref(),
        Some("cloud-node-controller")
    );

    // Both lists hold both Events; field selectors speak each API's field names.
    assert_eq!(
        core.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    assert_eq!(
        v1.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    let about_web = core
        .list(&ListParams::default().fields("involvedObject.name=web,involvedObject.kind=Service"))
        .await
        .unwrap();
    assert_eq!(about_web.items.len(), 1);
    let about_n1 = v1
        .list(&ListParams::default().fields("regarding.name=n1"))
        .await
        .unwrap();
    assert_eq!(about_n1.items.len(), 1);
    assert_eq!(server.events().len(), 2, "the store holds each Event once");

    // A count patched through core (client-go's EventLogger) shows in events.k8s.io.
    core.patch(
        "web.1",
        &PatchParams::default(),
        &Patch::Strategic(json!({ "count": 2, "lastTimestamp": "2026-01-01T00:01:00Z" })),
    )
    .await
    .unwrap();
    let seen = v1.get("web.1").await.unwrap();
    assert_eq!(seen.deprecated_count, Some(2));
    // A series patched through events.k8s.io (the new recorder) shows in core.
    v1.patch(
        "n1.2",
        &PatchParams::default(),
        &Patch::Merge(
            json!({ "series": { "count": 2, "lastObservedTime": "2026-01-01T00:02:00.000000Z" } }),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        core.get("n1.2").await.unwrap().series.unwrap().count,
        Some(2)
    );

    // Deleted through one API, gone from both.
    v1.delete("web.1", &DeleteParams::default()).await.unwrap();
    assert!(core.get_opt("web.1").await.unwrap().is_none());
}

#[tokio::test]
async fn a_watch_of_events_v1_sees_core_events() {
    let (_server, client) = start().await;
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let v1: Api<EventsV1> = Api::namespaced(client.clone(), "default");
    let mut stream = v1
        .watch(&WatchParams::default().timeout(10), "0")
        .await
        .unwrap()
        .boxed();
    let event: CoreEvent = serde_json::from_value(json!({
        "metadata": { "name": "web.3" },
        "involvedObject": { "kind": "Service", "name": "web" },
        "reason": "SyncLoadBalancerFailed", "message": "bad annotation", "type": "Warning",
    }))
    .unwrap();
    core.create(&PostParams::default(), &event).await.unwrap();
    let added = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(WatchEvent::Added(e)) = stream.try_next().await.unwrap() {
                return e;
            }
        }
    })
    .await
    .expect("the core Event arrives on the events.k8s.io watch");
    assert_eq!(added.note.as_deref(), Some("bad annotation"));
    assert_eq!(added.type_.as_deref(), Some("Warning"));
}

#[tokio::test]
async fn an_event_lives_in_its_objects_namespace() {
    let (_server, client) = start().await;
    let event = |namespace: &str, involved: Option<&str>| -> CoreEvent {
        serde_json::from_value(json!({
            "metadata": { "name": format!("e-{namespace}-{}", involved.unwrap_or("none")), "namespace": namespace },
            "involvedObject": { "kind": "Service", "name": "web", "namespace": involved },
            "reason": "Test", "message": "m",
        }))
        .unwrap()
    };
    let create = |namespace: &str, involved: Option<&str>| {
        let api: Api<CoreEvent> = Api::namespaced(client.clone(), namespace);
        let body = event(namespace, involved);
        async move { api.create(&PostParams::default(), &body).await }
    };
    create("default", Some("default")).await.unwrap();
    create("default", None)
        .await
        .expect("Node Events go to default");
    let error = create("kube-system", Some("default")).await.unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("{error:?}")
    };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "Event \"e-kube-system-default\" is invalid: involvedObject.namespace: Invalid value: \"default\": does not match event.namespace"
    );
    let error = create("kube-system", None).await.unwrap_err();
    assert!(matches!(error, kube::Error::Api(s) if s.code == 422));
}

/// `ValidateEventCreate` and `ValidateEventUpdate` (`pkg/apis/core/validation/events.go`):
/// an Event with `eventTime` (every events.k8s.io/v1 Event, and a core/v1 one that sets
/// it) needs its reporting controller and instance, an action and a reason, and may be
/// about an object without a namespace only in `default` or `kube-system`; through
/// events.k8s.io/v1 the deprecated fields must be unset and only the series changes. The
/// legacy form the controllers post (no `eventTime`) needs none of that.
#[tokio::test]
async fn events_with_an_event_time_are_validated_as_the_real_server_does() {
    let (_server, client) = start().await;
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let v1: Api<EventsV1> = Api::namespaced(client.clone(), "default");
    let qualified_name_error = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    let bare: EventsV1 = serde_json::from_value(json!({
        "metadata": { "name": "web.1" },
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": { "kind": "Service", "namespace": "default", "name": "web" },
        "note": "Ensured load balancer", "type": "Normal",
    }))
    .unwrap();
    let status = api_status(v1.create(&PostParams::default(), &bare).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        format!(
            "Event \"web.1\" is invalid: [reportingController: Required value, reportingController: Invalid value: \"\": name part must be non-empty, reportingController: Invalid value: \"\": {qualified_name_error}, reportingInstance: Required value, action: Required value, reason: Required value]"
        )
    );
    let fields: Vec<String> = causes(&status).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        fields,
        [
            "reportingController",
            "reportingController",
            "reportingController",
            "reportingInstance",
            "action",
            "reason"
        ]
    );
    let details = status.details.unwrap();
    assert_eq!(
        (details.kind.as_str(), details.group.as_str()),
        ("Event", "")
    );

    // core/v1 names the field reportingComponent; a Node's Event with eventTime may live
    // in default or kube-system only.
    let with_time = |namespace: &str| -> CoreEvent {
        serde_json::from_value(json!({
            "metadata": { "name": "n1.1", "namespace": namespace },
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "involvedObject": { "kind": "Node", "name": "n1" },
            "reason": "Synced", "action": "InitializeNode", "reportingInstance": "ccm-1",
        }))
        .unwrap()
    };
    let status = api_status(
        Api::<CoreEvent>::namespaced(client.clone(), "kube-public")
            .create(&PostParams::default(), &with_time("kube-public"))
            .await,
    );
    assert_eq!(
        status.message,
        format!(
            "Event \"n1.1\" is invalid: [involvedObject.namespace: Invalid value: \"\": does not match event.namespace, reportingComponent: Required value, reportingComponent: Invalid value: \"\": name part must be non-empty, reportingComponent: Invalid value: \"\": {qualified_name_error}]"
        )
    );
    let mut complete = with_time("kube-system");
    complete.reporting_component = Some("cloud-node-controller".into());
    Api::<CoreEvent>::namespaced(client.clone(), "kube-system")
        .create(&PostParams::default(), &complete)
        .await
        .expect("a complete new-style core Event");

    // events.k8s.io/v1: no deprecated fields, a known type, a real series.
    let strict: EventsV1 = serde_json::from_value(json!({
        "metadata": { "name": "web.2" },
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": { "kind": "Service", "namespace": "default", "name": "web" },
        "reason": "EnsuredLoadBalancer", "action": "Ensure", "type": "Info",
        "reportingController": "service-controller", "reportingInstance": "ccm-1",
        "deprecatedCount": 1, "series": { "count": 1, "lastObservedTime": "2026-01-01T00:00:00.000000Z" },
    }))
    .unwrap();
    let status = api_status(v1.create(&PostParams::default(), &strict).await);
    assert_eq!(
        status.message,
        "Event \"web.2\" is invalid: [series.count: Invalid value: \"\": should be at least 2, type: Invalid value: \"\": has invalid value: Info, count: Invalid value: \"\": needs to be unset]"
    );
    let mut fixed = strict.clone();
    fixed.type_ = Some("Normal".into());
    fixed.deprecated_count = None;
    fixed.series = None;
    v1.create(&PostParams::default(), &fixed).await.unwrap();
    let status = api_status(
        v1.patch(
            "web.2",
            &PatchParams::default(),
            &Patch::Merge(json!({ "note": "changed" })),
        )
        .await,
    );
    assert_eq!(
        status.message,
        "Event \"web.2\" is invalid: message: Invalid value: \"changed\": field is immutable"
    );
    core.patch(
        "web.2",
        &PatchParams::default(),
        &Patch::Merge(json!({ "message": "changed" })),
    )
    .await
    .expect("core/v1 updates pass the legacy checks only");

    // The legacy form, as the controllers post it, needs no reporting fields.
    let legacy: CoreEvent = serde_json::from_value(json!({
        "metadata": { "name": "web.3" },
        "involvedObject": { "kind": "Service", "namespace": "default", "name": "web" },
        "reason": "EnsuringLoadBalancer", "message": "Ensuring load balancer", "type": "Normal",
        "source": { "component": "service-controller" }, "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    core.create(&PostParams::default(), &legacy).await.unwrap();
}
