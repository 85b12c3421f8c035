//! The service controller: LoadBalancer Services get a CloudStack load balancer.
//!
//! One `reconcile` per Service (kube-runtime `Controller`, `--concurrent-service-syncs` at
//! a time): the cleanup finalizer first, then the engine (`cloud::loadbalancer`: observe →
//! plan → apply), then `status.loadBalancer.ingress` (patched only on change) and Events
//! with the Kubernetes service controller's reasons. Every Service is re-synced when the
//! set of eligible Nodes changes (once per burst, not per Node event) and every resync
//! period, which also renews the shared view of CloudStack; failures retry with
//! exponential backoff. What it learnt of CloudStack ([`Memory`]) outlives a lost
//! leadership: leading again starts with a resync, not a cold start.

pub mod eligible;
mod endpoint_watch;
mod endpoints;
pub mod events;
pub mod finalizer;
mod ip_record;
mod local;
mod node_watch;
mod orphan_count;
mod planning;
mod reconcile;
mod routed_firewall;
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

pub use self::endpoints::{EndpointSnapshot, is_local};
pub use self::ip_record::ip_annotations;
pub use self::orphan_count::OrphanPasses;
pub use self::planning::{RuleMemberSet, ServicePlan, plan_services};
pub use self::reconcile::{ReconcileError, deletion_spec};
pub use self::routed_firewall::ROUTED_FIREWALL_FINALIZER;
pub use self::settings::Settings;
pub use self::status::LOAD_BALANCER_SUPPORTED;

/// The shortest resync period honoured.
const MIN_RESYNC_PERIOD: Duration = Duration::from_millis(10);

/// The reporting component of our Events (as the Kubernetes service controller's).
pub(crate) const REPORTER: &str = "service-controller";

/// What the service controller keeps from one leadership term to the next (clones share
/// it): the load-balancer engine, with its view of the account, the rules' cached members
/// and policies and the networks' job queues, and the orphan pass's last run.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    engine: Arc<std::sync::OnceLock<Arc<Engine>>>,
    orphan_passes: OrphanPasses,
}

impl Memory {
    /// The engine, made by `make` the first time.
    fn engine(&self, make: impl FnOnce() -> Engine) -> Arc<Engine> {
        self.engine.get_or_init(|| Arc::new(make())).clone()
    }

    /// Forgets what the engine read of CloudStack (another replica may have changed it):
    /// it is read again as it is needed.
    pub fn forget_observed(&self) {
        if let Some(engine) = self.engine.get() {
            engine.forget_observed();
        }
    }
}

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
    let (endpoints, endpoint_changes) =
        endpoint_watch::EndpointWatch::new(client.clone(), settings.endpoint_coalesce);
    // Backends come from the Node cache: wait for the first full list, so a start-up
    // reconcile never sees "no nodes" and empties every load balancer.
    tokio::select! {
        () = nodes.store.wait_until_ready() => {}
        () = shutdown.wait() => return Ok(()),
    }
    // Node initialisation first and alone: no CloudStack read of ours competes with it.
    tokio::select! {
        () = caches.first_node_pass.wait("service") => {}
        () = shutdown.wait() => return Ok(()),
    }
    let engine = caches.service.engine(|| {
        Engine::new(
            ctx.cloudstack.clone(),
            caches.instances.inventory().clone(),
            settings.engine(&ctx),
        )
    });
    // Kept from an earlier term: what it holds is checked by one read of the view.
    engine.start_resync();
    let secrets_named = tls_secrets::SecretsNamed::default();
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
        endpoints,
        engine: engine.clone(),
        ctx: ctx.clone(),
        warned: Default::default(),
        secrets_named: secrets_named.clone(),
    });

    // A change of the eligible Nodes changes members only: the shared view holds no VMs
    // and no members, so it is not read again for it (a network it lacks is read by
    // `Engine::prepare` when a Service needs it).
    let node_changes = nodes.changes;
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

    // A JoinSet aborts its task when dropped: losing the lease stops the pass (which
    // deletes with --delete-orphans) with the rest of the controller.
    let mut orphans = tokio::task::JoinSet::new();
    orphans.spawn(orphan_count::run(
        ctx.clone(),
        state.engine.clone(),
        caches.nodes,
        settings.resync_period,
        caches.service.orphan_passes.clone(),
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
    let secrets = tls_secrets::watch_when_named(client, secrets_named);
    controller
        .with_config(ControllerConfig::default().concurrency(settings.concurrency))
        .watches_stream(secrets, move |secret| {
            tls_secrets::services_naming(&services, &secret)
        })
        .reconcile_all_on(futures::stream::select(node_changes, resync))
        .reconcile_on(endpoint_changes)
        .graceful_shutdown_on(async move { stop.wait().await })
        .run(reconcile::reconcile, reconcile::error_policy, state)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(error = %err, "service reconcile did not finish");
            }
        })
        .await;
    drop(nodes.tasks);
    orphans.abort_all();
    Ok(())
}
