//! The engine's side of internal load balancers (CloudStack's Internal LB on a VPC
//! tier): their plan, their deletion, and what a Service switching between internal and
//! public leaves to tear down.

use super::*;
use crate::cloud::loadbalancer::observe::internal::{list_internal, of_service};

impl Engine {
    /// Observes the Service's internal rules on the backends' tier and plans them.
    pub(super) async fn prepare_internal(
        &self,
        view: &Arc<AccountView>,
        spec: &LbSpec,
        backends: &Backends,
        ctx: &PlanContext,
        network_id: String,
        zone_id: Option<String>,
    ) -> Result<Prepared, EnsureError> {
        // Refused before the tier is read (`plan_internal` refuses it too, being pure).
        plan::check_internal(&ctx.network)?;
        let listed = self
            .internal_rules
            .get(view, &network_id, || {
                list_internal(&self.client, &network_id)
            })
            .await
            .map_err(EnsureError::Observe)?;
        let observed = of_service(&listed, spec);
        let mut backends = backends.clone();
        backends.network_id = network_id.clone();
        let plan = plan::plan_internal(spec, &observed, &backends, ctx)?;
        Ok(Prepared {
            plan,
            observation: Observation::Internal {
                address: observed.iter().find_map(|rule| rule.address),
            },
            network_id,
            zone_id,
        })
    }

    /// Deletes the Service's internal rules on the tier recorded on it
    /// (`…-internal-network-id`, written before the first was created); nothing to do
    /// without a record.
    pub(crate) async fn delete_internal(&self, spec: &LbSpec) -> Result<Deleted, EnsureError> {
        let deletion = match self.internal_deletion(spec).await {
            // Rules the keys' role may not list cannot be deleted by it either; the Service
            // still goes (no finalizer waits on a role), and the Warning says what stays.
            Err(EnsureError::Observe(error)) if error.is_command_refused() => {
                return Ok(Deleted {
                    steps: 0,
                    warnings: vec![format!(
                        "the internal load-balancer rules of this Service, if any, stay on tier {}: the CloudStack keys' role may not call {}",
                        spec.recorded_internal_network_id.as_deref().unwrap_or("?"),
                        error.command().unwrap_or("listLoadBalancers"),
                    )],
                });
            }
            other => other?,
        };
        let Some((network_id, plan)) = deletion.filter(|(_, plan)| !plan.is_empty()) else {
            return Ok(Deleted {
                steps: 0,
                warnings: Vec::new(),
            });
        };
        let change = self.internal_rules.changing(network_id);
        let (applied, result) = self.run_unrecorded(network_id, &plan).await;
        drop(change);
        result?;
        Ok(Deleted {
            steps: applied.steps_done,
            warnings: Vec::new(),
        })
    }

    /// The plan that deletes the Service's internal rules on its recorded tier (`None`
    /// without a record), with that tier. Reads only: the tier's rules, listed afresh (a
    /// deletion never works from a listing another Service read).
    async fn internal_deletion<'a>(
        &self,
        spec: &'a LbSpec,
    ) -> Result<Option<(&'a str, Plan)>, EnsureError> {
        let Some(network_id) = spec.recorded_internal_network_id.as_deref() else {
            return Ok(None);
        };
        let observed = match list_internal(&self.client, network_id).await {
            Ok(listed) => of_service(&listed, spec),
            // The tier is gone, and CloudStack deleted its rules with it: a Service must
            // not be kept from going for a network that no longer exists.
            Err(err) if err.is_not_found() => {
                tracing::info!(network = network_id, error = %err, "the tier of the internal rules is gone");
                Vec::new()
            }
            Err(err) => return Err(EnsureError::Observe(err)),
        };
        Ok(Some((network_id, plan::plan_internal_delete(&observed))))
    }

    /// The kind of load balancer the Service had and no longer asks for: internal rules
    /// recorded on a Service that is public now, or a public load balancer of one that
    /// is internal now.
    pub(crate) async fn left_behind(&self, spec: &LbSpec) -> Result<Option<LbKind>, EnsureError> {
        if spec.internal.is_none() && spec.recorded_internal_network_id.is_some() {
            return Ok(Some(LbKind::Internal));
        }
        if spec.internal.is_some() && self.has_public(spec).await? {
            return Ok(Some(LbKind::Public));
        }
        Ok(None)
    }

    /// Deletes the Service's load balancer of `kind` (see [`Engine::left_behind`]).
    pub(crate) async fn delete_kind(
        &self,
        spec: &LbSpec,
        kind: LbKind,
    ) -> Result<Deleted, EnsureError> {
        match kind {
            LbKind::Public => self.delete_public(spec).await,
            LbKind::Internal => self.delete_internal(spec).await,
        }
    }

    /// The plan [`Engine::delete_kind`] would run, without running it (the dry run).
    pub(crate) async fn deletion_plan(
        &self,
        spec: &LbSpec,
        kind: LbKind,
    ) -> Result<Plan, EnsureError> {
        Ok(match kind {
            LbKind::Public => self.public_deletion(spec).await?.plan,
            LbKind::Internal => self
                .internal_deletion(spec)
                .await?
                .map(|(_, plan)| plan)
                .unwrap_or_default(),
        })
    }

    /// Whether the Service may have a public load balancer: an IP id recorded on it, or
    /// rules named after it in the account's view (no call while the view is fresh).
    async fn has_public(&self, spec: &LbSpec) -> Result<bool, EnsureError> {
        if spec.recorded_ip_id.is_some() || spec.claimed_ip.is_some() {
            return Ok(true);
        }
        let view = self.view().await?;
        Ok(view
            .rules
            .iter()
            .any(|r| r.name.as_deref().is_some_and(|n| spec.owns_rule_name(n))))
    }
}
