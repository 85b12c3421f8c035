//! `reconcile` and `error_policy` of the service controller.

use crate::cloud::key_access::{self, Feature, KeyFeatures};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Service;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use crate::cloud::loadbalancer::ensure::{Change, Engine, EnsureError, LbKind};
use crate::cloud::loadbalancer::ip_claim::{IpRecorder, RecordError, RecordedIp};
use crate::cloud::loadbalancer::plan::PlanError;
use crate::cloud::loadbalancer::spec::{LbSpec, SpecError, SpecOptions};
use crate::controllers::Context;
use crate::controllers::events::Recorder;
use crate::metrics::{RESULT_ERROR, RESULT_OK};

use super::endpoint_watch::{EndpointWatch, EndpointsNotRead};
use super::events::{self, Reason};
use super::finalizer;
use super::ip_record::AnnotationIpRecorder;
use super::local;
use super::node_watch::EligibleNodes;
use super::routed_firewall;
use super::status::{self, IngressTarget};
use super::tls_secrets;
use crate::cloud::loadbalancer::ensure::KeptRules;
use crate::controllers::backoff::RetryBackoff;

/// The controller name in metrics.
const CONTROLLER: &str = "service";

/// What happens to a load balancer while no Node can serve it.
pub(super) const LEFT_AS_IT_IS: &str =
    "the load balancer is left as it is (members kept) until a node is eligible";

/// What every reconcile shares.
pub struct State {
    /// The shared controller-manager context.
    pub ctx: Arc<Context>,
    /// The load-balancer engine (with its shared view of CloudStack).
    pub engine: Arc<Engine>,
    /// Posts Events.
    pub recorder: Recorder,
    /// The Nodes and the eligible ones.
    pub nodes: EligibleNodes,
    /// Where the endpoints of `externalTrafficPolicy: Local` Services run.
    pub(crate) endpoints: EndpointWatch,
    /// What the spec needs from the configuration.
    pub spec_options: SpecOptions,
    /// Retry delays per Service.
    pub backoff: RetryBackoff,
    /// The plan warnings last published per Service UID: a warning of a plan that
    /// changes nothing (a Netris rule keeping its algorithm) is published when it is new,
    /// not on every resync.
    pub(crate) warned: std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>,
    /// Starts the watch of TLS Secrets when a Service first names one.
    pub(crate) secrets_named: tls_secrets::SecretsNamed,
}

impl State {
    /// Whether `warnings` differ from those last published for `service` (and remembers
    /// them).
    fn new_warnings(&self, service: &Service, warnings: &[String]) -> bool {
        let uid = service.metadata.uid.clone().unwrap_or_default();
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warnings.is_empty() {
            warned.remove(&uid);
            return false;
        }
        if warned.get(&uid).is_some_and(|last| last == warnings) {
            return false;
        }
        warned.insert(uid, warnings.to_vec());
        true
    }
}

