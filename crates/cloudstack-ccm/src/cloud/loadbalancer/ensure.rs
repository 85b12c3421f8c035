//! The [`Engine`], the engine's front door: for one Service, `Engine::plan_service`
//! (network, backends, members; observe → plan) and [`Engine::apply`], or
//! `Engine::ensure_deleted`; every Service shares one view of the
//! account (`AccountView`), one per-rule cache of members and policies, and the
//! networks' job queues.

use crate::cloud::key_access::KeyFeatures;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::apply::{self, ApplyError};
use super::capabilities::{NetworkCapabilities, NetworkFacts, PortAccess, ServerFeatures};
use super::ip_claim::{IpRecorder, PickedAddresses, RecordError, RecordedIp};
use super::members::gone_members;
use super::observe::ObservedLb;
use super::observe::account_view::{AccountView, AccountViewCache};
use super::observe::assemble::{ObserveInputs, look_up_address, observe};
use super::observe::details::{PolicyKinds, RuleDetails, RuleDetailsCache};
use super::observe::internal::InternalRuleCache;
use super::observe::shared_listing::SharedListing;
use super::plan::{self, Backends, Plan, PlanContext, PlanError, RuleRef, Step, VmIds};
use super::spec::LbSpec;
use crate::cloud::inventory::{Inventory, InventoryError, ListedVms};
use crate::cloud::job_queue::NetworkQueues;
use crate::cloud::provider_id::ProviderId;

mod backends;
mod caches;
mod for_service;
mod internal;
mod interrupted;
mod outcome;
mod routed_firewall;

use backends::ResolvedMemo;
pub use backends::{NodeElsewhere, ResolvedBackends};
use caches::deletes_unnamed_firewall_rule;
pub(crate) use for_service::KeptRules;
use outcome::change_of;
pub use outcome::{Change, Deleted, EnsureError, Ensured, NetworkError, Prepared};
pub(crate) use outcome::{LbKind, Observation};
pub use routed_firewall::RoutedFirewallRequest;

/// The engine's knobs.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Cluster name for ownership tags.
    pub cluster_name: String,
    /// Version gates of the server.
    pub server: ServerFeatures,
    /// Longest use of one view of CloudStack (a resync renews it anyway).
    pub view_max_age: Duration,
    /// Longest use of a rule's cached members and policies.
    pub details_max_age: Duration,
}

