//! The engine's side of internal load balancers (CloudStack's Internal LB on a VPC
//! tier): their plan, their deletion, and what a Service switching between internal and
//! public leaves to tear down.

use super::*;
use crate::cloud::loadbalancer::observe::internal::{list_internal, of_service};

impl Engine {
    /// Observes the Service's internal rules on the backends' tier and plans them.
    pub(super) async fn prepare_internal(
        &self,
        spec: &LbSpec,
        backends: &Backends,
        ctx: &PlanContext,
        network_id: String,
        zone_id: Option<String>,
    ) -> Result<Prepared, EnsureError> {
        // Refused before anything is read.
        plan::check_internal(&ctx.network)?;
        let view = self.view().await?;
        let listed = self
            .internal_rules
            .rules(&self.client, &view, &network_id)
            .await
            .map_err(EnsureError::Observe)?;
        let observed = of_service(&listed, spec);
        let mut backends = backends.clone();
        backends.network_id = network_id.clone();
        let plan = plan::plan_internal(spec, &observed, &backends, ctx)?;
        Ok(Prepared {
            plan,
            observed: ObservedLb::default(),
            network_id,
            zone_id,
            kind: PlannedKind::Internal {
                observed_address: observed.iter().find_map(|rule| rule.address),
            },
        })
    }

    /// Deletes the Service's internal rules on the tier recorded on it
    /// (`…-internal-network-id`, written before the first was created); nothing to do
    /// without a record.
    pub(crate) async fn delete_internal(&self, spec: &LbSpec) -> Result<Deleted, EnsureError> {
        let Some(network_id) = spec.recorded_internal_network_id.as_deref() else {
            return Ok(Deleted {
                steps: 0,
                warnings: Vec::new(),
            });
        };
        // Listed afresh: a deletion never works from a listing another Service read.
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
        let plan = plan::plan_internal_delete(&observed);
        if plan.is_empty() {
            return Ok(Deleted {
                steps: 0,
                warnings: Vec::new(),
            });
        }
        let change = self.internal_rules.changing(network_id);
        let (applied, result) = self.run_unrecorded(network_id, &plan).await;
        drop(change);
        result?;
        Ok(Deleted {
            steps: applied.steps_done,
            warnings: Vec::new(),
        })
    }

    /// Whether the Service may have a public load balancer: an IP id recorded on it, or
    /// rules named after it in the account's view (no call while the view is fresh).
    pub(crate) async fn has_public(&self, spec: &LbSpec) -> Result<bool, EnsureError> {
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
