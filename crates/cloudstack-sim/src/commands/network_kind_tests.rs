//! Unit tests of the network kinds where no HTTP path reaches them with the built-in
//! scenarios: an address associated with a network that has no Lb service and is not its
//! source-NAT address.

use super::access::Caller;
use super::ip_rules::guest_association_refusal;
use super::{Ctx, JobFaults, lb};
use crate::params::Params;
use crate::scenario::{Role, Scenario};
use crate::state::{Owner, Service, State};

fn state() -> State {
    State::from_scenario(&Scenario::network_kinds()).expect("the scenario builds")
}

fn network_id(state: &State, name: &str) -> String {
    state
        .networks
        .iter()
        .find(|n| n.name == name)
        .map(|n| n.id.clone())
        .expect("network")
}

/// `isLbServiceSupportedInNetwork`: "LB service is not supported in specified network id",
/// a 431 that `CreateLoadBalancerRuleCmd.create` rethrows with cs 9999; nothing created.
#[test]
fn a_rule_on_an_address_of_a_network_without_lb_is_refused() {
    let mut state = state();
    let network = network_id(&state, crate::KINDS_ROUTED_NETWORK);
    let ip = state
        .ips
        .iter_mut()
        .find(|i| i.state == "Free")
        .expect("a free address");
    ip.state = "Allocated".into();
    ip.owner = Some(Owner::Account("alice".into()));
    ip.network_id = Some(network);
    let ip_id = ip.id.clone();
    let params = Params::from_pairs(&[
        ("command", "createLoadBalancerRule"),
        ("name", "web"),
        ("algorithm", "roundrobin"),
        ("privateport", "30080"),
        ("publicport", "80"),
        ("publicipid", &ip_id),
    ]);
    let mut ctx = Ctx {
        state: &mut state,
        caller: Caller {
            account: "alice".into(),
            role: Role::User,
        },
        params: &params,
        job_faults: JobFaults::default(),
        new_jobs: vec![],
    };
    let refused = lb::create_load_balancer_rule(&mut ctx).unwrap_err();
    assert_eq!(
        (refused.code, refused.cs_code, refused.text.as_str()),
        (
            431,
            Some(9999),
            "LB service is not supported in specified network id"
        )
    );
    assert!(ctx.state.lb_rules.is_empty() && ctx.new_jobs.is_empty());
}

/// Which networks take a public address (`associateIPToGuestNetwork`): every NATTED
/// isolated network and tier, whatever its providers; no ROUTED one.
#[test]
fn only_networks_with_source_nat_take_an_address() {
    let state = state();
    for network in &state.networks {
        let refused = guest_association_refusal(network).is_some();
        assert_eq!(
            refused,
            network.is_routed(),
            "{}: {:?}",
            network.name,
            network.services()
        );
        assert_eq!(
            network.offers(Service::Lb),
            !network.is_routed() && !network.is_shared()
        );
    }
}