/// The load-balancer engine shared by all Services.
pub struct Engine {
    client: cloudstack::Client,
    /// The node inventory: which network each Node's VM is on.
    inventory: Arc<Inventory>,
    settings: EngineSettings,
    views: AccountViewCache,
    details: RuleDetailsCache,
    queues: NetworkQueues,
    /// Addresses picked by plans running now.
    picked: PickedAddresses,
    /// Set by a resync: the next view read drops cached details of vanished rules.
    prune_details: AtomicBool,
    /// The account's SSL certificates, once per view.
    certificates: super::certificates::CertificateCache,
    /// Backends resolved lately, reused while the eligible Nodes and the inventory's view
    /// are the same objects (every Service of a resync shares one set of VM ids).
    resolved: std::sync::Mutex<Vec<ResolvedMemo>>,
    /// The internal rules of each tier, listed once per view.
    internal_rules: InternalRuleCache,
    /// What the routing firewall companions made, listed once per view.
    companion_objects: SharedListing<routed_firewall::CompanionObjects>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine using `client`, reading VMs from `inventory` (the node controllers' VM
    /// inventory: one VM list for the whole process).
    pub fn new(
        client: cloudstack::Client,
        inventory: Arc<Inventory>,
        settings: EngineSettings,
    ) -> Engine {
        Engine {
            client,
            inventory,
            views: AccountViewCache::new(settings.view_max_age),
            details: RuleDetailsCache::new(settings.details_max_age),
            queues: NetworkQueues::default(),
            certificates: Default::default(),
            picked: PickedAddresses::default(),
            prune_details: AtomicBool::new(false),
            resolved: std::sync::Mutex::default(),
            internal_rules: InternalRuleCache::default(),
            companion_objects: SharedListing::default(),
            settings,
        }
    }

    /// The networks' job queues every plan of the engine waits in (also the deletion
    /// plans of orphans, so they queue with the Services' jobs).
    pub(crate) fn queues(&self) -> &NetworkQueues {
        &self.queues
    }

    /// The capabilities of network `network_id` from the view.
    fn plan_context(
        &self,
        view: &AccountView,
        network_id: &str,
    ) -> Result<PlanContext, EnsureError> {
        let network = view
            .network(network_id)
            .ok_or_else(|| NetworkError::NotFound(network_id.to_string()))?;
        Ok(PlanContext {
            network: NetworkCapabilities::from_facts(
                &NetworkFacts::from_network(network),
                &self.settings.server,
            ),
            server: self.settings.server,
            cluster_name: self.settings.cluster_name.clone(),
            access: KeyFeatures::of(&self.client),
        })
    }

    /// Observes and plans on the backends' network, without changing anything. A plan
    /// that would delete a firewall rule whose id the view lacks is made again after
    /// reading the Service's IPs.
    async fn prepare(&self, spec: &LbSpec, backends: &Backends) -> Result<Prepared, EnsureError> {
        let prepared = self.prepare_once(spec, backends).await?;
        if !deletes_unnamed_firewall_rule(&prepared.plan) {
            return Ok(prepared);
        }
        if let Observation::Public(observed) = &prepared.observation {
            self.name_firewall_rules(observed).await;
        }
        self.prepare_once(spec, backends).await
    }

    /// One observation of the Service and its plan.
    async fn prepare_once(
        &self,
        spec: &LbSpec,
        backends: &Backends,
    ) -> Result<Prepared, EnsureError> {
        let mut view = self.view().await?;
        // Decided by `plan_service` (the backends' network).
        let network_id = backends.network_id.clone();
        if network_id.is_empty() {
            return Err(EnsureError::Network(NetworkError::Unknown));
        }
        if view.network(&network_id).is_none() {
            // A network the view has not seen (Nodes joined on a new tier since it was
            // read): read the view again once.
            self.start_resync();
            view = self.view().await?;
        }
        if let Some(requested) = spec.requested_ip
            && view.ip_by_address(&requested.to_string()).is_none()
        {
            // An address the view has not seen may have been allocated to the account
            // since it was read (by hand, for this Service): read it, with what stands
            // on it, into the view (another account's address is not visible there).
            let found = look_up_address(&self.client, &requested.to_string())
                .await
                .map_err(EnsureError::Observe)?;
            if let Some(id) = found.filter(|ip| ip.is_allocated()).and_then(|ip| ip.id) {
                self.views
                    .renew_ips(&self.client, &BTreeSet::from([id]))
                    .await;
                view = self.view().await?;
            }
        }
        let ctx = self.plan_context(&view, &network_id)?;
        let zone_id = view.network(&network_id).and_then(|n| n.zoneid.clone());
        if spec.internal.is_some() {
            return self
                .prepare_internal(&view, spec, backends, &ctx, network_id, zone_id)
                .await;
        }
        let observed = self.observe(&view, spec, &ctx.network).await?;
        if let Some(ip) = observed.ip.as_ref().filter(|ip| ip.is_allocating) {
            // Its association job runs, or failed and CloudStack gives the address back:
            // a rule on it would be refused. Read it again for the retry.
            self.views
                .renew_ips(&self.client, &BTreeSet::from([ip.id.clone()]))
                .await;
            return Err(EnsureError::IpNotReady {
                address: ip.address,
            });
        }
        let mut backends = backends.clone();
        backends.network_id = network_id.clone();
        backends.gone = gone_members(
            &self.inventory,
            &self.details,
            &observed,
            &backends.vm_ids,
            &backends.per_rule,
        )
        .await
        .map_err(EnsureError::Inventory)?;
        let plan = plan::plan(spec, &observed, &backends, &ctx)?;
        Ok(Prepared {
            plan,
            observation: Observation::Public(Box::new(observed)),
            network_id,
            zone_id,
        })
    }

    /// The network the Service's load balancer is bound to already: the one recorded on
    /// (or asked for by) the Service, else the one of its existing rules; `None` for a
    /// new load balancer.
    async fn network_in_use(&self, spec: &LbSpec) -> Result<Option<String>, EnsureError> {
        let view = self.view().await?;
        Ok(known_network(&view, spec))
    }

    async fn observe(
        &self,
        view: &Arc<AccountView>,
        spec: &LbSpec,
        network: &NetworkCapabilities,
    ) -> Result<ObservedLb, EnsureError> {
        let acl_id = match &network.port_access {
            PortAccess::NetworkAcl { acl_id, .. } => acl_id.as_deref(),
            _ => None,
        };
        let inputs = ObserveInputs {
            client: &self.client,
            details: &self.details,
            policy_kinds: PolicyKinds {
                health_check: network.health_check,
                stickiness: !network.stickiness_methods.is_empty(),
            },
            acl_id,
        };
        let mut observed = observe(&inputs, view, spec)
            .await
            .map_err(EnsureError::Observe)?;
        super::certificates::observe_for(
            &self.certificates,
            &self.client,
            view,
            (&self.settings.cluster_name, &spec.service.uid),
            spec.tls.is_some(),
            &mut observed,
        )
        .await
        .map_err(EnsureError::Observe)?;
        Ok(observed)
    }

    /// Runs a prepared plan (its jobs queued on its network) and returns the public IP.
    pub async fn apply(
        &self,
        prepared: Prepared,
        recorder: &dyn IpRecorder,
    ) -> Result<Ensured, EnsureError> {
        let Prepared {
            plan,
            observation,
            network_id,
            zone_id,
        } = prepared;
        let warnings = plan.warnings.clone();
        let applied = if plan.is_empty() {
            apply::Applied::default()
        } else {
            let ticket = self.queues.enter(&network_id);
            // Internal rules are not in the view: their tier's shared listing is renewed
            // instead (its change spans the run).
            let public = match &observation {
                Observation::Public(observed) => Some(observed),
                Observation::Internal { .. } => None,
            };
            let interrupted =
                public.map(|observed| interrupted::Interrupted::watch(self, observed));
            let internal_change = public
                .is_none()
                .then(|| self.internal_rules.changing(&network_id));
            let (applied, result) = apply::apply(
                &self.client,
                &ticket,
                &self.picked,
                &plan,
                recorder,
                zone_id.as_deref(),
            )
            .await;
            drop(internal_change);
            if let (Some(interrupted), Some(observed)) = (interrupted, public) {
                interrupted.ran_to_its_end();
                self.after_changes(&plan, observed, &applied, result.is_ok())
                    .await;
            }
            if result.is_err()
                && plan
                    .steps()
                    .any(|s| matches!(s, Step::AssignMembers { .. }))
            {
                // A VM to assign may be gone since the VMs were listed.
                self.inventory.distrust();
            }
            result?;
            if public.is_some() {
                self.seed_created_rules(&plan, &applied);
            }
            applied
        };
        let (ip_id, address) = match observation {
            Observation::Public(observed) => applied
                .associated_ip
                .clone()
                .or_else(|| observed.ip.as_ref().map(|ip| (ip.id.clone(), ip.address)))
                .map(|(id, address)| (Some(id), address))
                .ok_or(EnsureError::NoPublicIp)?,
            Observation::Internal { address } => applied
                .internal_address
                .or(address)
                .map(|address| (None, address))
                .ok_or(EnsureError::NoInternalAddress)?,
        };
        Ok(Ensured {
            address,
            ip_id,
            network_id,
            warnings,
            steps: applied.steps_done,
        })
    }

    /// Deletes the load balancer of `spec`: the public one ([`Engine::delete_public`]) and
    /// the internal rules on the tier recorded on the Service ([`Engine::delete_internal`]).
    pub(crate) async fn ensure_deleted(&self, spec: &LbSpec) -> Result<Deleted, EnsureError> {
        let mut public = self.delete_public(spec).await?;
        let internal = self.delete_internal(spec).await?;
        public.steps += internal.steps;
        public.warnings.extend(internal.warnings);
        Ok(public)
    }

    /// Deletes the public load balancer of `spec` (its rules, their firewall rules or ACL
    /// items, and the IP when the controller associated it and nothing else uses it).
    pub(crate) async fn delete_public(&self, spec: &LbSpec) -> Result<Deleted, EnsureError> {
        let PublicDeletion {
            plan,
            observed,
            network_id,
        } = self.public_deletion(spec).await?;
        if plan.is_empty() {
            return Ok(Deleted {
                steps: 0,
                warnings: plan.warnings,
            });
        }
        let (applied, result) = self
            .run_unrecorded(network_id.as_deref().unwrap_or_default(), &plan)
            .await;
        self.after_changes(&plan, &observed, &applied, result.is_ok())
            .await;
        result?;
        Ok(Deleted {
            steps: applied.steps_done,
            warnings: plan.warnings,
        })
    }

    /// The plan that deletes the public load balancer of `spec`, with what it was made
    /// from. Reads only.
    pub(super) async fn public_deletion(
        &self,
        spec: &LbSpec,
    ) -> Result<PublicDeletion, EnsureError> {
        let view = self.view().await?;
        let network_id = known_network(&view, spec);
        let ctx = match network_id.as_deref().map(|id| self.plan_context(&view, id)) {
            Some(Ok(ctx)) => ctx,
            // No rules and no recorded network: nothing opens ports, only the IP may go.
            _ => PlanContext {
                network: NetworkCapabilities::from_facts(
                    &NetworkFacts::default(),
                    &self.settings.server,
                ),
                server: self.settings.server,
                cluster_name: self.settings.cluster_name.clone(),
                access: KeyFeatures::of(&self.client),
            },
        };
        let mut observed = self.observe(&view, spec, &ctx.network).await?;
        let mut plan = plan::plan_delete(&spec.delete_spec(), &observed, &ctx);
        if deletes_unnamed_firewall_rule(&plan) {
            self.name_firewall_rules(&observed).await;
            let view = self.view().await?;
            observed = self.observe(&view, spec, &ctx.network).await?;
            plan = plan::plan_delete(&spec.delete_spec(), &observed, &ctx);
        }
        Ok(PublicDeletion {
            plan,
            observed,
            network_id,
        })
    }
}

/// The deletion of a public load balancer, planned.
pub(super) struct PublicDeletion {
    /// The plan.
    plan: Plan,
    /// What it was made from.
    observed: ObservedLb,
    /// The network of its rules, when known.
    network_id: Option<String>,
}

/// The network recorded on the Service (`…-network-id`), else the one of its rules.
fn known_network(view: &AccountView, spec: &LbSpec) -> Option<String> {
    spec.recorded_network_id.clone().or_else(|| {
        view.rules
            .iter()
            .find(|r| r.name.as_deref().is_some_and(|n| spec.owns_rule_name(n)))
            .and_then(|r| r.networkid.clone())
    })
}

impl Engine {
    /// Runs `plan` on the job queue of `network_id`, with no public IP to record (a
    /// deletion, the routing firewall companion).
    pub(super) async fn run_unrecorded(
        &self,
        network_id: &str,
        plan: &Plan,
    ) -> (apply::Applied, Result<(), ApplyError>) {
        let ticket = self.queues.enter(network_id);
        apply::apply(
            &self.client,
            &ticket,
            &self.picked,
            plan,
            &NoRecording,
            None,
        )
        .await
    }
}

/// Deletion never associates an IP, so nothing is recorded (also the orphans' plans).
pub(crate) struct NoRecording;

impl IpRecorder for NoRecording {
    fn record<'a>(
        &'a self,
        _ip: &'a RecordedIp,
    ) -> futures::future::BoxFuture<'a, Result<(), RecordError>> {
        Box::pin(async { Ok(()) })
    }

    fn claim<'a>(
        &'a self,
        _address: Option<std::net::IpAddr>,
    ) -> futures::future::BoxFuture<'a, Result<(), RecordError>> {
        Box::pin(async { Ok(()) })
    }

    fn forget<'a>(
        &'a self,
        _ip: &'a RecordedIp,
    ) -> futures::future::BoxFuture<'a, Result<(), RecordError>> {
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
#[path = "ensure_tests.rs"]
mod tests;
