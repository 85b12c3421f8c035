//! The service controller: LoadBalancer Services get a CloudStack load balancer.
//!
//! One `reconcile` per Service (kube-runtime `Controller`, `--concurrent-service-syncs` at
//! a time): the cleanup finalizer first, then the engine (`cloud::loadbalancer`: observe →
//! plan → apply), then `status.loadBalancer.ingress` (patched only on change) and Events
//! with the Kubernetes service controller's reasons. Every Service is re-synced when the
//! set of eligible Nodes changes (once per burst, not per Node event) and every resync
//! period, which also renews the shared view of CloudStack; failures retry with
//! exponential backoff.

pub mod eligible;
pub mod events;
pub mod finalizer;
mod ip_record;
mod node_watch;
mod orphan_count;
mod reconcile;
pub mod settings;
pub mod status;
mod tls_secrets;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::watcher;

use crate::cloud::loadbalancer::ensure::Engine;
use crate::controllers::events::{Recorder, Reporter};
use crate::controllers::{Caches, Context, Shutdown};

pub use self::ip_record::ip_annotations;
pub use self::reconcile::{
    ReconcileError, deletion_spec, plan_services, plan_services_with_secrets,
};
pub use self::settings::Settings;

/// The shortest resync period honoured.
const MIN_RESYNC_PERIOD: Duration = Duration::from_millis(10);

/// The reporting component of our Events (as the Kubernetes service controller's).
pub(crate) const REPORTER: &str = "service-controller";

/// Runs the service controller until `shutdown` fires, with backends from the Node
/// cache of `caches`.
pub async fn run(ctx: Arc<Context>, caches: Caches, shutdown: Shutdown) -> anyhow::Result<()> {
    let settings = Settings::from_context(&ctx);
    run_with(ctx, settings, caches, shutdown).await
}

/// [`run`] with explicit settings (tests use short periods).
pub async fn run_with(
    ctx: Arc<Context>,
    settings: Settings,
    caches: Caches,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let client = ctx.kube.clone();
    let nodes = node_watch::start(caches.nodes.clone(), settings.node_debounce);
    // Backends come from the Node cache: wait for the first full list, so a start-up
    // reconcile never sees "no nodes" and empties every load balancer.
    tokio::select! {
        () = nodes.store.wait_until_ready() => {}
        () = shutdown.wait() => return Ok(()),
    }
    let engine = Arc::new(Engine::new(
        ctx.cloudstack.clone(),
        caches.instances.inventory().clone(),
        settings.engine(&ctx),
    ));
    let state = Arc::new(reconcile::State {
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: REPORTER.into(),
                instance: None,
            },
        ),
        spec_options: settings::spec_options(&ctx),
        backoff: super::backoff::RetryBackoff::new(settings.backoff_base, settings.backoff_max),
        nodes: nodes.store.clone(),
        engine: engine.clone(),
        ctx: ctx.clone(),
    });

    // New Nodes may run on VMs the shared view has not seen yet: read it again.
    let view = engine.clone();
    let node_changes = nodes.changes.map(move |()| view.start_resync());
    // A zero period would make the interval panic; treat it as "as often as sensible".
    let mut ticker = tokio::time::interval(settings.resync_period.max(MIN_RESYNC_PERIOD));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    let resync = futures::stream::unfold(ticker, move |mut ticker| {
        let engine = engine.clone();
        async move {
            ticker.tick().await;
            engine.start_resync();
            Some(((), ticker))
        }
    });

    let orphans = tokio::spawn(orphan_count::run(
        ctx.clone(),
        caches.nodes,
        settings.resync_period,
        shutdown.clone(),
    ));
    let stop = shutdown.clone();
    let controller = Controller::new(
        Api::<Service>::all(client.clone()),
        watcher::Config::default(),
    );
    // A changed TLS Secret re-runs the Services naming it (a renewal follows on its own).
    // Without permission to watch Secrets the watch backs off quietly; the Services still
    // get their Warning when reconciled.
    let services = controller.store();
    let secrets = tls_secrets::watch_when_named(client, controller.store());
    controller
        .with_config(ControllerConfig::default().concurrency(settings.concurrency))
        .watches_stream(secrets, move |secret| {
            tls_secrets::services_naming(&services, &secret)
        })
        .reconcile_all_on(futures::stream::select(node_changes, resync))
        .graceful_shutdown_on(async move { stop.wait().await })
        .run(reconcile::reconcile, reconcile::error_policy, state)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(error = %err, "service reconcile did not finish");
            }
        })
        .await;
    drop(nodes.tasks);
    orphans.abort();
    Ok(())
}
