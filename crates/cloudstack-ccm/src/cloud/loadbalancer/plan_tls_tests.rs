//! Plan tests of TLS termination: gating by the provider's `SslTermination`, the
//! certificate steps of a new Service, of a renewal and of a deletion, and none for an
//! unchanged certificate.

use super::*;
use crate::cloud::loadbalancer::certificates::PemMaterial;
use crate::cloud::loadbalancer::observe::{ObservedCertificate, ObservedCertificates};
use crate::cloud::loadbalancer::ssl_fixtures::ssl_fixture;
use crate::cloud::loadbalancer::tls_spec::CertificateMaterial;

fn material(name: &str) -> CertificateMaterial {
    let pem = PemMaterial::from_tls_secret(
        ssl_fixture(&format!("{name}-cert.pem")),
        ssl_fixture(&format!("{name}-key.pem")).to_owned(),
    )
    .expect("pem");
    let inspected = pem.inspect(jiff::Timestamp::now()).expect("valid");
    CertificateMaterial { pem, inspected }
}

/// A Service with ports 80 and 443, TLS on 443 from a Secret whose certificate is `cert`.
fn tls_spec(cert: Option<&str>) -> LbSpec {
    let mut s = spec(
        json!({ann::TLS_SECRET.key: "shop-tls"}),
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
        json!({}),
    );
    s.tls.as_mut().expect("tls").material = cert.map(material);
    s
}

