//! The engine's caches: the shared view of the account and the per-rule members and
//! policies, renewed on a resync and after a plan changed the cloud.

use super::*;

impl Engine {
    /// Starts a resync: the next reads renew the shared view of CloudStack.
    pub(crate) fn start_resync(&self) {
        self.views.invalidate();
        self.prune_details.store(true, Ordering::SeqCst);
    }

    /// Forgets everything read of CloudStack (the view and every rule's members and
    /// policies), for when another writer may have changed it: read again as needed.
    pub fn forget_observed(&self) {
        self.views.invalidate();
        self.details.retain(std::iter::empty());
    }

    /// The shared view of the account, for the orphan pass (which takes the rules,
    /// firewall rules and addresses tagged for the cluster from it).
    pub(crate) async fn account_view(&self) -> Result<Arc<AccountView>, EnsureError> {
        self.view().await
    }

    /// The shared view; after a resync started, also forgets the cached details of
    /// rules that no longer exist (deleted by hand).
    pub(super) async fn view(&self) -> Result<Arc<AccountView>, EnsureError> {
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

    /// Renews what the controller's own changes made stale: after a plan that ran to its
    /// end, what it changed is spliced into the shared view from its jobs' results when
    /// they say it exactly (no read), else the public IPs it touched (the Service's, the
    /// one it associated, those of its rules) are read again into the view, unless it
    /// changed only members (which the view does not hold); after a failed one, the whole
    /// view is (a step may have changed more than it reported). The cached details of the
    /// rules it touched or created are forgotten.
    pub(super) async fn after_changes(
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
            self.certificates.invalidate("");
        }
        if !ran {
            self.views.invalidate();
            return;
        }
        if change_of(plan) == Change::MembersOnly {
            return;
        }
        let changes = &applied.view_changes;
        match changes.why_inexact() {
            None => return self.views.apply_changes(changes).await,
            Some(why) => tracing::debug!(
                why,
                "the plan's results do not say all it changed; its addresses are read again"
            ),
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
    pub(super) fn seed_created_rules(&self, plan: &Plan, applied: &apply::Applied) {
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

    /// Reads the public IPs of `observed` again, for the ids of the firewall rules the view
    /// holds without one (made by `openfirewall` since the view was read).
    pub(super) async fn name_firewall_rules(&self, observed: &ObservedLb) {
        let ips: BTreeSet<String> = observed
            .ip
            .iter()
            .map(|ip| ip.id.clone())
            .chain(observed.rules.iter().map(|r| r.public_ip_id.clone()))
            .filter(|id| !id.is_empty())
            .collect();
        self.views.renew_ips(&self.client, &ips).await;
    }
}

/// Whether `plan` deletes a firewall rule whose id the view does not hold (see
/// [`Engine::name_firewall_rules`]).
pub(super) fn deletes_unnamed_firewall_rule(plan: &Plan) -> bool {
    plan.steps()
        .any(|step| matches!(step, Step::DeleteFirewallRule { id, .. } if id.is_empty()))
}