/// Why a reconcile failed; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A Kubernetes API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What we were doing.
        action: &'static str,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The load-balancer engine failed.
    #[error(transparent)]
    Engine(#[from] EnsureError),
    /// The public IP could not be recorded on the Service.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The endpoints of a `Local` Service could not be read yet.
    #[error(transparent)]
    Endpoints(#[from] EndpointsNotRead),
}

/// Wraps a Kubernetes error with what we were doing.
fn kube_err(action: &'static str) -> impl FnOnce(kube::Error) -> ReconcileError {
    move |source| ReconcileError::Kube { action, source }
}

/// `namespace/name` of a Service, for logs and the backoff table.
pub(crate) fn key_of(service: &Service) -> String {
    format!(
        "{}/{}",
        service.namespace().unwrap_or_default(),
        service.name_any()
    )
}

/// Reconciles one Service and counts the result.
pub async fn reconcile(service: Arc<Service>, state: Arc<State>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let result = reconcile_service(&service, &state).await;
    let metrics = &state.ctx.metrics;
    let outcome = if result.is_ok() {
        RESULT_OK
    } else {
        RESULT_ERROR
    };
    metrics.reconcile(CONTROLLER, outcome);
    metrics.reconcile_duration(CONTROLLER, started.elapsed());
    if result.is_ok() {
        state.backoff.reset(&key_of(&service));
    }
    result
}

/// Decides how long to wait before retrying a failed Service: exponential backoff, or
/// the credentials' probe interval while CloudStack refuses the keys.
pub(crate) fn error_policy(
    service: Arc<Service>,
    err: &ReconcileError,
    state: Arc<State>,
) -> Action {
    let key = key_of(&service);
    let cloudstack = &state.ctx.cloudstack;
    if refused_credentials(err) || cloudstack.credentials_refused() {
        // Said once, when CloudStack refused the keys; the work waits for keys it accepts
        // (reloaded from the cloud-config) and is retried as often as a probe may go,
        // without growing the backoff.
        let delay = cloudstack.config().credentials_probe_interval;
        tracing::debug!(service = %key, error = %err, retry_in = ?delay, "load balancer sync waits for accepted credentials");
        return Action::requeue(delay);
    }
    let delay = state.backoff.next_delay(&key);
    tracing::warn!(service = %key, error = %err, retry_in = ?delay, "load balancer sync failed");
    Action::requeue(delay)
}

/// Whether `err` comes from CloudStack refusing the keys (the keys may have been
/// replaced since: the retry is then due at once, with the new ones).
fn refused_credentials(err: &ReconcileError) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(error) = cause {
        if error
            .downcast_ref::<cloudstack::Error>()
            .is_some_and(cloudstack::Error::is_refused_credentials)
        {
            return true;
        }
        cause = error.source();
    }
    false
}

async fn reconcile_service(
    service: &Arc<Service>,
    state: &State,
) -> Result<Action, ReconcileError> {
    let namespace = service.namespace().unwrap_or_default();
    let api: Api<Service> = Api::namespaced(state.ctx.kube.clone(), &namespace);
    if !finalizer::wants_load_balancer(service, &state.spec_options) {
        state.endpoints.forget(service);
        if routed_firewall::concerns(service) {
            let with = routed_firewall::Companion {
                api: &api,
                engine: &state.engine,
                recorder: &state.recorder,
                eligible: state.nodes.eligible(),
            };
            return routed_firewall::reconcile(service, with)
                .await
                .map_err(|err| match err {
                    routed_firewall::RoutedFirewallError::Kube { action, source } => {
                        ReconcileError::Kube { action, source }
                    }
                    routed_firewall::RoutedFirewallError::Engine(err) => err.into(),
                });
        }
        if finalizer::has_finalizer(service) {
            cleanup(service, &api, state).await?;
        }
        return Ok(Action::await_change());
    }
    let mut spec = match LbSpec::from_service(service, &state.spec_options) {
        Ok(spec) => spec,
        Err(err) => {
            // Bad input: nothing is created; a change of the Service re-runs this.
            tracing::warn!(service = %key_of(service), error = %err, "invalid load-balancer Service");
            events::publish_sync_failed(&state.recorder, service, &err).await;
            if let SpecError::Ipv6Only { .. } = err {
                let unsupported = status::Unsupported {
                    reason: "IPv6NotSupported",
                    message: err.to_string(),
                };
                set_condition(&api, service, Some(&unsupported)).await;
            }
            return Ok(Action::await_change());
        }
    };
    if tls_secrets::SecretsNamed::names_one(service) {
        state.secrets_named.named();
    }
    if let Some(warning) = tls_secrets::fill(&state.ctx.kube, &mut spec).await {
        tracing::warn!(service = %key_of(service), "{warning}");
        events::publish_warnings(&state.recorder, service, [warning]).await;
    }
    // The finalizer goes on before anything exists in CloudStack.
    let service = if finalizer::has_finalizer(service) {
        service.clone()
    } else {
        Arc::new(
            finalizer::add(&api, service)
                .await
                .map_err(kube_err("adding the finalizer"))?,
        )
    };
    let result = match switch_kind(&service, &api, &spec, state).await {
        Ok(()) => ensure(&service, &api, &spec, state).await,
        Err(err) => Err(err),
    };
    match result {
        Ok(()) => {
            set_condition(&api, &service, refused_by_keys(&spec, state).as_ref()).await;
            Ok(Action::await_change())
        }
        Err(ReconcileError::Engine(err)) if err.is_permanent() => {
            events::publish_sync_failed(&state.recorder, &service, &err).await;
            tracing::warn!(service = %key_of(&service), error = %err, "load balancer cannot be built as asked");
            if let Some(unsupported) =
                unsupported_by_network(&err).or_else(|| refused_to_keys(&err))
            {
                set_condition(&api, &service, Some(&unsupported)).await;
            }
            Ok(Action::await_change())
        }
        Err(err) => {
            events::publish_sync_failed(&state.recorder, &service, &err).await;
            Err(err)
        }
    }
}

