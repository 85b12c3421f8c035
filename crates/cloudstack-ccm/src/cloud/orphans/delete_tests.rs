use std::time::Duration;

use cloudstack::{AssociateIpAddress, CreateLoadBalancerRule, Params};

use super::*;
use crate::cloud::loadbalancer::vocabulary::IpProtocol;

fn orphan(kind: OrphanKind, id: &str, network: Option<&str>, step: Option<Step>) -> Orphan {
    Orphan {
        kind,
        id: id.into(),
        what: id.into(),
        reason: "Service gone-uid no longer exists".into(),
        deletable: true,
        network_id: network.map(str::to_string),
        step: step.map(OrphanStep::LoadBalancer),
    }
}

#[test]
fn the_orphans_of_each_network_make_one_plan_rules_before_addresses() {
    let rule = |id: &str| Step::DeleteRule {
        id: id.into(),
        name: format!("agone-tcp-{id}"),
    };
    let mut kept_ip = orphan(
        OrphanKind::PublicIp,
        "ip-kept",
        Some("net-a"),
        Some(Step::ReleaseIp {
            id: "ip-kept".into(),
            address: "203.0.113.9".parse().expect("address"),
        }),
    );
    kept_ip.deletable = false;
    let orphans = [
        orphan(
            OrphanKind::PublicIp,
            "ip-1",
            Some("net-a"),
            Some(Step::ReleaseIp {
                id: "ip-1".into(),
                address: "203.0.113.5".parse().expect("address"),
            }),
        ),
        orphan(
            OrphanKind::LoadBalancerRule,
            "80",
            Some("net-a"),
            Some(rule("80")),
        ),
        orphan(
            OrphanKind::FirewallRule,
            "fw-1",
            Some("net-a"),
            Some(Step::DeleteFirewallRule {
                id: "fw-1".into(),
                protocol: IpProtocol::Udp,
                port: 53,
            }),
        ),
        orphan(
            OrphanKind::Certificate,
            "cert-1",
            Some("net-a"),
            Some(Step::DeleteCertificate {
                id: "cert-1".into(),
                name: "k8s-kubernetes-gone-uid".into(),
            }),
        ),
        orphan(
            OrphanKind::LoadBalancerRule,
            "443",
            Some("tier-b"),
            Some(rule("443")),
        ),
        orphan(
            OrphanKind::AclItem,
            "acl-1",
            Some("tier-b"),
            Some(Step::DeleteAclItem {
                id: "acl-1".into(),
                protocol: IpProtocol::Tcp,
                port: 443,
            }),
        ),
        Orphan {
            step: Some(OrphanStep::Route(RouteStep::Delete {
                id: "route-1".into(),
                vpc_id: "vpc-1".into(),
                cidr: "10.244.9.0/24".into(),
                next_hop: Some("10.100.1.99".into()),
                reason: "Node gone no longer exists".into(),
            })),
            ..orphan(OrphanKind::StaticRoute, "route-1", Some("vpc-1"), None)
        },
        kept_ip,
    ];
    assert_eq!(
        route_plan(&orphans).to_string(),
        "delete static route route-1 (10.244.9.0/24 via 10.100.1.99) in VPC vpc-1: Node gone no longer exists\n"
    );
    let printed: Vec<(String, String)> = by_network(&orphans)
        .iter()
        .map(|(network, phases)| (network.clone(), plan_of(phases).to_string()))
        .collect();
    assert_eq!(
        printed,
        [
            (
                "net-a".to_string(),
                "phase 1:\n  - delete firewall rule fw-1 (udp 53)\nphase 2:\n  - delete rule agone-tcp-80\nphase 3:\n  - release IP 203.0.113.5\n  - delete certificate k8s-kubernetes-gone-uid (cert-1)\n"
                    .to_string()
            ),
            (
                "tier-b".to_string(),
                "phase 1:\n  - delete ACL item acl-1 (tcp 443)\nphase 2:\n  - delete rule agone-tcp-443\n"
                    .to_string()
            ),
        ]
    );
}

/// The small scenario's isolated network, and a rule on a new address of it.
pub(in crate::cloud::orphans) async fn rule_on_network(
    client: &cloudstack::Client,
    sim: &cloudstack_sim::SimServer,
) -> (String, String) {
    let network = sim.with_state(|state| {
        state
            .networks
            .iter()
            .find(|n| n.name == cloudstack_sim::SMALL_NETWORK)
            .expect("network")
            .id
            .clone()
    });
    let rule = rule_on_new_address(client, &network, "agone-tcp-80", 30080).await;
    (network, rule)
}

/// A rule `name` (port 80 to node port `node_port`) on a new address of `network`.
pub(in crate::cloud::orphans) async fn rule_on_new_address(
    client: &cloudstack::Client,
    network: &str,
    name: &str,
    node_port: u32,
) -> String {
    let ip = client
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(network.to_string()),
            ..Default::default()
        })
        .await
        .expect("associated")
        .id
        .expect("IP id");
    client
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: name.into(),
            algorithm: "roundrobin".into(),
            privateport: node_port,
            publicport: 80,
            publicipid: Some(ip),
            openfirewall: Some(false),
            ..Default::default()
        })
        .await
        .expect("rule")
        .id
        .expect("rule id")
}

#[tokio::test]
async fn an_orphan_delete_waits_in_the_networks_queue_behind_our_running_jobs() {
    let mut scenario = cloudstack_sim::Scenario::small();
    scenario.settings.job_duration_ms = 20;
    let (sim, client) = crate::cloud::loadbalancer::simulated_cloud(scenario).await;
    let (network, rule) = rule_on_network(&client, &sim).await;
    let rule_exists = || sim.with_state(|s| s.lb_rules.iter().any(|r| r.id == rule));

    // A Service's plan entered the network's queue first and holds every place in it.
    let queues = NetworkQueues::default();
    let service = queues.enter(&network);
    let mut running = Vec::new();
    for _ in 0..crate::cloud::job_queue::JOBS_IN_FLIGHT {
        let job = service
            .submit(
                &client,
                "associateIpAddress",
                Params::new().set("networkid", &network),
            )
            .await
            .expect("submitted");
        running.push(job);
    }

    let orphans = [orphan(
        OrphanKind::LoadBalancerRule,
        &rule,
        Some(&network),
        Some(Step::DeleteRule {
            id: rule.clone(),
            name: "agone-tcp-80".into(),
        }),
    )];
    let deleting = delete_queued(&client, &queues, &orphans);
    tokio::pin!(deleting);
    assert!(
        tokio::time::timeout(Duration::from_millis(400), &mut deleting)
            .await
            .is_err(),
        "the delete waits for a place in the network's queue"
    );
    assert!(
        rule_exists(),
        "nothing is sent while the Service's jobs run"
    );

    for job in running {
        job.wait(&client).await.expect("the Service's job");
    }
    let results = deleting.await;
    assert_eq!(results.len(), 1);
    assert!(results[0].1.is_ok(), "{:?}", results[0].1);
    assert!(!rule_exists(), "the orphaned rule is deleted");

    // Deleting it again finds nothing: done.
    let again = delete_queued(&client, &queues, &orphans).await;
    assert!(again[0].1.is_ok(), "{:?}", again[0].1);
}
