//! The dry run of the service controller: the plan of each Service that wants a load
//! balancer, and the members of each of its rules with the reason, without applying
//! anything.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use crate::cloud::loadbalancer::ensure::{Engine, EnsureError};
use crate::cloud::loadbalancer::members::{MemberSelection, RuleMembers};
use crate::cloud::loadbalancer::plan::{Backends, Plan};
use crate::cloud::loadbalancer::spec::{LbSpec, SpecOptions};
use crate::controllers::node_cache::CachedNode;

use super::eligible::eligible_set;
use super::endpoints::{EndpointSnapshot, is_local};
use super::events::Reason;
use super::finalizer;
use super::reconcile::{LEFT_AS_IT_IS, key_of};
use super::tls_secrets;

/// At most this many Node names are printed per rule.
const NAMES_SHOWN: usize = 10;

/// The members one rule would have, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMemberSet {
    /// The rule's name.
    pub rule: String,
    /// The Nodes whose VMs are members, by name; `None` when the members are kept as
    /// they are (no eligible Node holds a ready endpoint for the rule's port).
    pub nodes: Option<Vec<String>>,
    /// Why (`Cluster: every eligible node`, `Local: …`).
    pub reason: &'static str,
}

impl std::fmt::Display for RuleMemberSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.nodes {
            None => write!(
                f,
                "members of {}: kept as they are, no eligible node holds a ready endpoint ({})",
                self.rule, self.reason
            ),
            Some(nodes) => {
                let shown: Vec<&str> = nodes.iter().take(NAMES_SHOWN).map(String::as_str).collect();
                let more = nodes.len().saturating_sub(NAMES_SHOWN);
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                write!(
                    f,
                    "members of {}: {} node(s): {}{more} ({})",
                    self.rule,
                    nodes.len(),
                    shown.join(", "),
                    self.reason
                )
            }
        }
    }
}

/// One Service's dry run.
#[derive(Debug, Clone)]
pub struct ServicePlan {
    /// `namespace/name`.
    pub key: String,
    /// The plan, or why there is none.
    pub plan: Result<Plan, String>,
    /// The members of each rule and why (empty when there is no plan).
    pub members: Vec<RuleMemberSet>,
    /// What goes first: the load balancer of the kind the Service no longer asks for
    /// (`public` or `internal`) and the plan deleting it.
    pub teardown: Option<(&'static str, Plan)>,
}

/// The plan of each Service that wants a load balancer, without applying it (the `plan`
/// dry run), for the eligible Nodes of `nodes` and, for `Local` Services, the endpoints
/// of `endpoints`; with `secrets`, the TLS Secrets the Services name are read (so the
/// plan shows the certificate steps).
pub async fn plan_services(
    engine: &Engine,
    secrets: Option<&kube::Client>,
    services: &[Service],
    nodes: &[CachedNode],
    endpoints: &EndpointSnapshot,
    options: &SpecOptions,
) -> Vec<ServicePlan> {
    let eligible = Arc::new(super::node_watch::as_pairs(&eligible_set(nodes)));
    let mut plans = Vec::new();
    for service in services
        .iter()
        .filter(|s| finalizer::wants_load_balancer(s, options))
    {
        let selection = if is_local(service) {
            MemberSelection::NodesWithEndpoints(endpoints.nodes_by_rule(service))
        } else {
            MemberSelection::AllEligible
        };
        let (plan, members, teardown) = match LbSpec::from_service(service, options) {
            Err(err) => (Err(err.to_string()), Vec::new(), None),
            Ok(mut spec) => {
                if let Some(kube) = secrets
                    && let Some(warning) = tls_secrets::fill(kube, &mut spec).await
                {
                    tracing::warn!(service = %key_of(service), "{warning}");
                }
                match teardown_of(engine, &spec).await {
                    Err(err) => (Err(err.to_string()), Vec::new(), None),
                    Ok(teardown) => match plan_one(engine, &spec, &eligible, &selection).await {
                        Ok((plan, members)) => (Ok(plan), members, teardown),
                        Err(err) => (Err(err.to_string()), Vec::new(), teardown),
                    },
                }
            }
        };
        plans.push(ServicePlan {
            key: key_of(service),
            plan,
            members,
            teardown,
        });
    }
    plans
}

/// What the controller deletes first for a Service that switched between internal and
/// public (as its reconcile does), planned only.
async fn teardown_of(
    engine: &Engine,
    spec: &LbSpec,
) -> Result<Option<(&'static str, Plan)>, EnsureError> {
    let Some(kind) = engine.left_behind(spec).await? else {
        return Ok(None);
    };
    let plan = engine.deletion_plan(spec, kind).await?;
    Ok(Some((kind.as_str(), plan)).filter(|(_, plan)| !plan.is_empty()))
}

/// Why the dry run has no plan for a Service.
#[derive(Debug, thiserror::Error)]
enum DryRunError {
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EnsureError),
    /// No eligible Node has a VM: the controller would change nothing.
    #[error("{}: {LEFT_AS_IT_IS}", Reason::UnAvailableLoadBalancer.default_note())]
    NoBackends,
}

/// The plan of one Service for the eligible Nodes and its member selection (the dry
/// run), and the members of its rules.
async fn plan_one(
    engine: &Engine,
    spec: &LbSpec,
    eligible: &Arc<Vec<(String, String)>>,
    selection: &MemberSelection,
) -> Result<(Plan, Vec<RuleMemberSet>), DryRunError> {
    // Rules without a Node to serve them keep their members (shown as kept).
    let planned = engine.plan_service(spec, eligible, selection).await?;
    let Some(prepared) = planned.prepared? else {
        // As the controller does: nothing changes without a Node to serve.
        return Err(DryRunError::NoBackends);
    };
    let resolved = &planned.resolved;
    let members = member_sets(spec, &resolved.backends, &resolved.vm_of_node, selection);
    Ok((prepared.plan().clone(), members))
}

/// The members each rule of `spec` gets from `backends`, by Node name.
fn member_sets(
    spec: &LbSpec,
    backends: &Backends,
    vm_of_node: &BTreeMap<String, String>,
    selection: &MemberSelection,
) -> Vec<RuleMemberSet> {
    let node_of_vm: BTreeMap<&str, &str> = vm_of_node
        .iter()
        .map(|(node, vm)| (vm.as_str(), node.as_str()))
        .collect();
    let names = |vms: &std::collections::BTreeSet<String>| {
        let mut names: Vec<String> = vms
            .iter()
            .filter_map(|vm| node_of_vm.get(vm.as_str()).map(|n| n.to_string()))
            .collect();
        names.sort();
        names
    };
    spec.rules
        .iter()
        .map(|rule| {
            let key = (rule.protocol.ip_protocol(), rule.public_port);
            let nodes = match backends.per_rule.get(&key) {
                None => Some(names(&backends.vm_ids)),
                Some(RuleMembers::Vms(vms)) => Some(names(vms)),
                Some(RuleMembers::Keep) => None,
            };
            RuleMemberSet {
                rule: rule.name.clone(),
                nodes,
                reason: selection.reason(),
            }
        })
        .collect()
}
