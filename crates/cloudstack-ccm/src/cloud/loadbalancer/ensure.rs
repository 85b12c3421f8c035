//! The [`Engine`]: for one Service, [`Engine::prepare`] (observe → plan) and
//! [`Engine::apply`], or [`Engine::ensure_deleted`]; every Service shares one view of the
//! account ([`AccountView`]), one per-rule cache of members and policies, and the
//! networks' job queues.

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
use super::observe::assemble::{ObserveInputs, observe};
use super::observe::details::{PolicyKinds, RuleDetails, RuleDetailsCache};
use super::plan::{self, Backends, Plan, PlanContext, PlanError, RuleRef, Step, VmIds};
use super::spec::LbSpec;
use crate::cloud::inventory::{Inventory, InventoryError, ListedVms};
use crate::cloud::job_queue::NetworkQueues;
use crate::cloud::provider_id::ProviderId;

mod interrupted;

/// Why a Service's load balancer could not be ensured or deleted.
#[derive(Debug, thiserror::Error)]
pub enum EnsureError {
    /// Reading CloudStack failed.
    #[error("reading CloudStack: {0}")]
    Observe(#[source] cloudstack::Error),
    /// Listing the VMs (the node inventory) failed.
    #[error("reading CloudStack: {0}")]
    Inventory(#[source] InventoryError),
    /// The spec cannot be reached on this network (nothing was changed).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A step failed.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// The load balancer's network could not be determined.
    #[error(transparent)]
    Network(#[from] NetworkError),
    /// The plan ran, yet the load balancer has no public IP.
    #[error("the load balancer has no public IP")]
    NoPublicIp,
}

/// Why the network of a Service's load balancer is not known.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// CloudStack's view holds no network of this id.
    #[error("network {0} not found")]
    NotFound(String),
    /// No eligible node has a VM, and neither the Service nor a rule names a network.
    #[error("no eligible node with a VM, so the load balancer's network is unknown")]
    Unknown,
}

impl EnsureError {
    /// Whether retrying without a change of the Service cannot help (bad input, an IP
    /// owned by someone else, an unsupported protocol): no backoff retry needed, the
    /// periodic resync still re-checks it.
    pub fn is_permanent(&self) -> bool {
        matches!(self, EnsureError::Plan(_))
    }
}

/// How a plan changes the load balancer, for Events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing to do.
    None,
    /// Only members are added or removed (the backend nodes changed).
    MembersOnly,
    /// Anything else.
    Other,
}

/// A plan ready to run, with what it was made from.
#[derive(Debug)]
pub struct Prepared {
    plan: Plan,
    observed: ObservedLb,
    network_id: String,
    /// Zone of the network (where a new address is claimed).
    zone_id: Option<String>,
}

impl Prepared {
    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// What the plan changes.
    pub fn change(&self) -> Change {
        change_of(&self.plan)
    }
}

/// What `plan` changes.
fn change_of(plan: &Plan) -> Change {
    if plan.is_empty() {
        Change::None
    } else if plan
        .steps()
        .all(|s| matches!(s, Step::AssignMembers { .. } | Step::RemoveMembers { .. }))
    {
        Change::MembersOnly
    } else {
        Change::Other
    }
}

/// The backends of one Service's load balancer and the Nodes left out of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedBackends {
    /// The network of the load balancer and the VMs of the eligible Nodes on it (no
    /// network when no eligible Node has a VM and none was given).
    pub backends: Backends,
    /// The eligible Nodes on the chosen network and their VMs (Node name → VM id).
    pub vm_of_node: Arc<BTreeMap<String, String>>,
    /// Eligible Nodes on other networks, by name.
    pub elsewhere: Vec<NodeElsewhere>,
}

/// An eligible Node left out because its VM is on another network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeElsewhere {
    /// The Node's name.
    pub node: String,
    /// The network of its VM's default NIC.
    pub network_id: String,
}

impl ResolvedBackends {
    /// The Warning naming the Nodes left out, if any.
    pub fn elsewhere_warning(&self) -> Option<String> {
        if self.elsewhere.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .elsewhere
            .iter()
            .map(|n| format!("{} (network {})", n.node, n.network_id))
            .collect();
        Some(format!(
            "nodes on other networks left out of the load balancer on network {}: {}; a load balancer serves one network (choose it with the network-id annotation)",
            self.backends.network_id,
            names.join(", ")
        ))
    }
}

