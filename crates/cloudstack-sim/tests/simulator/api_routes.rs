//! VPC static routes through the client crate, as CloudStack's `CreateStaticRouteCmd`,
//! `ListStaticRoutesCmd`, `DeleteStaticRouteCmd` and `VpcManagerImpl.createStaticRoute` /
//! `detectRoutesConflict` have them: the 4.22 `vpcid` + `nexthop` form, the older
//! `gatewayid` form, CIDR validation, overlap conflicts (537), tags (`StaticRoute`) and the
//! version gate of `nexthop`.

use crate::common;

use cloudstack::{
    CreateStaticRoute, CreateTags, DeleteStaticRoute, ListStaticRoutes, ListTags, tag_value,
};
use cloudstack_sim::scenario::{GatewayState, PrivateGatewaySpec};
use cloudstack_sim::{Scenario, SimServer, Version, VpcSpec};
use common::{api_error, client, id_of, start};

const GATEWAY_ID: &str = "0b8f9d36-6a0e-4f43-8f5d-3c1d2b7e9a01";

fn scenario_with_gateway(version: &str) -> Scenario {
    let mut scenario = Scenario::small();
    scenario.version = Version::parse(version).unwrap();
    scenario.private_gateways.push(PrivateGatewaySpec {
        id: Some(GATEWAY_ID.into()),
        vpc: "vpc1".into(),
        gateway: "172.16.0.1".into(),
        ip_address: "172.16.0.2".into(),
        netmask: "255.255.255.0".into(),
        state: GatewayState::Ready,
    });
    scenario
}

fn next_hop_route(vpc: &str, cidr: &str, hop: &str) -> CreateStaticRoute {
    CreateStaticRoute {
        cidr: cidr.into(),
        vpcid: Some(vpc.into()),
        nexthop: Some(hop.into()),
        ..Default::default()
    }
}

fn vpc_id(sim: &SimServer) -> String {
    id_of(sim, "vpcs", "vpc1")
}

