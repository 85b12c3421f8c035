//! Tests of the public-IP protocol: picking free addresses, and the claim settled
//! against the simulator.

use super::*;

#[test]
fn running_plans_never_pick_the_same_free_address() {
    let picked = PickedAddresses::default();
    let free: Vec<IpAddr> = ["203.0.113.1", "203.0.113.2"]
        .iter()
        .map(|a| a.parse().expect("address"))
        .collect();
    let first = picked.pick(&free).expect("one is free");
    let second = picked.pick(&free).expect("the other is free");
    assert_ne!(first, second);
    assert_eq!(picked.pick(&free), None, "both are being associated");
    {
        let run = RunPicks {
            shared: &picked,
            mine: Mutex::new(vec![first]),
        };
        drop(run);
    }
    assert_eq!(
        picked.pick(&free),
        Some(first),
        "released when its run ended"
    );
}

#[test]
fn a_run_releases_what_it_picked() {
    let picked = PickedAddresses::default();
    let free: Vec<IpAddr> = vec!["203.0.113.1".parse().expect("address")];
    {
        let run = RunPicks {
            shared: &picked,
            mine: Mutex::new(Vec::new()),
        };
        assert_eq!(run.pick(&free), Some(free[0]));
        assert_eq!(picked.pick(&free), None, "held while the run lasts");
    }
    assert_eq!(picked.pick(&free), Some(free[0]));
}

/// The `listPublicIpAddresses` calls the simulator answered.
fn address_lists(sim: &cloudstack_sim::SimServer) -> usize {
    sim.call_log()
        .iter()
        .filter(|call| call.command == ListPublicIpAddresses::COMMAND)
        .count()
}

#[tokio::test]
async fn a_claim_reads_one_page_of_free_addresses_and_the_next_only_when_it_is_all_picked() {
    // The small zone has 200 addresses, a few allocated: two pages of free ones.
    let (sim, client) = super::super::simulated_cloud(cloudstack_sim::Scenario::small()).await;
    let picked = PickedAddresses::default();
    let run = RunPicks {
        shared: &picked,
        mine: Mutex::default(),
    };
    let first = pick_free_address(&client, None, &run)
        .await
        .expect("listed")
        .expect("a free address");
    assert_eq!(address_lists(&sim), 1, "one page is enough");

    let request = ListPublicIpAddresses {
        allocatedonly: Some(false),
        state: Some("Free".into()),
        ..Default::default()
    };
    let free: Vec<AddressSummary> = client
        .list_public_ip_addresses(&request)
        .await
        .expect("every free address")
        .into_iter()
        .map(|ip| AddressSummary {
            ipaddress: ip.ipaddress,
            allocated: ip.allocated,
            state: ip.state,
        })
        .collect();
    assert!(
        free.len() > CLAIM_PAGE_SIZE as usize,
        "the zone has more free addresses than a page"
    );
    let on_first_page: Vec<IpAddr> = free[..CLAIM_PAGE_SIZE as usize]
        .iter()
        .filter_map(|ip| ip.ipaddress.as_deref()?.parse().ok())
        .collect();
    assert!(on_first_page.contains(&first), "picked from the first page");
    picked.lock().extend(on_first_page.iter().copied());
    let calls = address_lists(&sim);
    let second = pick_free_address(&client, None, &run)
        .await
        .expect("listed")
        .expect("a free address on the second page");
    assert!(!on_first_page.contains(&second));
    assert_eq!(
        address_lists(&sim) - calls,
        2,
        "the second page is read once the first is all picked"
    );

    picked.lock().extend(
        free.iter()
            .filter_map(|ip| ip.ipaddress.as_deref()?.parse::<IpAddr>().ok()),
    );
    assert_eq!(
        pick_free_address(&client, None, &run)
            .await
            .expect("listed"),
        None,
        "every free address is picked"
    );
}

#[test]
fn an_association_asks_for_the_claimed_address_on_its_target() {
    let address: IpAddr = "203.0.113.7".parse().expect("address");
    let (request, network) =
        associate_request(&AssociateTarget::Network("net-1".into()), Some(address));
    assert_eq!(request.networkid.as_deref(), Some("net-1"));
    assert_eq!(request.vpcid, None);
    assert_eq!(request.ipaddress.as_deref(), Some("203.0.113.7"));
    assert_eq!(network.as_deref(), Some("net-1"), "recorded with the IP");
    let (request, network) = associate_request(&AssociateTarget::Vpc("vpc-1".into()), None);
    assert_eq!(request.vpcid.as_deref(), Some("vpc-1"));
    assert_eq!(request.networkid, None);
    assert_eq!(request.ipaddress, None, "CloudStack picks one");
    assert_eq!(network, None, "a VPC tier is not recorded as the network");
}

