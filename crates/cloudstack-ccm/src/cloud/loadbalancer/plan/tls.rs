//! The TLS part of a plan: which `ssl` rules may exist, and the certificate steps.
//!
//! * **Gating** ([`gate`]): an `ssl` rule only where the network's provider terminates TLS
//!   ([`NetworkCapabilities::ssl_termination`](super::NetworkCapabilities)); elsewhere the
//!   port gets no rule at all and a warning names it — never a plain TCP rule serving a
//!   port asked to be HTTPS. Without a usable certificate (the Secret cannot be read or is
//!   refused) what stands on the port stays as it is, and no new `ssl` rule is made.
//! * **Certificates** ([`certificate_steps`]): the Secret's certificate is uploaded once per
//!   Service (unless the controller's certificate with the same fingerprint is there),
//!   in the first phase; it is attached to each `ssl` rule in a phase of its own after the
//!   rules stand and before their members are assigned; a rule that carries another
//!   certificate gets the new one with `forced=true` (sent whenever the server has it,
//!   4.17+: CloudStack swaps them in one job, and a repeat after a crash does not fail on
//!   the binding; before 4.17 the old one is removed first); certificates of ours that no
//!   rule keeps are deleted in a last phase. A certificate given by id is attached, never deleted.
//!   An unchanged certificate costs no step.

use super::*;
use crate::cloud::loadbalancer::observe::ObservedCertificate;
use crate::cloud::loadbalancer::tls_spec::CertificateSource;

/// `spec` without the `ssl` rules that must not be made (see the module doc), or `None`
/// when every rule may stay.
pub(super) fn gate(
    spec: &LbSpec,
    observed: &ObservedLb,
    ctx: &PlanContext,
    warnings: &mut Vec<String>,
) -> Option<LbSpec> {
    let tls = spec.tls.as_ref()?;
    let usable =
        tls.material.is_some() || matches!(tls.spec.source, CertificateSource::CloudStackId(_));
    let mut gated = spec.clone();
    let mut changed = false;
    gated.rules.retain_mut(|rule| {
        if rule.protocol != LbProtocol::Ssl {
            return true;
        }
        if let Some(command) = ctx.access.refused(Feature::TlsTermination) {
            warnings.push(format!(
                "port {}: no rule: the CloudStack keys' role may not call {command}, which TLS termination needs",
                rule.public_port,
            ));
            changed = true;
            return false;
        }
        if !ctx.network.ssl_termination {
            warnings.push(format!(
                "port {}: no rule: the load balancer of network {} (provider {}) does not terminate TLS (SslTermination; the Virtual Router does from CloudStack 4.22)",
                rule.public_port,
                ctx.network.network_label(),
                ctx.network.lb_provider.as_deref().unwrap_or("unknown"),
            ));
            changed = true;
            return false;
        }
        if usable {
            return true;
        }
        changed = true;
        match observed.rules.iter().find(|o| o.public_port == rule.public_port) {
            Some(o) => {
                // what stands stays, as it is
                rule.protocol = o.protocol;
                rule.name = o.name.clone();
                true
            }
            None => {
                warnings.push(format!(
                    "port {}: no rule until the certificate can be used",
                    rule.public_port
                ));
                false
            }
        }
    });
    changed.then_some(gated)
}

/// How the `ssl` rule named `name` is referred to after the rule steps in `stages`.
fn rule_ref(name: &str, observed: &ObservedLb, stages: &[Vec<Step>]) -> Option<RuleRef> {
    let steps = || stages.iter().flatten();
    if steps().any(|s| matches!(s, Step::CreateRule { name: n, .. } if n == name)) {
        return Some(RuleRef::Created {
            name: name.to_string(),
        });
    }
    if let Some(o) = observed.rule(name) {
        return Some(RuleRef::Existing {
            id: o.id.clone(),
            name: o.name.clone(),
        });
    }
    steps().find_map(|s| match s {
        Step::UpdateRule {
            id,
            new_name: Some(n),
            ..
        } if n == name => Some(RuleRef::Existing {
            id: id.clone(),
            name: n.clone(),
        }),
        _ => None,
    })
}

