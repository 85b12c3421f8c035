//! kube-runtime against the server: a `Controller` converges, `finalizer()` adds and
//! removes its finalizer around cleanup, and the `Recorder` posts events.k8s.io Events.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, start};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

const FINALIZER: &str = "fake.example.com/cleanup";

fn service(name: &str) -> Service {
    serde_json::from_value(
        json!({ "metadata": { "name": name }, "spec": { "ports": [{ "port": 80 }] } }),
    )
    .unwrap()
}

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed: {0}")]
struct ReconcileError(#[from] kube::Error);

struct Context {
    api: Api<Service>,
    cleaned: Mutex<Vec<String>>,
}

async fn reconcile(
    svc: Arc<Service>,
    ctx: Arc<Context>,
) -> Result<Action, kube::runtime::finalizer::Error<ReconcileError>> {
    let api = ctx.api.clone();
    finalizer(&api.clone(), FINALIZER, svc, |event| async move {
        match event {
            FinalizerEvent::Apply(svc) => {
                let patch = json!({ "metadata": { "annotations": { "reconciled": "yes" } } });
                api.patch(
                    &svc.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
                Ok(Action::await_change())
            }
            FinalizerEvent::Cleanup(svc) => {
                ctx.cleaned.lock().unwrap().push(svc.name_any());
                Ok(Action::await_change())
            }
        }
    })
    .await
}

fn error_policy(
    _: Arc<Service>,
    _: &kube::runtime::finalizer::Error<ReconcileError>,
    _: Arc<Context>,
) -> Action {
    Action::requeue(Duration::from_millis(50))
}

#[tokio::test]
async fn controller_with_finalizer_converges_and_cleans_up() {
    let (_server, client) = start().await;
    let api: Api<Service> = Api::default_namespaced(client);
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &service(name))
            .await
            .unwrap();
    }
    let ctx = Arc::new(Context {
        api: api.clone(),
        cleaned: Mutex::new(Vec::new()),
    });
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| async {});
    let task = tokio::spawn(controller);

    for name in ["a", "b"] {
        eventually("reconcile to add the finalizer and annotate", || {
            let api = api.clone();
            async move {
                let svc = api.get(name).await.ok()?;
                let done = svc.finalizers().iter().any(|f| f == FINALIZER)
                    && svc
                        .annotations()
                        .get("reconciled")
                        .is_some_and(|v| v == "yes");
                done.then_some(())
            }
        })
        .await;
    }

    api.delete("a", &DeleteParams::default()).await.unwrap();
    eventually("cleanup to run and the object to go", || {
        let api = api.clone();
        async move { api.get_opt("a").await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert_eq!(*ctx.cleaned.lock().unwrap(), ["a"]);
    assert!(
        api.get("b")
            .await
            .unwrap()
            .finalizers()
            .contains(&FINALIZER.to_string())
    );
    task.abort();
}

#[tokio::test]
async fn recorder_posts_events_k8s_io_events() {
    let (server, client) = start().await;
    let api: Api<Service> = Api::default_namespaced(client.clone());
    let svc = api
        .create(&PostParams::default(), &service("web"))
        .await
        .unwrap();
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: "fake-test".into(),
            instance: None,
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "EnsuredLoadBalancer".into(),
        note: Some("Ensured load balancer".into()),
        action: "Ensure".into(),
        secondary: None,
    };
    let reference = svc.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();
    let events = server.events();
    assert_eq!(events.len(), 1, "the second publish patches the series");
    let recorded = &events[0];
    assert_eq!(
        recorded["apiVersion"], "v1",
        "the core view of the one store"
    );
    assert_eq!(recorded["reason"], "EnsuredLoadBalancer");
    assert_eq!(recorded["involvedObject"]["name"], "web");
    assert_eq!(recorded["message"], "Ensured load balancer");
    assert_eq!(recorded["series"]["count"], 2);
    let posted = server
        .list("events.events.k8s.io", Some("default"))
        .unwrap();
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(posted[0]["regarding"]["name"], "web");
    assert_eq!(posted[0]["series"]["count"], 2);
}