/// An isolated network whose provider terminates TLS or not.
fn network(ssl: bool, version: (u32, u32, u32)) -> PlanContext {
    let mut lb = lb_service("tcp, udp, tcp-proxy", false, "VirtualRouter");
    if ssl {
        lb.capabilities
            .push(("SslTermination".into(), "true".into()));
    }
    let facts = NetworkFacts {
        id: NET.into(),
        name: "iso".into(),
        services: vec![
            lb,
            NetworkService {
                name: "Firewall".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    ctx_with(facts, version)
}

fn ours(id: &str, cert: &str, rules: &[&str]) -> ObservedCertificate {
    let print = material(cert).inspected.fingerprint;
    ObservedCertificate {
        id: id.into(),
        name: crate::cloud::loadbalancer::certificates::certificate_name("prod", UID, &print),
        fingerprint: print,
        rule_ids: rules.iter().map(|r| r.to_string()).collect(),
    }
}

/// The Service applied, its 443 rule carrying certificate `bound` (one of ours).
fn applied_with(spec: &LbSpec, bound: ObservedCertificate) -> ObservedLb {
    let mut observed = applied(spec, &["vm1"]);
    let rule_id = observed
        .rules
        .iter()
        .find(|r| r.public_port == 443)
        .expect("443")
        .id
        .clone();
    let mut bound = bound;
    bound.rule_ids = vec![rule_id.clone()];
    observed.certificates = ObservedCertificates {
        listed: true,
        bound: [(rule_id, bound.clone())].into(),
        ours: vec![bound],
    };
    observed
}

#[test]
fn a_new_service_uploads_once_and_attaches_before_members() {
    let s = tls_spec(Some("leaf-a"));
    let observed = ObservedLb {
        certificates: ObservedCertificates {
            listed: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let p = plan(
        &s,
        &observed,
        &backends(&["vm1"]),
        &network(true, (4, 22, 0)),
    )
    .unwrap();
    let k = kinds(&p);
    assert!(
        k[0].contains(&"upload-cert") && k[0].contains(&"associate"),
        "{k:?}"
    );
    let attach = k
        .iter()
        .position(|ph| ph.contains(&"assign-cert"))
        .expect("attach");
    let members = k
        .iter()
        .rposition(|ph| ph.contains(&"assign"))
        .expect("members");
    assert!(attach < members, "certificate before members: {k:?}");
    assert_eq!(
        p.steps()
            .filter(|s| matches!(s, Step::UploadCertificate { .. }))
            .count(),
        1
    );
    assert!(!k.iter().flatten().any(|s| *s == "delete-cert"));
    let created_ssl = p.steps().any(|s| {
        matches!(
            s,
            Step::CreateRule {
                protocol: LbProtocol::Ssl,
                public_port: 443,
                ..
            }
        )
    });
    assert!(created_ssl);
    let shown = p.steps().map(|s| format!("{s} {s:?}")).collect::<String>();
    assert!(
        !shown.contains("PRIVATE KEY") && shown.contains("upload certificate cloudstack-ccm.prod."),
        "{shown}"
    );
}

#[test]
fn without_ssl_termination_the_port_gets_no_rule_and_a_warning() {
    let s = tls_spec(Some("leaf-a"));
    let observed = ObservedLb {
        certificates: ObservedCertificates {
            listed: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let p = plan(
        &s,
        &observed,
        &backends(&["vm1"]),
        &network(false, (4, 21, 0)),
    )
    .unwrap();
    let ports: Vec<u16> = p
        .steps()
        .filter_map(|s| match s {
            Step::CreateRule { public_port, .. } => Some(*public_port),
            _ => None,
        })
        .collect();
    assert_eq!(ports, vec![80], "no rule at all for 443");
    assert!(
        !p.steps()
            .any(|s| matches!(s, Step::UploadCertificate { .. }))
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.starts_with("port 443: no rule")),
        "{:?}",
        p.warnings
    );
    // an SslTermination capability of a Virtual Router below 4.22 is not believed
    let old = plan(
        &s,
        &observed,
        &backends(&["vm1"]),
        &network(true, (4, 21, 0)),
    )
    .unwrap();
    assert!(!old.steps().any(|s| matches!(
        s,
        Step::CreateRule {
            public_port: 443,
            ..
        }
    )));
}

#[test]
fn an_unchanged_certificate_plans_nothing() {
    let s = tls_spec(Some("leaf-a"));
    let observed = applied_with(&s, ours("c1", "leaf-a", &[]));
    let p = plan(
        &s,
        &observed,
        &backends(&["vm1"]),
        &network(true, (4, 22, 0)),
    )
    .unwrap();
    assert!(p.is_empty(), "{:?}", kinds(&p));
}

#[test]
fn a_renewal_uploads_swaps_in_one_job_then_deletes_the_old_one() {
    let s = tls_spec(Some("leaf-b"));
    let observed = applied_with(&s, ours("c-old", "leaf-a", &[]));
    let p = plan(
        &s,
        &observed,
        &backends(&["vm1"]),
        &network(true, (4, 22, 0)),
    )
    .unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            vec!["upload-cert"],
            vec!["assign-cert"],
            vec!["delete-cert"]
        ]
    );
    assert!(p.steps().any(|s| matches!(
        s,
        Step::AssignCertificate {
            forced: true,
            replaces: true,
            certificate: CertRef::Uploaded(_),
            ..
        }
    )));
    assert!(
        p.steps()
            .any(|s| matches!(s, Step::DeleteCertificate { id, .. } if id == "c-old"))
    );
}

#[test]
fn an_unusable_secret_keeps_what_stands() {
    // the Service had plain TCP on 443; the Secret cannot be read: nothing changes
    let before = spec(
        json!({}),
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
        json!({}),
    );
    let observed = applied(&before, &["vm1"]);
    let s = tls_spec(None);
    let p = plan(
        &s,
        &observed,
        &backends(&["vm1"]),
        &network(true, (4, 22, 0)),
    )
    .unwrap();
    assert!(p.is_empty(), "{:?}", kinds(&p));
    // a new Service: no rule for 443 yet
    let fresh = plan(
        &s,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &network(true, (4, 22, 0)),
    )
    .unwrap();
    assert!(!fresh.steps().any(|s| matches!(
        s,
        Step::CreateRule {
            public_port: 443,
            ..
        }
    )));
    assert!(
        fresh.warnings.iter().any(|w| w.starts_with("port 443")),
        "{:?}",
        fresh.warnings
    );
}

#[test]
fn deleting_the_service_deletes_our_certificates_after_the_rules() {
    let s = tls_spec(Some("leaf-a"));
    let observed = applied_with(&s, ours("c1", "leaf-a", &[]));
    let p = plan_delete(&s.delete_spec(), &observed, &network(true, (4, 22, 0)));
    let k = kinds(&p);
    let rules = k
        .iter()
        .position(|ph| ph.contains(&"delete-rule"))
        .expect("rules");
    let certs = k
        .iter()
        .position(|ph| ph.contains(&"delete-cert"))
        .expect("certs");
    assert!(rules < certs, "{k:?}");
}

#[test]
fn before_4_17_the_old_certificate_is_removed_first() {
    let s = tls_spec(Some("leaf-b"));
    let observed = applied_with(&s, ours("c-old", "leaf-a", &[]));
    // a NetScaler on 4.16: SslTermination, but no `forced`
    let mut ctx = network(true, (4, 16, 0));
    ctx.network.lb_provider = Some("Netscaler".into());
    ctx.network.ssl_termination = true;
    ctx.network.lb_protocols.insert(LbProtocol::Ssl);
    let p = plan(&s, &observed, &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            vec!["upload-cert"],
            vec!["remove-cert"],
            vec!["assign-cert"],
            vec!["delete-cert"]
        ]
    );
    assert!(
        p.steps()
            .any(|s| matches!(s, Step::AssignCertificate { forced: false, .. }))
    );
}

#[test]
fn a_certificate_given_by_id_is_attached_and_never_deleted() {
    let mut s = spec(
        json!({ann::TLS_CERTIFICATE_ID.key: "1d3a7c2e-5b4f-4e8a-9c61-2f0b8d7e6a15"}),
        &[("TCP", 443, 30443)],
        json!({}),
    );
    s.tls.as_mut().expect("tls").material = None;
    let observed = ObservedLb {
        certificates: ObservedCertificates {
            listed: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let p = plan(
        &s,
        &observed,
        &backends(&["vm1"]),
        &network(true, (4, 22, 0)),
    )
    .unwrap();
    assert!(p.steps().any(|s| matches!(s,
        Step::AssignCertificate { certificate: CertRef::Existing(id), replaces: false, .. }
            if id == "1d3a7c2e-5b4f-4e8a-9c61-2f0b8d7e6a15")));
    assert!(!p.steps().any(|s| matches!(
        s,
        Step::UploadCertificate { .. } | Step::DeleteCertificate { .. }
    )));
    let gone = plan_delete(&s.delete_spec(), &observed, &network(true, (4, 22, 0)));
    assert!(
        !gone
            .steps()
            .any(|s| matches!(s, Step::DeleteCertificate { .. }))
    );
}

#[test]
fn a_tls_only_service_without_ssl_termination_plans_no_address() {
    let mut s = spec(
        json!({ann::TLS_SECRET.key: "shop-tls"}),
        &[("TCP", 443, 30443)],
        json!({}),
    );
    s.tls.as_mut().expect("tls").material = Some(material("leaf-a"));
    let err = plan(
        &s,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &network(false, (4, 21, 0)),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("no port can be served: port 443: no rule"),
        "{text}"
    );
}
