//! The planner's state: the steps gathered for each of the three stages of a plan.

use super::*;

/// The four phases the planner fills, in order (see the module doc of
/// [`plan`](super)); each becomes one [`Phase`] of the plan, empty ones dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Associate the IP and delete what frees a port a new rule needs.
    Prepare,
    /// Take an IP found allocated (adopted, or recorded without the Service's UID): its
    /// ownership tags, the UID among them, before anything is built on it (see
    /// [`super::super::ip_claim`]). An IP the plan associates is tagged in `Build`.
    Claim,
    /// Create and update rules, open ports, fix members of existing rules, remove
    /// outdated policies.
    Build,
    /// Members and policies of new rules, tags, and deletion of rules no port needs.
    Finish,
}

pub(crate) struct Planner<'a> {
    pub(super) spec: &'a LbSpec,
    pub(super) observed: &'a ObservedLb,
    pub(super) backends: &'a Backends,
    pub(super) ctx: &'a PlanContext,
    pub(super) ip: IpRef,
    /// The steps of each [`Stage`], indexed by `stage as usize`.
    pub(super) stages: [Vec<Step>; 4],
    /// Names of rules created by this plan.
    pub(super) created: Vec<String>,
    /// Public ports of rules deleted and created again (their firewall is redone).
    pub(super) recreated_ports: BTreeSet<u16>,
    /// Public ports of created rules that get `openfirewall=true`.
    pub(super) open_firewall: BTreeSet<u16>,
    /// Names of created rules that get `openfirewall=true` (tagged so).
    pub(super) created_open: BTreeSet<String>,
    /// Ids of observed rules that stay.
    pub(super) kept_ids: BTreeSet<String>,
    /// The IP the controller the load balancer was taken over from associated (untagged):
    /// tagged as associated by us, so it is released on delete as its creator would.
    pub(super) adopted_ip: Option<String>,
}

impl<'a> Planner<'a> {
    pub(super) fn new(
        spec: &'a LbSpec,
        observed: &'a ObservedLb,
        backends: &'a Backends,
        ctx: &'a PlanContext,
        ip: IpRef,
    ) -> Self {
        Planner {
            spec,
            observed,
            backends,
            ctx,
            ip,
            stages: Default::default(),
            created: Vec::new(),
            recreated_ports: BTreeSet::new(),
            open_firewall: BTreeSet::new(),
            created_open: BTreeSet::new(),
            kept_ids: BTreeSet::new(),
            adopted_ip: None,
        }
    }

    /// Adds `step` to `stage`.
    pub(super) fn push(&mut self, stage: Stage, step: Step) {
        self.stages[stage as usize].push(step);
    }

    /// The steps of every stage, in order.
    pub(super) fn into_stages(self) -> Vec<Vec<Step>> {
        self.stages.into()
    }
}
