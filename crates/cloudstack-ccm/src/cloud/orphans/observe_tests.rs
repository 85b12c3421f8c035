//! What the orphan pass observes: from the account view, the same tagged rules, firewall
//! rules and addresses as the tagged lists, without listing them.

use std::time::Duration;

use super::delete::tests::{rule_on_network, rule_on_new_address};
use super::*;

#[tokio::test]
async fn the_account_view_gives_what_the_tagged_lists_give_without_listing_them() {
    let (sim, client) =
        crate::cloud::loadbalancer::simulated_cloud(cloudstack_sim::Scenario::small()).await;
    // Two rules on two addresses; one of each tagged for cluster "k", the others for "other".
    let (_, ours) = rule_on_network(&client, &sim).await;
    let network = sim.with_state(|state| state.lb_rules[0].network_id.clone());
    let theirs = rule_on_new_address(&client, &network, "other-tcp-80", 30081).await;
    let ip_of = |rule: &str| {
        sim.with_state(|state| {
            state
                .lb_rules
                .iter()
                .find(|r| r.id == rule)
                .map(|r| r.ip_id.clone())
                .expect("rule")
        })
    };
    for (rule, cluster) in [(&ours, "k"), (&theirs, "other")] {
        for (id, kind) in [
            (rule.clone(), "LoadBalancer"),
            (ip_of(rule), "PublicIpAddress"),
        ] {
            client
                .create_tags(&cloudstack::CreateTags {
                    resourceids: vec![id],
                    resourcetype: kind.into(),
                    tags: vec![(TAG_CLUSTER.into(), cluster.into())],
                    customer: None,
                })
                .await
                .expect("tagged");
        }
    }
    let listed = observe(&client, "k", RoutingFirewall::Listed)
        .await
        .expect("listed");
    let view = crate::cloud::loadbalancer::observe::account_view::AccountViewCache::new(
        Duration::from_secs(60),
    )
    .get(&client)
    .await
    .expect("view");
    sim.reset_counts();
    let from_view = observe_with_view(&client, "k", &view, RoutingFirewall::Listed)
        .await
        .expect("observed");
    let rule_ids =
        |t: &Tagged| -> Vec<Option<String>> { t.rules.iter().map(|r| r.id.clone()).collect() };
    let ip_ids =
        |t: &Tagged| -> Vec<Option<String>> { t.ips.iter().map(|r| r.id.clone()).collect() };
    assert_eq!(rule_ids(&from_view), [Some(ours.clone())]);
    assert_eq!(rule_ids(&from_view), rule_ids(&listed));
    assert_eq!(ip_ids(&from_view), [Some(ip_of(&ours))]);
    assert_eq!(ip_ids(&from_view), ip_ids(&listed));
    assert_eq!(from_view.firewall_rules.len(), listed.firewall_rules.len());
    let counts = sim.call_counts();
    for command in [
        "listLoadBalancerRules",
        "listPublicIpAddresses",
        "listFirewallRules",
    ] {
        assert!(
            !counts.contains_key(command),
            "{command} listed: {counts:?}"
        );
    }
    for command in ["listStaticRoutes", "listRoutingFirewallRules"] {
        assert!(
            counts.contains_key(command),
            "what the view does not hold is listed: {counts:?}"
        );
    }
}