/// The condition of a Service served without some of what it asks because the CloudStack
/// keys' role refuses a command the feature needs (the Warning Event says the same).
fn refused_by_keys(spec: &LbSpec, state: &State) -> Option<status::Unsupported> {
    let access = KeyFeatures::of(&state.ctx.cloudstack);
    let refused = crate::cloud::loadbalancer::plan::refused_asks(spec, &access);
    (!refused.is_empty()).then(|| status::Unsupported {
        reason: "CommandRefused",
        message: refused.join("; "),
    })
}

/// The condition of a Service that cannot be served because the keys' role refuses a
/// command it needs (an internal load balancer without `createLoadBalancer`, …).
fn refused_to_keys(err: &EnsureError) -> Option<status::Unsupported> {
    let command = err.refused_command()?;
    let message = match Feature::needing(command).first() {
        Some(feature) => key_access::refusal_text(*feature, command),
        None => format!(
            "the CloudStack keys' role may not call {command}, which this load balancer needs; grant the role {command} (see docs/keys.md)"
        ),
    };
    Some(status::Unsupported {
        reason: "CommandRefused",
        message,
    })
}

/// The condition of a Service whose network has no CloudStack load balancer at all.
fn unsupported_by_network(err: &EnsureError) -> Option<status::Unsupported> {
    match err {
        EnsureError::Plan(plan @ PlanError::NoLoadBalancing { .. }) => Some(status::Unsupported {
            reason: "NoLoadBalancerOnNetwork",
            message: plan.to_string(),
        }),
        EnsureError::Plan(plan @ PlanError::NoInternalLoadBalancing { .. }) => {
            Some(status::Unsupported {
                reason: "NoInternalLoadBalancerOnNetwork",
                message: plan.to_string(),
            })
        }
        _ => None,
    }
}

/// Sets (or clears) the Service's [`status::LOAD_BALANCER_SUPPORTED`] condition; a failed
/// write is logged (the Warning Event says the same).
async fn set_condition(
    api: &Api<Service>,
    service: &Service,
    unsupported: Option<&status::Unsupported>,
) {
    if let Err(error) = status::set_unsupported(api, service, unsupported).await {
        tracing::warn!(service = %key_of(service), %error, "cannot set the LoadBalancerSupported condition");
    }
}

