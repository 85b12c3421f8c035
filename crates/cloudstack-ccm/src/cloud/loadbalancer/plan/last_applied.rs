//! Keeping the last applied source ranges when an annotation cannot be read.

use super::*;

/// When the spec cannot read its source ranges or source CIDRs (a bad annotation), the
/// spec with the values last applied, as CloudStack shows them: the `cidrlist` of the
/// Service's rules; the ranges of its firewall rules or ACL items. `None` when nothing
/// is to be kept.
pub(super) fn with_last_applied_access(
    spec: &LbSpec,
    observed: &ObservedLb,
    ctx: &PlanContext,
) -> Result<Option<LbSpec>, PlanError> {
    if !spec.keep_rule_cidrs && !spec.keep_source_ranges {
        return Ok(None);
    }
    let mut resolved = spec.clone();
    if spec.keep_rule_cidrs {
        let rule = observed
            .rules
            .first()
            .ok_or(PlanError::LastAppliedUnknown {
                what: "the source CIDRs",
            })?;
        resolved.rule_cidrs = Some(rule.cidrs.clone());
        resolved.keep_rule_cidrs = false;
    }
    if spec.keep_source_ranges {
        let ports: BTreeSet<(IpProtocol, u16)> = observed
            .rules
            .iter()
            .map(|r| (r.protocol.ip_protocol(), r.public_port))
            .collect();
        let applied = match &ctx.network.port_access {
            PortAccess::Firewall => observed
                .firewall_rules
                .iter()
                .find(|f| ports.contains(&(f.protocol, f.start_port)))
                .map(|f| f.cidrs.clone()),
            // No item is ever added on a default list (or without a list): nothing to keep.
            PortAccess::NetworkAcl { acl_id, acl_name }
                if acl_id.is_none()
                    || acl_name
                        .as_deref()
                        .is_some_and(|n| DEFAULT_ACL_LISTS.contains(&n)) =>
            {
                Some(vec![Cidr::ANY_V4])
            }
            PortAccess::NetworkAcl { .. } => observed
                .acl_items
                .iter()
                .find(|i| acl_item_is_ours(i, &spec.lb_name, &spec.service.uid))
                .map(|i| i.cidrs.clone()),
            PortAccess::Open => Some(vec![Cidr::ANY_V4]),
        };
        resolved.source_ranges =
            applied
                .filter(|c| !c.is_empty())
                .ok_or(PlanError::LastAppliedUnknown {
                    what: "the source ranges",
                })?;
        resolved.keep_source_ranges = false;
    }
    Ok(Some(resolved))
}