#[tokio::test]
async fn next_hop_routes_are_created_listed_tagged_and_deleted() {
    let sim = start(scenario_with_gateway("4.22")).await;
    let alice = client(&sim, "alice");
    let vpc = vpc_id(&sim);
    let route = alice
        .create_static_route(&next_hop_route(&vpc, "10.244.1.0/24", "10.100.1.10"))
        .await
        .unwrap();
    assert_eq!(route.state.as_deref(), Some("Active"));
    assert_eq!(route.cidr.as_deref(), Some("10.244.1.0/24"));
    assert_eq!(route.nexthop.as_deref(), Some("10.100.1.10"));
    assert_eq!(route.vpcid.as_deref(), Some(vpc.as_str()));
    let id = route.id.clone().unwrap();

    alice
        .create_tags(&CreateTags {
            resourceids: vec![id.clone()],
            resourcetype: "StaticRoute".into(),
            tags: vec![("cloudstack-ccm/cluster".into(), "k1".into())],
            customer: None,
        })
        .await
        .unwrap();
    let tagged = alice
        .list_static_routes(&ListStaticRoutes {
            vpcid: Some(vpc.clone()),
            tags: vec![("cloudstack-ccm/cluster".into(), "k1".into())],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(tagged.len(), 1);
    assert_eq!(
        tag_value(&tagged[0].tags, "cloudstack-ccm/cluster"),
        Some("k1")
    );
    let other_cluster = alice
        .list_static_routes(&ListStaticRoutes {
            tags: vec![("cloudstack-ccm/cluster".into(), "k2".into())],
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(other_cluster.is_empty());

    // Another account does not see the route.
    let bob = client(&sim, "bob");
    assert!(
        bob.list_static_routes(&ListStaticRoutes::default())
            .await
            .unwrap()
            .is_empty()
    );

    alice
        .delete_static_route(&DeleteStaticRoute { id: id.clone() })
        .await
        .unwrap();
    assert!(
        alice
            .list_static_routes(&ListStaticRoutes::default())
            .await
            .unwrap()
            .is_empty()
    );
    let tags = alice
        .list_tags(&ListTags {
            resourceid: Some(id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(tags.is_empty(), "a deleted route's tags go with it");
    // Deleting it again names the id: CloudStack resolves the UUID before the command runs.
    let (status, _, _, text) = api_error(
        alice
            .delete_static_route(&DeleteStaticRoute { id })
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 431);
    assert!(text.contains("Invalid parameter id"), "{text}");
}

#[tokio::test]
async fn overlapping_cidrs_in_one_vpc_conflict() {
    let sim = start(scenario_with_gateway("4.22")).await;
    let alice = client(&sim, "alice");
    let vpc = vpc_id(&sim);
    alice
        .create_static_route(&next_hop_route(&vpc, "10.244.1.0/24", "10.100.1.10"))
        .await
        .unwrap();
    for cidr in ["10.244.1.0/24", "10.244.0.0/16", "10.244.1.128/25"] {
        let (status, _, cs, text) = api_error(
            alice
                .create_static_route(&next_hop_route(&vpc, cidr, "10.100.1.11"))
                .await
                .unwrap_err(),
        );
        assert_eq!((status, cs), (537, Some(4360)), "{cidr}");
        assert!(
            text.starts_with("New static route cidr conflicts with existing route StaticRoute["),
            "{text}"
        );
    }
    alice
        .create_static_route(&next_hop_route(&vpc, "10.244.2.0/24", "10.100.1.11"))
        .await
        .expect("a disjoint CIDR is fine");
}

#[tokio::test]
async fn invalid_routes_are_refused_with_the_servers_texts() {
    let sim = start(scenario_with_gateway("4.22")).await;
    let alice = client(&sim, "alice");
    let vpc = vpc_id(&sim);
    let cases = [
        (
            next_hop_route(&vpc, "10.244.1.0", "10.100.1.10"),
            "Invalid format for cidr 10.244.1.0",
        ),
        (
            next_hop_route(&vpc, "10.100.7.0/24", "10.100.1.10"),
            "CIDR should be outside of VPC cidr 10.100.0.0/16",
        ),
        (
            next_hop_route(&vpc, "169.254.1.0/24", "10.100.1.10"),
            "CIDR should be outside of link local cidr 169.254.0.0/16",
        ),
        (
            next_hop_route(&vpc, "10.244.1.0/24", "192.0.2.1"),
            "Next hop 192.0.2.1 is invalid. It must be within VPC CIDR or on the same public or private network",
        ),
        (
            CreateStaticRoute {
                cidr: "10.244.1.0/24".into(),
                nexthop: Some("10.100.1.10".into()),
                ..Default::default()
            },
            "vpcId must be specified",
        ),
        (
            CreateStaticRoute {
                cidr: "10.244.1.0/24".into(),
                vpcid: Some(vpc.clone()),
                ..Default::default()
            },
            "one of gatewayId and nextHop must be specified",
        ),
        (
            CreateStaticRoute {
                cidr: "10.244.1.0/24".into(),
                gatewayid: Some(GATEWAY_ID.into()),
                nexthop: Some("10.100.1.10".into()),
                vpcid: Some(vpc.clone()),
            },
            "Only one of gatewayId and nextHop can be specified",
        ),
    ];
    for (request, expected) in cases {
        let (status, _, cs, text) =
            api_error(alice.create_static_route(&request).await.unwrap_err());
        assert_eq!((status, cs, text.as_str()), (431, Some(4350), expected));
    }
    // A next hop on a private gateway's network is valid.
    alice
        .create_static_route(&next_hop_route(&vpc, "192.168.50.0/24", "172.16.0.9"))
        .await
        .expect("next hop on the private gateway's network");
    // Another account's VPC is refused.
    let bob = client(&sim, "bob");
    let (status, ..) = api_error(
        bob.create_static_route(&next_hop_route(&vpc, "10.250.0.0/24", "10.100.1.10"))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 531);
}

#[tokio::test]
async fn gateway_form_routes_to_the_private_gateway() {
    let sim = start(scenario_with_gateway("4.22")).await;
    let alice = client(&sim, "alice");
    let route = alice
        .create_static_route(&CreateStaticRoute {
            cidr: "192.168.0.0/16".into(),
            gatewayid: Some(GATEWAY_ID.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(route.gatewayid.as_deref(), Some(GATEWAY_ID));
    assert_eq!(route.nexthop, None);
    assert_eq!(route.vpcid, Some(vpc_id(&sim)));
    let by_gateway = alice
        .list_static_routes(&ListStaticRoutes {
            gatewayid: Some(GATEWAY_ID.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_gateway.len(), 1);
}

#[tokio::test]
async fn before_4_22_only_the_gateway_form_exists() {
    let sim = start(scenario_with_gateway("4.21")).await;
    let alice = client(&sim, "alice");
    let vpc = vpc_id(&sim);
    // `vpcid` and `nexthop` are unknown parameters there; `gatewayid` is required.
    let (status, _, _, text) = api_error(
        alice
            .create_static_route(&next_hop_route(&vpc, "10.244.1.0/24", "10.100.1.10"))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 431);
    assert_eq!(
        text,
        "Unable to execute API command createstaticroute due to missing parameter gatewayid"
    );
    let route = alice
        .create_static_route(&CreateStaticRoute {
            cidr: "192.168.0.0/16".into(),
            gatewayid: Some(GATEWAY_ID.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(route.state.as_deref(), Some("Active"));
}

/// `VpcManagerImpl.createStaticRoute`: a gateway that is not `Ready` (still `Creating`, or
/// `Deleting`) takes no route — 431 "Gateway is not in the Ready state: <state>", checked
/// before the gateway's VPC is compared with `vpcid`; nothing is stored. A gateway of an
/// older state file, written before gateways had a state, loads `Ready`.
#[tokio::test]
async fn a_gateway_that_is_not_ready_takes_no_route() {
    const CREATING: &str = "0b8f9d36-6a0e-4f43-8f5d-3c1d2b7e9a02";
    const DELETING: &str = "0b8f9d36-6a0e-4f43-8f5d-3c1d2b7e9a03";
    for version in ["4.21", "4.22"] {
        let mut scenario = scenario_with_gateway(version);
        for (id, state, address) in [
            (CREATING, GatewayState::Creating, "172.16.1"),
            (DELETING, GatewayState::Deleting, "172.16.2"),
        ] {
            scenario.private_gateways.push(PrivateGatewaySpec {
                id: Some(id.into()),
                vpc: "vpc1".into(),
                gateway: format!("{address}.1"),
                ip_address: format!("{address}.2"),
                netmask: "255.255.255.0".into(),
                state,
            });
        }
        let sim = start(scenario).await;
        let alice = client(&sim, "alice");
        for (gateway, state) in [(CREATING, "Creating"), (DELETING, "Deleting")] {
            let (status, code, cs, text) = api_error(
                alice
                    .create_static_route(&CreateStaticRoute {
                        cidr: "192.168.0.0/16".into(),
                        gatewayid: Some(gateway.into()),
                        ..Default::default()
                    })
                    .await
                    .unwrap_err(),
            );
            assert_eq!((status, code, cs), (431, 431, Some(4350)), "{version}");
            assert_eq!(text, format!("Gateway is not in the Ready state: {state}"));
        }
        assert!(
            sim.with_state(|s| s.static_routes.is_empty()),
            "{version}: a refused route is not stored"
        );
        alice
            .create_static_route(&CreateStaticRoute {
                cidr: "192.168.0.0/16".into(),
                gatewayid: Some(GATEWAY_ID.into()),
                ..Default::default()
            })
            .await
            .expect("the Ready gateway takes the route");
    }

    let old: cloudstack_sim::state::PrivateGateway = serde_json::from_value(serde_json::json!({
        "id": GATEWAY_ID,
        "vpc_id": "5d7c1a7e-1b7e-4c0e-9b1a-0e3f3c0d2a11",
        "gateway": "172.16.0.1",
        "ip_address": "172.16.0.2",
        "netmask": "255.255.255.0",
    }))
    .expect("a gateway without a state loads");
    assert_eq!(old.state, GatewayState::Ready);
}

/// `ListStaticRoutesCmd`'s `id`, `vpcid` and `gatewayid` are resolved before the command
/// runs (`ParamProcessWorker.translateUuidToInternalId`): an id naming nothing is a 431, not
/// an empty list — a deleted route too, its `static_routes` row is deleted.
#[tokio::test]
async fn unknown_or_deleted_route_filter_ids_are_431() {
    let sim = start(scenario_with_gateway("4.22")).await;
    let alice = client(&sim, "alice");
    let unknown = "0b1d2c3e-0000-4000-8000-00000000ffff";
    for (name, filter) in [
        (
            "id",
            ListStaticRoutes {
                id: Some(unknown.into()),
                ..Default::default()
            },
        ),
        (
            "vpcid",
            ListStaticRoutes {
                vpcid: Some(unknown.into()),
                ..Default::default()
            },
        ),
        (
            "gatewayid",
            ListStaticRoutes {
                gatewayid: Some(unknown.into()),
                ..Default::default()
            },
        ),
    ] {
        let (status, code, cs, text) =
            api_error(alice.list_static_routes(&filter).await.unwrap_err());
        assert_eq!((status, code, cs), (431, 431, Some(9999)), "{name}");
        assert_eq!(
            text,
            format!(
                "Unable to execute API command liststaticroutes due to invalid value. Invalid parameter {name} value={unknown} due to incorrect long value format, or entity does not exist or due to incorrect parameter annotation for the field in api cmd class."
            )
        );
    }

    let vpc = vpc_id(&sim);
    let id = alice
        .create_static_route(&next_hop_route(&vpc, "10.244.1.0/24", "10.100.1.10"))
        .await
        .unwrap()
        .id
        .unwrap();
    for filter in [
        ListStaticRoutes {
            id: Some(id.clone()),
            ..Default::default()
        },
        ListStaticRoutes {
            vpcid: Some(vpc.clone()),
            ..Default::default()
        },
    ] {
        assert_eq!(alice.list_static_routes(&filter).await.unwrap().len(), 1);
    }
    assert!(
        alice
            .list_static_routes(&ListStaticRoutes {
                gatewayid: Some(GATEWAY_ID.into()),
                ..Default::default()
            })
            .await
            .unwrap()
            .is_empty(),
        "a known gateway without routes lists nothing"
    );
    alice
        .delete_static_route(&DeleteStaticRoute { id: id.clone() })
        .await
        .unwrap();
    let (status, _, _, text) = api_error(
        alice
            .list_static_routes(&ListStaticRoutes {
                id: Some(id.clone()),
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 431);
    assert!(
        text.contains(&format!("Invalid parameter id value={id}")),
        "{text}"
    );
}

/// `VpcManagerImpl.listStaticRoutes` scopes with `buildACLSearchParameters`: a project's
/// routes are listed only with `projectid`, even by `id` and even to a project member; a
/// root admin listing by `id` sees the route whoever owns it.
#[tokio::test]
async fn project_routes_need_projectid_even_by_id() {
    let mut scenario = scenario_with_gateway("4.22");
    scenario.vpcs.push(VpcSpec {
        id: None,
        name: "proj-vpc".into(),
        zone: "zone1".into(),
        cidr: "10.200.0.0/16".into(),
        account: None,
        project: Some("proj1".into()),
    });
    let sim = start(scenario).await;
    let alice = client(&sim, "alice");
    let project = id_of(&sim, "projects", "proj1");
    let vpc = id_of(&sim, "vpcs", "proj-vpc");
    let route = alice
        .create_static_route(&next_hop_route(&vpc, "10.244.1.0/24", "10.200.1.10"))
        .await
        .expect("a project member routes in the project's VPC");
    assert_eq!(route.projectid.as_deref(), Some(project.as_str()));
    let id = route.id.unwrap();

    for filter in [
        ListStaticRoutes {
            id: Some(id.clone()),
            ..Default::default()
        },
        ListStaticRoutes {
            vpcid: Some(vpc.clone()),
            ..Default::default()
        },
        ListStaticRoutes {
            id: Some(id.clone()),
            listall: Some(true),
            ..Default::default()
        },
    ] {
        assert!(
            alice.list_static_routes(&filter).await.unwrap().is_empty(),
            "project route listed without projectid: {filter:?}"
        );
    }
    let in_project = alice
        .list_static_routes(&ListStaticRoutes {
            id: Some(id.clone()),
            projectid: Some(project.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(in_project.len(), 1);
    let by_admin = client(&sim, "admin")
        .list_static_routes(&ListStaticRoutes {
            id: Some(id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_admin.len(), 1, "a root admin sees any route by id");
    let (status, ..) = api_error(
        client(&sim, "bob")
            .list_static_routes(&ListStaticRoutes {
                id: Some(id),
                projectid: Some(project),
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    // `ProjectRoleBasedApiAccessChecker.checkAccess` refuses before the command runs.
    assert_eq!(status, 432, "bob is no member of the project");
}