/// Brings the load balancer of `service` to its spec, then the status.
async fn ensure(
    service: &Service,
    api: &Api<Service>,
    spec: &LbSpec,
    state: &State,
) -> Result<(), ReconcileError> {
    events::publish_warnings(&state.recorder, service, spec.warnings.iter().cloned()).await;
    let eligible = state.nodes.eligible();
    if eligible.is_empty() {
        if state.nodes.initialising() {
            // Nodes are being initialised: their change re-runs this, nothing to report.
            tracing::debug!(service = %key_of(service), "waiting for nodes to be initialised");
        } else {
            let note = format!(
                "{}: {LEFT_AS_IT_IS}",
                Reason::UnAvailableLoadBalancer.default_note()
            );
            events::publish(
                &state.recorder,
                service,
                Reason::UnAvailableLoadBalancer,
                Some(note),
            )
            .await;
        }
        return Ok(());
    }
    let selection = local::member_selection(service, &state.endpoints).await?;
    let planned = state
        .engine
        .plan_service(spec, &eligible, &selection)
        .await?;
    if let Some(warning) = planned.resolved.elsewhere_warning() {
        tracing::warn!(service = %key_of(service), "{warning}");
        events::publish_warnings(&state.recorder, service, [warning]).await;
    }
    let backends = &planned.resolved.backends;
    match planned.kept_rules {
        KeptRules::None => {}
        KeptRules::Some(warning) => {
            events::publish_warnings(&state.recorder, service, [warning]).await;
        }
        // The rules keep their members (never emptied because endpoints vanished);
        // everything else of the Service is still brought to its spec.
        KeptRules::All(note) => {
            events::publish(
                &state.recorder,
                service,
                Reason::UnAvailableLoadBalancer,
                Some(note),
            )
            .await;
        }
    }
    let Some(prepared) = planned.prepared? else {
        // Never empty a load balancer for want of Nodes (a stale view, Nodes elsewhere).
        let on = match backends.network_id.as_str() {
            "" => String::new(),
            network => format!(" on network {network}"),
        };
        let note = format!(
            "{}: no eligible node has a VM{on}; {LEFT_AS_IT_IS}",
            Reason::UnAvailableLoadBalancer.default_note()
        );
        events::publish(
            &state.recorder,
            service,
            Reason::UnAvailableLoadBalancer,
            Some(note),
        )
        .await;
        return Ok(());
    };
    let change = prepared.change();
    if change == Change::Other {
        events::publish(&state.recorder, service, Reason::EnsuringLoadBalancer, None).await;
    }
    let recorder = AnnotationIpRecorder::new(api.clone(), service);
    if prepared.creates_internal_rules()
        && spec.recorded_internal_network_id.as_deref() != Some(prepared.network_id())
    {
        recorder
            .record_internal_network(Some(prepared.network_id()))
            .await?;
    }
    let ensured = state.engine.apply(prepared, &recorder).await?;
    match change {
        Change::None => {}
        Change::MembersOnly => {
            events::publish(&state.recorder, service, Reason::UpdatedLoadBalancer, None).await
        }
        Change::Other => {
            events::publish(&state.recorder, service, Reason::EnsuredLoadBalancer, None).await
        }
    }
    let new_warnings = state.new_warnings(service, &ensured.warnings);
    if change != Change::None || new_warnings {
        events::publish_warnings(&state.recorder, service, ensured.warnings.iter().cloned()).await;
    }
    if change != Change::None {
        tracing::info!(service = %key_of(service), steps = ensured.steps, ip = %ensured.address, "load balancer ensured");
    }
    if let Some(ip_id) = &ensured.ip_id
        && spec.recorded_ip_id.as_deref() != Some(ip_id.as_str())
    {
        // An adopted load balancer (or one whose annotation was lost): record its IP so
        // it is found by id from now on. Whether we associated it is left as it was.
        let ip = RecordedIp {
            ip_id: ip_id.clone(),
            associated_by_controller: false,
            network_id: Some(ensured.network_id.clone()),
        };
        recorder.record(&ip).await.map_err(ReconcileError::Record)?;
    }
    let target = match &spec.hostname {
        Some(hostname) => IngressTarget::Hostname(hostname.clone()),
        None => IngressTarget::Ip {
            address: ensured.address.to_string(),
            // TLS ends at the load balancer: in-cluster clients must go through it too.
            proxy: spec.proxy_protocol || tls_secrets::terminates_tls(spec),
        },
    };
    status::patch_if_changed(api, service, &target.ingress())
        .await
        .map_err(kube_err("patching the status"))?;
    Ok(())
}