/// A recorder that keeps what it was asked to write.
#[derive(Default)]
struct Notes(Mutex<Vec<String>>);

impl Notes {
    fn written(&self) -> Vec<String> {
        self.0.lock().expect("notes").clone()
    }

    fn note(&self, what: String) -> BoxFuture<'_, Result<(), RecordError>> {
        self.0.lock().expect("notes").push(what);
        Box::pin(async { Ok(()) })
    }
}

impl IpRecorder for Notes {
    fn record<'a>(&'a self, ip: &'a RecordedIp) -> BoxFuture<'a, Result<(), RecordError>> {
        self.note(format!("record {}", ip.ip_id))
    }

    fn claim<'a>(&'a self, address: Option<IpAddr>) -> BoxFuture<'a, Result<(), RecordError>> {
        self.note(format!("claim {address:?}"))
    }

    fn forget<'a>(&'a self, ip: &'a RecordedIp) -> BoxFuture<'a, Result<(), RecordError>> {
        self.note(format!("forget {}", ip.ip_id))
    }
}

/// The ownership tags of an IP for the Service `uid`, as the planner writes them.
fn take_request(ip_id: &str, uid: &str) -> CreateTags {
    CreateTags {
        resourceids: vec![ip_id.to_string()],
        resourcetype: "PublicIpAddress".into(),
        tags: vec![
            (
                crate::cloud::tags::TAG_ASSOCIATED.to_string(),
                "true".into(),
            ),
            (TAG_SERVICE_UID.to_string(), uid.to_string()),
        ],
        ..Default::default()
    }
}

#[tokio::test]
async fn of_two_services_holding_one_address_the_first_to_take_it_keeps_it() {
    let (sim, client) = super::super::simulated_cloud(cloudstack_sim::Scenario::small()).await;
    let network = sim.with_state(|s| {
        s.networks
            .iter()
            .find(|n| n.name == cloudstack_sim::SMALL_NETWORK)
            .map(|n| n.id.clone())
            .expect("network")
    });
    // Associated, nothing on it: one Service's claim and another's record name it.
    let ip = client
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(network.clone()),
            ..Default::default()
        })
        .await
        .expect("associated");
    let ip_id = ip.id.expect("id");
    let queues = crate::cloud::job_queue::NetworkQueues::default();
    let ticket = queues.enter(&network);
    let picked = PickedAddresses::default();
    let (first, second) = (Notes::default(), Notes::default());
    let first_claims = IpClaims::new(&client, &ticket, &picked, &first, None);
    let second_claims = IpClaims::new(&client, &ticket, &picked, &second, None);
    let step = Step::ReleaseIp {
        id: ip_id.clone(),
        address: ip.ipaddress.expect("address").parse().expect("an address"),
    };
    // A phase of the tag step alone: nothing to wait for before polling it.
    let alone = crate::cloud::loadbalancer::apply::phase::PhaseSteps::of(&[]);
    let lists = || {
        sim.call_log()
            .iter()
            .filter(|call| call.command == ListPublicIpAddresses::COMMAND)
            .count()
    };

    first_claims
        .take(
            &step,
            &take_request(&ip_id, "uid-first"),
            &ip_id,
            "uid-first",
            &alone,
        )
        .await
        .expect("the first takes it");
    assert_eq!(lists(), 0, "taking an untagged address costs no read");
    let err = second_claims
        .take(
            &step,
            &take_request(&ip_id, "uid-second"),
            &ip_id,
            "uid-second",
            &alone,
        )
        .await
        .expect_err("already taken");
    assert!(
        matches!(&err, ApplyError::IpTaken { owner, .. } if owner == "uid-first"),
        "{err}"
    );
    assert_eq!(second.written(), vec![format!("forget {ip_id}")]);
    assert_eq!(lists(), 1, "one read, only on the refusal");
    // A retry of the winner (its answer lost) finds the address its own.
    first_claims
        .take(
            &step,
            &take_request(&ip_id, "uid-first"),
            &ip_id,
            "uid-first",
            &alone,
        )
        .await
        .expect("still the first's");
    assert!(first.written().is_empty(), "the winner forgets nothing");
    let owner = sim.with_state(|s| {
        s.tags
            .iter()
            .filter(|t| t.resource_id == ip_id && t.key == TAG_SERVICE_UID)
            .map(|t| t.value.clone())
            .collect::<Vec<_>>()
    });
    assert_eq!(owner, vec!["uid-first".to_string()]);
    let state = sim.with_state(|s| {
        s.ips
            .iter()
            .find(|i| i.id == ip_id)
            .map(|i| i.state.clone())
    });
    assert_eq!(state.as_deref(), Some("Allocated"), "nothing released");
}