/// The result of running a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ensured {
    /// The load balancer's public address.
    pub public_ip: IpAddr,
    /// Its id.
    pub ip_id: String,
    /// The network the rules live in.
    pub network_id: String,
    /// Warnings of the plan (for a Warning Event).
    pub warnings: Vec<String>,
    /// Steps of the plan run (most are one async job; see [`Step`]).
    pub steps: usize,
}

/// The result of deleting a load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    /// Steps of the plan run (0: there was nothing).
    pub steps: usize,
    /// Warnings (e.g. the IP was kept).
    pub warnings: Vec<String>,
}

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
}

/// Backends resolved from one list of eligible Nodes, one inventory view and one network.
struct ResolvedMemo {
    nodes: Arc<Vec<(String, String)>>,
    network_id: Option<String>,
    vms: Arc<ListedVms>,
    resolved: ResolvedBackends,
}

/// At most this many resolved backends are kept (one per network a Service names).
const RESOLVED_MEMO_SIZE: usize = 8;

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
            settings,
        }
    }

    /// Starts a resync: the next reads renew the shared view of CloudStack.
    pub fn start_resync(&self) {
        self.views.invalidate();
        self.prune_details.store(true, Ordering::SeqCst);
    }

    /// Forgets everything read of CloudStack (the view and every rule's members and
    /// policies), for when another writer may have changed it: read again as needed.
    pub fn forget_observed(&self) {
        self.views.invalidate();
        self.details.retain(std::iter::empty());
    }

    /// The shared view; after a resync started, also forgets the cached details of
    /// rules that no longer exist (deleted by hand).
    async fn view(&self) -> Result<Arc<AccountView>, EnsureError> {
        let view = self
            .views
            .get(&self.client)
            .await
            .map_err(EnsureError::Observe)?;
        if self.prune_details.swap(false, Ordering::SeqCst) {
            self.details
                .retain(view.rules.iter().filter_map(|r| r.id.as_deref()));
        }
        Ok(view)
    }

    /// Resolves Nodes (name, providerID) to their VMs and the VMs' default-NIC network,
    /// from the node inventory as it is (a VM's default network does not change while it
    /// lives; the inventory is listed again only when it lacks one of the VMs, so a resync
    /// lists no VM and never makes a call per Node). Nodes whose
    /// VM is unknown are left out. A load balancer serves one network: `network_id` when
    /// given (the one recorded or asked for on the Service), else the network holding the
    /// most of the Nodes (the lowest id among equals); Nodes on other networks are left
    /// out and named in [`ResolvedBackends::elsewhere`].
    ///
    /// The result is reused while `nodes` and the inventory's view are the same objects
    /// (and every VM was found): the Services of a resync share one set of VM ids.
    pub async fn resolve_backends(
        &self,
        nodes: &Arc<Vec<(String, String)>>,
        network_id: Option<&str>,
    ) -> Result<ResolvedBackends, EnsureError> {
        let current = self.inventory.current();
        if let Some(found) = self.memo().iter().find(|memo| {
            Arc::ptr_eq(&memo.nodes, nodes)
                && Arc::ptr_eq(&memo.vms, &current)
                && memo.network_id.as_deref() == network_id
        }) {
            return Ok(found.resolved.clone());
        }
        let (resolved, vms, all_found) = self.resolve_backends_now(nodes, network_id).await?;
        if all_found {
            let mut memo = self.memo();
            memo.retain(|memo| Arc::ptr_eq(&memo.nodes, nodes) && Arc::ptr_eq(&memo.vms, &vms));
            if memo.len() >= RESOLVED_MEMO_SIZE {
                memo.remove(0);
            }
            memo.push(ResolvedMemo {
                nodes: nodes.clone(),
                network_id: network_id.map(str::to_string),
                vms,
                resolved: resolved.clone(),
            });
        }
        Ok(resolved)
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Vec<ResolvedMemo>> {
        self.resolved.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Engine::resolve_backends`] without the reuse: also the inventory view it read and
    /// whether every Node's VM was in it.
    async fn resolve_backends_now(
        &self,
        nodes: &[(String, String)],
        network_id: Option<&str>,
    ) -> Result<(ResolvedBackends, Arc<ListedVms>, bool), EnsureError> {
        let mut all_found = true;
        let mut vm_of_node = Vec::with_capacity(nodes.len());
        for (name, provider_id) in nodes {
            match ProviderId::parse(provider_id) {
                Ok(id) => vm_of_node.push((name, id.vm_id().to_ascii_lowercase())),
                Err(err) => {
                    tracing::debug!(node = %name, error = %err, "node left out of load balancers")
                }
            }
        }
        let vms = self
            .inventory
            .view_holding(vm_of_node.iter().map(|(_, vm_id)| vm_id.as_str()))
            .await
            .map_err(EnsureError::Inventory)?;
        let mut by_network: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (name, vm_id) in vm_of_node {
            match vms.by_id(&vm_id).and_then(|vm| vm.network_id.as_ref()) {
                Some(network) => {
                    by_network
                        .entry(network.clone())
                        .or_default()
                        .insert(name.clone(), vm_id);
                }
                None => {
                    all_found = false;
                    tracing::debug!(node = %name, vm = %vm_id, "no VM for node; left out of load balancers")
                }
            }
        }
        let chosen = match network_id {
            Some(id) => Some(id.to_string()),
            None => by_network
                .iter()
                .max_by(|(a_id, a), (b_id, b)| a.len().cmp(&b.len()).then(b_id.cmp(a_id)))
                .map(|(id, _)| id.clone()),
        };
        let Some(chosen) = chosen else {
            return Ok((ResolvedBackends::default(), vms, all_found));
        };
        let vm_of_node = by_network.remove(&chosen).unwrap_or_default();
        let vm_ids = Arc::new(vm_of_node.values().cloned().collect());
        let elsewhere = by_network
            .into_iter()
            .flat_map(|(network, members)| {
                members.into_keys().map(move |node| NodeElsewhere {
                    node,
                    network_id: network.clone(),
                })
            })
            .collect();
        let resolved = ResolvedBackends {
            backends: Backends {
                network_id: chosen,
                vm_ids,
                ..Backends::default()
            },
            vm_of_node: Arc::new(vm_of_node),
            elsewhere,
        };
        Ok((resolved, vms, all_found))
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
        })
    }

    /// Observes and plans, without changing anything (the dry run uses this alone).
    pub async fn prepare(
        &self,
        spec: &LbSpec,
        backends: &Backends,
    ) -> Result<Prepared, EnsureError> {
        let mut view = self.view().await?;
        let network_id = self.network_of(&view, spec, backends)?;
        if view.network(&network_id).is_none() {
            // A network the view has not seen (Nodes joined on a new tier since it was
            // read): read the view again once.
            self.start_resync();
            view = self.view().await?;
        }
        let ctx = self.plan_context(&view, &network_id)?;
        let observed = self.observe(&view, spec, &ctx.network).await?;
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
        let zone_id = view.network(&network_id).and_then(|n| n.zoneid.clone());
        Ok(Prepared {
            plan,
            observed,
            network_id,
            zone_id,
        })
    }

    /// Which network the Service's rules live in: the backends' network, else the one
    /// recorded on the Service, else the one of its existing rules.
    fn network_of(
        &self,
        view: &AccountView,
        spec: &LbSpec,
        backends: &Backends,
    ) -> Result<String, EnsureError> {
        if !backends.network_id.is_empty() {
            return Ok(backends.network_id.clone());
        }
        known_network(view, spec).ok_or(EnsureError::Network(NetworkError::Unknown))
    }

    /// The network the Service's load balancer is bound to already: the one recorded on
    /// (or asked for by) the Service, else the one of its existing rules; `None` for a
    /// new load balancer.
    pub async fn network_in_use(&self, spec: &LbSpec) -> Result<Option<String>, EnsureError> {
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
            observed,
            network_id,
            zone_id,
        } = prepared;
        let warnings = plan.warnings.clone();
        let applied = if plan.is_empty() {
            apply::Applied::default()
        } else {
            let ticket = self.queues.enter(&network_id);
            let interrupted = interrupted::Interrupted::watch(self, &observed);
            let (applied, result) = apply::apply(
                &self.client,
                &ticket,
                &self.picked,
                &plan,
                recorder,
                zone_id.as_deref(),
            )
            .await;
            interrupted.ran_to_its_end();
            self.after_changes(&plan, &observed, &applied, result.is_ok())
                .await;
            result?;
            self.seed_created_rules(&plan, &applied);
            applied
        };
        let (ip_id, public_ip) = applied
            .associated_ip
            .clone()
            .or_else(|| observed.ip.as_ref().map(|ip| (ip.id.clone(), ip.address)))
            .ok_or_else(|| EnsureError::NoPublicIp)?;
        Ok(Ensured {
            public_ip,
            ip_id,
            network_id,
            warnings,
            steps: applied.steps_done,
        })
    }

    /// Renews what the controller's own changes made stale: after a plan that ran to its
    /// end, the public IPs it touched (the Service's, the one it associated, those of its
    /// rules) are read again into the shared view, unless it changed only members (which
    /// the view does not hold); after a failed one, the whole view is (a step may have
    /// changed more than it reported). The cached details of the rules it touched or
    /// created are forgotten.
    async fn after_changes(
        &self,
        plan: &Plan,
        observed: &ObservedLb,
        applied: &apply::Applied,
        ran: bool,
    ) {
        for id in applied
            .touched_rules
            .iter()
            .chain(applied.created_rules.values())
        {
            self.details.forget(id);
        }
        if !ran || change_of(plan) != Change::MembersOnly {
            // certificates and their rules may have changed
            self.certificates.invalidate().await;
        }
        if !ran {
            self.views.invalidate();
            return;
        }
        if change_of(plan) == Change::MembersOnly {
            return;
        }
        let touched_ips: BTreeSet<String> = observed
            .ip
            .iter()
            .map(|ip| ip.id.clone())
            .chain(applied.associated_ip.iter().map(|(id, _)| id.clone()))
            .chain(observed.rules.iter().map(|r| r.public_ip_id.clone()))
            .filter(|id| !id.is_empty())
            .collect();
        self.views.renew_ips(&self.client, &touched_ips).await;
    }

    /// After a plan ran to its end, the details of the rules it created are known (their
    /// members, no policies) unless it also gave them policies: cache them, which spares
    /// two reads per new rule at the next reconcile.
    fn seed_created_rules(&self, plan: &Plan, applied: &apply::Applied) {
        for (name, id) in &applied.created_rules {
            let is_this =
                |rule: &RuleRef| matches!(rule, RuleRef::Created { name: n } if n == name);
            let mut members: Arc<BTreeSet<String>> = Arc::default();
            let mut has_policies = false;
            for step in plan.steps() {
                match step {
                    // The eligible set itself (a new rule gets every eligible VM at once).
                    Step::AssignMembers {
                        rule,
                        vm_ids: VmIds::Eligible(set),
                    } if is_this(rule) && members.is_empty() => members = set.clone(),
                    Step::AssignMembers { rule, vm_ids } if is_this(rule) => {
                        Arc::make_mut(&mut members).extend(vm_ids.iter().cloned());
                    }
                    Step::CreateHealthCheck { rule, .. } | Step::CreateStickiness { rule, .. }
                        if is_this(rule) =>
                    {
                        has_policies = true;
                    }
                    _ => {}
                }
            }
            if !has_policies {
                self.details.insert(
                    id,
                    RuleDetails {
                        members,
                        ..RuleDetails::default()
                    },
                );
            }
        }
    }

    /// Deletes the load balancer of `spec` (its rules, their firewall rules or ACL items,
    /// and the IP when the controller associated it and nothing else uses it).
    pub async fn ensure_deleted(&self, spec: &LbSpec) -> Result<Deleted, EnsureError> {
        let view = self.view().await?;
        let network_id = self.network_of(&view, spec, &Backends::default()).ok();
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
            },
        };
        let observed = self.observe(&view, spec, &ctx.network).await?;
        let plan = plan::plan_delete(&spec.delete_spec(), &observed, &ctx);
        if plan.is_empty() {
            return Ok(Deleted {
                steps: 0,
                warnings: plan.warnings,
            });
        }
        let ticket = self.queues.enter(network_id.as_deref().unwrap_or_default());
        let (applied, result) = apply::apply(
            &self.client,
            &ticket,
            &self.picked,
            &plan,
            &NoRecording,
            None,
        )
        .await;
        self.after_changes(&plan, &observed, &applied, result.is_ok())
            .await;
        result?;
        Ok(Deleted {
            steps: applied.steps_done,
            warnings: plan.warnings,
        })
    }
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

/// Deletion never associates an IP, so nothing is recorded.
struct NoRecording;

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
mod tests {
    use super::*;
    use crate::cloud::loadbalancer::plan::{Phase, RuleRef};

    fn prepared(steps: Vec<Step>) -> Prepared {
        let phases = if steps.is_empty() {
            Vec::new()
        } else {
            vec![Phase { steps }]
        };
        Prepared {
            plan: Plan {
                phases,
                warnings: Vec::new(),
            },
            observed: ObservedLb::default(),
            network_id: "net".into(),
            zone_id: None,
        }
    }

    #[test]
    fn member_only_plans_are_told_apart_for_events() {
        let rule = RuleRef::Existing {
            id: "r".into(),
            name: "n".into(),
        };
        assert_eq!(prepared(Vec::new()).change(), Change::None);
        let members = vec![
            Step::AssignMembers {
                rule: rule.clone(),
                vm_ids: vec!["vm".into()].into(),
            },
            Step::RemoveMembers {
                rule,
                vm_ids: vec!["old".into()],
            },
        ];
        assert_eq!(prepared(members).change(), Change::MembersOnly);
        let delete = vec![Step::DeleteRule {
            id: "r".into(),
            name: "n".into(),
        }];
        assert_eq!(prepared(delete).change(), Change::Other);
    }

    /// A VM source whose VMs are all on network `net-1`, counting its lists.
    struct OneNetwork(std::sync::atomic::AtomicUsize);

    impl crate::cloud::inventory::VmSource for OneNetwork {
        fn list_vms(
            &self,
        ) -> futures::future::BoxFuture<
            '_,
            Result<Vec<crate::cloud::inventory::VmRecord>, crate::cloud::inventory::InventoryError>,
        > {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async {
                Ok((1..=3)
                    .map(|i| crate::cloud::inventory::VmRecord {
                        id: format!("00000000-0000-0000-0000-00000000000{i}"),
                        name: format!("node-{i}"),
                        network_id: Some("net-1".into()),
                        ..Default::default()
                    })
                    .collect())
            })
        }
    }

    #[tokio::test]
    async fn services_of_the_same_eligible_nodes_share_one_set_of_vm_ids() {
        let source = Arc::new(OneNetwork(Default::default()));
        let inventory = Arc::new(Inventory::new(source.clone(), Default::default()));
        let client = cloudstack::Client::new(cloudstack::ClientConfig::new(
            "http://127.0.0.1:9/client/api",
            "key",
            "secret",
        ))
        .expect("client");
        let engine = Engine::new(
            client,
            inventory,
            EngineSettings {
                cluster_name: "c".into(),
                server: ServerFeatures::for_version(4, 22, 0),
                view_max_age: Duration::from_secs(60),
                details_max_age: Duration::from_secs(60),
            },
        );
        let nodes = |n: usize| {
            Arc::new(
                (1..=n)
                    .map(|i| {
                        (
                            format!("node-{i}"),
                            format!("external-cloudstack://00000000-0000-0000-0000-00000000000{i}"),
                        )
                    })
                    .collect::<Vec<_>>(),
            )
        };
        let eligible = nodes(3);
        let first = engine.resolve_backends(&eligible, None).await.unwrap();
        let second = engine.resolve_backends(&eligible, None).await.unwrap();
        assert_eq!(first.backends.network_id, "net-1");
        assert_eq!(first.backends.vm_ids.len(), 3);
        assert!(
            Arc::ptr_eq(&first.backends.vm_ids, &second.backends.vm_ids),
            "one set for every Service of the same eligible Nodes"
        );
        // Other eligible Nodes: resolved again, from the same inventory view.
        let fewer = engine.resolve_backends(&nodes(2), None).await.unwrap();
        assert_eq!(fewer.backends.vm_ids.len(), 2);
        assert_eq!(source.0.load(Ordering::SeqCst), 1, "one VM list in all");
    }
}