/// Tears down what the other kind of load balancer left when a Service switched between
/// internal and public: the internal rules on the recorded tier of a Service that is
/// public now, or the public load balancer of one that is internal now; then the status,
/// then the record (the tier, or the IP). Each record goes only once what it names is gone
/// and the status no longer reports it, so a crash in between repeats the teardown, never
/// loses it.
async fn switch_kind(
    service: &Service,
    api: &Api<Service>,
    spec: &LbSpec,
    state: &State,
) -> Result<(), ReconcileError> {
    let Some(kind) = state.engine.left_behind(spec).await? else {
        return Ok(());
    };
    let deleted = state.engine.delete_kind(spec, kind).await?;
    // The old address is no longer served; the new kind reports its own once it stands.
    // The status is cleared before the record goes: a crash between the two finds the
    // record, and the teardown (nothing left to delete) runs again and clears it; the
    // other order left the old address reported on a Service with nothing behind it.
    status::patch_if_changed(api, service, &[])
        .await
        .map_err(kube_err("clearing the status"))?;
    let recorder = AnnotationIpRecorder::new(api.clone(), service);
    match kind {
        LbKind::Internal => recorder.record_internal_network(None).await?,
        LbKind::Public => recorder.forget_public_ip().await?,
    }
    tracing::info!(service = %key_of(service), steps = deleted.steps, deleted = kind.as_str(), "the Service switched kinds: its old load balancer is deleted");
    events::publish_warnings(&state.recorder, service, deleted.warnings).await;
    if deleted.steps > 0 {
        let wanted = match kind {
            LbKind::Public => "an internal",
            LbKind::Internal => "a public",
        };
        let note = format!(
            "deleted the {} load balancer: the Service asks for {wanted} one",
            kind.as_str()
        );
        events::publish(
            &state.recorder,
            service,
            Reason::DeletedLoadBalancer,
            Some(note),
        )
        .await;
    }
    Ok(())
}

/// Deletes the load balancer of a Service being deleted or no longer asking for one, then
/// drops the status (when the Service stays) and the finalizer.
async fn cleanup(
    service: &Service,
    api: &Api<Service>,
    state: &State,
) -> Result<(), ReconcileError> {
    state.new_warnings(service, &[]);
    let spec = match deletion_spec(service, &state.spec_options) {
        Ok(spec) => spec,
        Err(err) => {
            // Without a name or UID nothing can be found again: let the Service go.
            tracing::warn!(service = %key_of(service), error = %err, "cannot identify the load balancer to delete");
            return finalizer::remove(api, service)
                .await
                .map_err(kube_err("removing the finalizer"));
        }
    };
    events::publish(&state.recorder, service, Reason::DeletingLoadBalancer, None).await;
    let deleted = match state.engine.ensure_deleted(&spec).await {
        Ok(deleted) => deleted,
        Err(err) => {
            let note = format!("Error deleting load balancer: {err}");
            events::publish(
                &state.recorder,
                service,
                Reason::DeleteLoadBalancerFailed,
                Some(note),
            )
            .await;
            return Err(err.into());
        }
    };
    tracing::info!(service = %key_of(service), steps = deleted.steps, "load balancer deleted");
    events::publish_warnings(&state.recorder, service, deleted.warnings).await;
    events::publish(&state.recorder, service, Reason::DeletedLoadBalancer, None).await;
    if service.metadata.deletion_timestamp.is_none() {
        status::patch_if_changed(api, service, &[])
            .await
            .map_err(kube_err("clearing the status"))?;
        if spec.recorded_internal_network_id.is_some() {
            AnnotationIpRecorder::new(api.clone(), service)
                .record_internal_network(None)
                .await?;
        }
    }
    finalizer::remove(api, service)
        .await
        .map_err(kube_err("removing the finalizer"))
}

/// The spec used to delete a Service's load balancer: the full spec, or, when the
/// Service no longer parses (a broken annotation must not block the cleanup), the lenient
/// one of `LbSpec::for_deletion`.
pub fn deletion_spec(service: &Service, options: &SpecOptions) -> Result<LbSpec, SpecError> {
    LbSpec::from_service(service, options).or_else(|_| LbSpec::for_deletion(service, options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_of_the_keys_is_found_under_the_engine_error() {
        let refused = cloudstack::Error::CredentialsRefused {
            command: "listLoadBalancerRules".into(),
            reply: None,
        };
        assert!(refused_credentials(&ReconcileError::Engine(
            EnsureError::Observe(refused)
        )));
        let other = cloudstack::Error::Decode {
            command: "listLoadBalancerRules".into(),
            detail: "not JSON".into(),
        };
        assert!(!refused_credentials(&ReconcileError::Engine(
            EnsureError::Observe(other)
        )));
    }
}
