//! Plan unit tests: no network, the plan is data.

use serde_json::{Value, json};

use super::*;
use crate::cloud::loadbalancer::annotations as ann;
use crate::cloud::loadbalancer::capabilities::{NetworkFacts, NetworkService};
use crate::cloud::loadbalancer::observe::{ForeignRule, ObservedIp, ObservedStickiness};
use crate::cloud::loadbalancer::spec::SpecOptions;
use crate::cloud::loadbalancer::vocabulary::StickinessMethod;

const UID: &str = "6a1f0b2c-3d4e-4f50-8a9b-0c1d2e3f4a5b";
const LB: &str = "a6a1f0b2c3d4e4f508a9b0c1d2e3f4a5";
const NET: &str = "net-1";
const IP_ID: &str = "ip-1";

fn spec(annotations: Value, ports: &[(&str, u16, u16)], extra: Value) -> LbSpec {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(p, port, node)| json!({"protocol": p, "port": port, "nodePort": node}))
        .collect();
    let mut svc = json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": UID, "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": ports}
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        svc["spec"][k] = v;
    }
    let svc = serde_json::from_value(svc).expect("Service JSON");
    LbSpec::from_service(
        &svc,
        &SpecOptions {
            cluster_name: "prod".into(),
            load_balancer_class: None,
        },
    )
    .expect("valid spec")
}

fn simple(ports: &[(&str, u16, u16)]) -> LbSpec {
    spec(json!({}), ports, json!({}))
}

fn lb_service(protocols: &str, health: bool, provider: &str) -> NetworkService {
    let mut caps = vec![
        ("SupportedLbAlgorithms".to_string(), "roundrobin,leastconn,source".to_string()),
        ("SupportedProtocols".to_string(), protocols.to_string()),
        (
            "SupportedStickinessMethods".to_string(),
            r#"[{"methodname":"LbCookie"},{"methodname":"AppCookie"},{"methodname":"SourceBased"}]"#.to_string(),
        ),
    ];
    if health {
        caps.push(("HealthCheckPolicy".into(), "true".into()));
    }
    NetworkService {
        name: "Lb".into(),
        capabilities: caps,
        providers: vec![provider.into()],
    }
}

fn ctx_with(facts: NetworkFacts, version: (u32, u32, u32)) -> PlanContext {
    let server = ServerFeatures::for_version(version.0, version.1, version.2);
    PlanContext {
        network: NetworkCapabilities::from_facts(&facts, &server),
        server,
        cluster_name: "prod".into(),
        access: crate::cloud::key_access::KeyFeatures::all(),
    }
}