/// Adds the certificate steps to the planner's stages (prepare, claim, build, finish): an attach
/// stage goes in before finish and a cleanup stage after it.
pub(super) fn certificate_steps(
    spec: &LbSpec,
    observed: &ObservedLb,
    ctx: &PlanContext,
    stages: Vec<Vec<Step>>,
) -> Vec<Vec<Step>> {
    let mut stages = stages;
    let certs = &observed.certificates;
    if !certs.listed {
        return stages;
    }
    let mut attach = Vec::new();
    let mut build_extra = Vec::new();
    let mut prepare_extra = Vec::new();
    // The certificate the Service wants, if one can be named.
    let wanted: Option<(CertRef, Option<&ObservedCertificate>)> =
        spec.tls.as_ref().and_then(|tls| match &tls.spec.source {
            CertificateSource::CloudStackId(id) => Some((CertRef::Existing(id.clone()), None)),
            CertificateSource::Secret(_) => tls.material.as_ref().map(|m| {
                let print = &m.inspected.fingerprint;
                match certs.ours.iter().find(|c| &c.fingerprint == print) {
                    Some(c) => (CertRef::Existing(c.id.clone()), Some(c)),
                    None => (CertRef::Uploaded(print.clone()), None),
                }
            }),
        });
    let mut kept_ids: BTreeSet<String> = BTreeSet::new();
    if let Some((cert, _)) = &wanted {
        let mut needs_upload = false;
        for rule in spec.rules.iter().filter(|r| r.protocol == LbProtocol::Ssl) {
            let Some(r) = rule_ref(&rule.name, observed, &stages) else {
                continue;
            };
            let bound = match &r {
                RuleRef::Existing { id, .. } => certs.bound.get(id),
                RuleRef::Created { .. } => None,
            };
            if let (CertRef::Existing(id), Some(b)) = (cert, bound)
                && &b.id == id
            {
                kept_ids.insert(b.id.clone());
                continue;
            }
            let forced = ctx.server.lb_cert_forced;
            if bound.is_some() && !forced {
                build_extra.push(Step::RemoveCertificate { rule: r.clone() });
            }
            needs_upload |= matches!(cert, CertRef::Uploaded(_));
            attach.push(Step::AssignCertificate {
                rule: r,
                certificate: cert.clone(),
                forced,
                replaces: bound.is_some(),
            });
        }
        if let CertRef::Existing(id) = cert {
            kept_ids.insert(id.clone());
        }
        if needs_upload
            && let (CertRef::Uploaded(print), Some(m)) =
                (cert, spec.tls.as_ref().and_then(|t| t.material.as_ref()))
        {
            prepare_extra.push(Step::UploadCertificate {
                name: crate::cloud::loadbalancer::certificates::certificate_name(
                    &ctx.cluster_name,
                    &spec.service.uid,
                    print,
                ),
                fingerprint: print.clone(),
                material: Box::new(m.pem.clone()),
            });
        }
    }
    // Ours that no rule keeps after this plan.
    let reassigned: BTreeSet<&str> = attach
        .iter()
        .filter_map(|s| match s {
            Step::AssignCertificate {
                rule: RuleRef::Existing { id, .. },
                ..
            } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let deleted_rules: BTreeSet<&str> = stages
        .iter()
        .flatten()
        .filter_map(|s| match s {
            Step::DeleteRule { id, .. } => Some(id.as_str()),
            Step::UpdateRule {
                id,
                protocol: Some(p),
                ..
            } if *p != LbProtocol::Ssl => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let cleanup: Vec<Step> = certs
        .ours
        .iter()
        .filter(|c| !kept_ids.contains(&c.id))
        .filter(|c| {
            c.rule_ids.iter().all(|r| {
                reassigned.contains(r.as_str())
                    || deleted_rules.contains(r.as_str())
                    || !observed.rules.iter().any(|o| &o.id == r)
            })
        })
        .map(|c| Step::DeleteCertificate {
            id: c.id.clone(),
            name: c.name.clone(),
        })
        .collect();
    if let Some(first) = stages.first_mut() {
        first.extend(prepare_extra);
    }
    if let Some(build) = stages.get_mut(Stage::Build as usize) {
        build.extend(build_extra);
    }
    let at = stages.len().saturating_sub(1);
    stages.insert(at, attach);
    stages.push(cleanup);
    stages
}

/// The certificates to delete with the Service's load balancer: every one the controller
/// uploaded for it (the rules' deletion frees them).
pub(super) fn delete_steps(observed: &ObservedLb) -> Vec<Step> {
    observed
        .certificates
        .ours
        .iter()
        .map(|c| Step::DeleteCertificate {
            id: c.id.clone(),
            name: c.name.clone(),
        })
        .collect()
}
