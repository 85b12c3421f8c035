//! How steps and what they name read in a plan (`cloudstack-ccm plan`, logs).

use super::*;

fn join<T: fmt::Display>(items: &[T], sep: &str) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

impl fmt::Display for IpRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpRef::Existing { address, .. } => write!(f, "{address}"),
            IpRef::Associated => f.write_str("the new IP"),
        }
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleRef::Existing { name, .. } | RuleRef::Created { name } => f.write_str(name),
        }
    }
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceRef::Existing(id) => f.write_str(id),
            ResourceRef::CreatedRule(name) => f.write_str(name),
            ResourceRef::AssociatedIp => f.write_str("the new IP"),
        }
    }
}

/// A rule's name for display.
fn rule_label(rule: &RuleRef) -> &str {
    match rule {
        RuleRef::Existing { name, .. } | RuleRef::Created { name } => name,
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::AssociateIp {
                target,
                address,
                replacing,
            } => {
                let what = address.map_or("a new IP".to_string(), |a| format!("IP {a}"));
                match target {
                    AssociateTarget::Network(n) => write!(f, "associate {what} with network {n}")?,
                    AssociateTarget::Vpc(v) => write!(f, "associate {what} with VPC {v}")?,
                }
                match replacing {
                    Some(id) => write!(f, " (IP {id} is another Service's)"),
                    None => Ok(()),
                }
            }
            Step::AdoptClaimedIp { address, .. } => write!(f, "adopt claimed IP {address}"),
            Step::CreateRule {
                name,
                ip,
                protocol,
                public_port,
                private_port,
                algorithm,
                cidrs,
                open_firewall,
                ..
            } => {
                write!(
                    f,
                    "create rule {name}: {ip}:{public_port} -> node port {private_port} ({protocol}, {algorithm}"
                )?;
                if !cidrs.is_empty() {
                    write!(f, ", cidrlist {}", join(cidrs, ","))?;
                }
                if *open_firewall {
                    f.write_str(", open firewall")?;
                }
                f.write_str(")")
            }
            Step::UpdateRule {
                name,
                new_name,
                protocol,
                algorithm,
                cidrs,
                ..
            } => {
                let mut changes = Vec::new();
                if let Some(n) = new_name {
                    changes.push(format!("rename to {n}"));
                }
                if let Some(p) = protocol {
                    changes.push(format!("protocol {p}"));
                }
                if let Some(a) = algorithm {
                    changes.push(format!("algorithm {a}"));
                }
                if let Some(c) = cidrs {
                    changes.push(format!("cidrlist {}", join(c, ",")));
                }
                write!(f, "update rule {name}: {}", changes.join(", "))
            }
            Step::DeleteRule { name, .. } => write!(f, "delete rule {name}"),
            Step::CreateInternalRule {
                name,
                network_id,
                address,
                source_port,
                instance_port,
                algorithm,
            } => {
                let on = match address {
                    InternalAddress::Known(address) => address.to_string(),
                    InternalAddress::Acquire => "a free address".to_string(),
                    InternalAddress::OfFirstRule => "the address of the first rule".to_string(),
                };
                write!(
                    f,
                    "create internal rule {name} on tier {network_id}: {on}:{source_port} -> node port {instance_port} ({algorithm})"
                )
            }
            Step::DeleteInternalRule { name, .. } => write!(f, "delete internal rule {name}"),
            Step::AssignMembers { rule, vm_ids } => {
                let ids: Vec<&String> = vm_ids.iter().collect();
                write!(f, "assign {} to rule {rule}", join(&ids, ","))
            }
            Step::RemoveMembers { rule, vm_ids } => {
                write!(f, "remove {} from rule {rule}", join(vm_ids, ","))
            }
            Step::CreateFirewallRule {
                ip,
                protocol,
                port,
                cidrs,
            } => {
                write!(
                    f,
                    "open firewall {protocol} {ip}:{port} from {}",
                    join(cidrs, ",")
                )
            }
            Step::DeleteFirewallRule { id, protocol, port } => {
                write!(f, "delete firewall rule {id} ({protocol} {port})")
            }
            Step::CreateAclItem {
                acl_id,
                protocol,
                port,
                cidrs,
                ..
            } => {
                write!(
                    f,
                    "add ACL item to {acl_id}: allow {protocol} {port} from {}",
                    join(cidrs, ",")
                )
            }
            Step::DeleteAclItem { id, protocol, port } => {
                write!(f, "delete ACL item {id} ({protocol} {port})")
            }
            Step::CreateRoutingFirewallRule {
                network_id,
                protocol,
                port,
                destination,
                cidrs,
            } => write!(
                f,
                "open routing firewall of network {network_id}: {protocol} {destination}:{port} from {}",
                join(cidrs, ",")
            ),
            Step::DeleteRoutingFirewallRule { id, protocol, port } => {
                write!(f, "delete routing firewall rule {id} ({protocol} {port})")
            }
            Step::CreateHealthCheck { rule, check } => write!(
                f,
                "add health check to rule {rule}: {} every {}s, timeout {}s, healthy {}, unhealthy {}",
                check.path,
                check.interval_secs,
                check.timeout_secs,
                check.healthy_threshold,
                check.unhealthy_threshold
            ),
            Step::DeleteHealthCheck { id, rule } => {
                write!(f, "delete health check {id} of rule {rule}")
            }
            Step::CreateStickiness { rule, policy, .. } => {
                let params: Vec<String> = policy
                    .params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                write!(f, "add stickiness {} to rule {rule}", policy.method)?;
                if !params.is_empty() {
                    write!(f, " ({})", params.join(","))?;
                }
                Ok(())
            }
            Step::DeleteStickiness { id, rule } => {
                write!(f, "delete stickiness policy {id} of rule {rule}")
            }
            Step::TagResources {
                resource_type,
                resources,
                tags,
            } => {
                let tags: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(
                    f,
                    "tag {} {}: {}",
                    resource_type.as_str(),
                    join(resources, ","),
                    tags.join(",")
                )
            }
            Step::UntagResources {
                resource_type,
                resources,
                keys,
            } => write!(
                f,
                "untag {} {}: {}",
                resource_type.as_str(),
                join(resources, ","),
                keys.join(",")
            ),
            Step::ReleaseIp { address, .. } => write!(f, "release IP {address}"),
            Step::UploadCertificate {
                name, fingerprint, ..
            } => write!(f, "upload certificate {name} (fingerprint {fingerprint})"),
            Step::AssignCertificate {
                rule,
                certificate,
                replaces,
                ..
            } => {
                let what = match certificate {
                    CertRef::Existing(id) => format!("certificate {id}"),
                    CertRef::Uploaded(print) => format!("the uploaded certificate {print}"),
                };
                let verb = if *replaces { "swap in" } else { "attach" };
                write!(f, "{verb} {what} on rule {}", rule_label(rule))
            }
            Step::RemoveCertificate { rule } => {
                write!(f, "remove the certificate of rule {}", rule_label(rule))
            }
            Step::DeleteCertificate { id, name } => write!(f, "delete certificate {name} ({id})"),
        }
    }
}