/// An isolated Virtual Router network.
fn isolated(version: (u32, u32, u32)) -> PlanContext {
    let facts = NetworkFacts {
        id: NET.into(),
        name: "iso".into(),
        services: vec![
            lb_service("tcp, udp, tcp-proxy", false, "VirtualRouter"),
            NetworkService {
                name: "Firewall".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    ctx_with(facts, version)
}

/// A NetScaler-like isolated network (UDP and health checks).
fn netscaler() -> PlanContext {
    let facts = NetworkFacts {
        id: NET.into(),
        name: "ns".into(),
        services: vec![
            lb_service("tcp,udp", true, "Netscaler"),
            NetworkService {
                name: "Firewall".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    ctx_with(facts, (4, 20, 0))
}

/// A VPC tier with an ACL list of this name.
fn vpc(acl_name: &str) -> PlanContext {
    let facts = NetworkFacts {
        id: NET.into(),
        name: "tier".into(),
        vpc_id: Some("vpc-1".into()),
        acl_id: Some("acl-1".into()),
        acl_name: Some(acl_name.into()),
        services: vec![
            lb_service("tcp, udp, tcp-proxy", false, "VpcVirtualRouter"),
            NetworkService {
                name: "NetworkACL".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    ctx_with(facts, (4, 19, 0))
}

/// A set of VM ids, as backends and rule members hold them.
fn vm_set(ids: &[&str]) -> Arc<BTreeSet<String>> {
    Arc::new(ids.iter().map(|v| v.to_string()).collect())
}

fn backends(vms: &[&str]) -> Backends {
    Backends {
        network_id: NET.into(),
        vm_ids: vm_set(vms),
        ..Backends::default()
    }
}

fn our_ip() -> ObservedIp {
    ObservedIp {
        id: IP_ID.into(),
        address: "203.0.113.5".parse().unwrap(),
        ownership: IpOwnership::Ours,
        associated_network_id: Some(NET.into()),
        vpc_id: None,
        is_source_nat: false,
        is_static_nat: false,
        is_allocating: false,
        tags: [(TAG_ASSOCIATED.to_string(), "true".to_string())].into(),
    }
}

fn owner_tags() -> Tags {
    [
        (TAG_CLUSTER.to_string(), "prod".to_string()),
        (TAG_SERVICE_UID.to_string(), UID.to_string()),
    ]
    .into()
}

fn observed_rule(
    name: &str,
    protocol: LbProtocol,
    port: u16,
    node_port: u16,
    members: &[&str],
) -> ObservedRule {
    ObservedRule {
        id: format!("rule-{name}"),
        name: name.into(),
        protocol,
        public_port: port,
        private_port: node_port,
        algorithm: Algorithm::RoundRobin,
        cidrs: Vec::new(),
        public_ip_id: IP_ID.into(),
        network_id: Some(NET.into()),
        members: vm_set(members),
        tags: owner_tags(),
        health_checks: Vec::new(),
        stickiness: Vec::new(),
        health_checks_unknown: false,
        stickiness_unknown: false,
    }
}

fn fw(port: u16, cidrs: &[&str]) -> ObservedFirewallRule {
    ObservedFirewallRule {
        id: format!("fw-{port}"),
        protocol: IpProtocol::Tcp,
        start_port: port,
        end_port: port,
        cidrs: cidrs.iter().map(|c| Cidr::parse(c).unwrap()).collect(),
        tags: Tags::new(),
    }
}

/// What CloudStack holds after the spec was applied on an isolated network.
fn applied(spec: &LbSpec, vms: &[&str]) -> ObservedLb {
    ObservedLb {
        ip: Some(our_ip()),
        rules: spec
            .rules
            .iter()
            .map(|r| observed_rule(&r.name, r.protocol, r.public_port, r.node_port, vms))
            .collect(),
        firewall_rules: spec
            .rules
            .iter()
            .map(|r| fw(r.public_port, &["0.0.0.0/0"]))
            .collect(),
        ..Default::default()
    }
}

fn kinds(plan: &Plan) -> Vec<Vec<&'static str>> {
    plan.phases
        .iter()
        .map(|p| {
            p.steps
                .iter()
                .map(|s| match s {
                    Step::AssociateIp { .. } => "associate",
                    Step::AdoptClaimedIp { .. } => "adopt",
                    Step::CreateRule { .. } => "create-rule",
                    Step::UpdateRule { .. } => "update-rule",
                    Step::DeleteRule { .. } => "delete-rule",
                    Step::CreateInternalRule { .. } => "create-internal-rule",
                    Step::DeleteInternalRule { .. } => "delete-internal-rule",
                    Step::AssignMembers { .. } => "assign",
                    Step::RemoveMembers { .. } => "remove",
                    Step::CreateFirewallRule { .. } => "create-fw",
                    Step::DeleteFirewallRule { .. } => "delete-fw",
                    Step::CreateAclItem { .. } => "create-acl",
                    Step::DeleteAclItem { .. } => "delete-acl",
                    Step::CreateRoutingFirewallRule { .. } => "create-routing-fw",
                    Step::DeleteRoutingFirewallRule { .. } => "delete-routing-fw",
                    Step::CreateHealthCheck { .. } => "create-hc",
                    Step::DeleteHealthCheck { .. } => "delete-hc",
                    Step::CreateStickiness { .. } => "create-st",
                    Step::DeleteStickiness { .. } => "delete-st",
                    Step::TagResources { .. } => "tag",
                    Step::UntagResources { .. } => "untag",
                    Step::ReleaseIp { .. } => "release",
                    Step::UploadCertificate { .. } => "upload-cert",
                    Step::AssignCertificate { .. } => "assign-cert",
                    Step::RemoveCertificate { .. } => "remove-cert",
                    Step::DeleteCertificate { .. } => "delete-cert",
                })
                .collect()
        })
        .collect()
}

#[path = "plan_tls_tests.rs"]
mod tls;

const THREE_PORTS: [(&str, u16, u16); 3] = [
    ("TCP", 80, 30080),
    ("TCP", 443, 30443),
    ("TCP", 8080, 30880),
];

#[test]
fn plan_prints_readably() {
    let s = spec(
        json!({}),
        &THREE_PORTS[..1],
        json!({"loadBalancerSourceRanges": ["10.0.0.0/8"]}),
    );
    let p = plan(
        &s,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    let text = p.to_string();
    let want = format!(
        "phase 1:\n  - associate a new IP with network {NET}\n\
         phase 2:\n  - create rule {LB}-tcp-80: the new IP:80 -> node port 30080 (tcp, roundrobin)\n\
         \x20 - open firewall tcp the new IP:80 from 10.0.0.0/8\n\
         \x20 - tag PublicIpAddress the new IP: cloudstack-ccm/associated=true,cloudstack-ccm/cluster=prod,cloudstack-ccm/service-uid={UID}\n\
         phase 3:\n  - assign vm1 to rule {LB}-tcp-80\n\
         \x20 - tag LoadBalancer {LB}-tcp-80: cloudstack-ccm/cluster=prod,cloudstack-ccm/service-uid={UID}\n"
    );
    assert_eq!(text, want);
}

#[path = "plan_claim_tests.rs"]
mod claim;
#[path = "plan_internal_tests.rs"]
mod internal;
#[path = "plan_ip_tests.rs"]
mod ip;
#[path = "plan_members_tests.rs"]
mod members;
#[path = "plan_policies_tests.rs"]
mod policies;
#[path = "plan_ports_tests.rs"]
mod ports;
#[path = "plan_provider_tests.rs"]
mod provider;
#[path = "plan_rules_tests.rs"]
mod rules;
