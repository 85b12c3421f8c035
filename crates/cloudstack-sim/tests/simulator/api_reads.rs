//! Read commands through the client crate: VMs, zones, networks, projects, capabilities, APIs.

use crate::common;

use cloudstack::{ListNetworks, ListProjects, ListVirtualMachines, Params};
use cloudstack_sim::{NicSpec, Scenario, VmSpec};
use common::{client, id_of, start};

fn vms(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn list_virtual_machines_details_and_filters() {
    let mut scenario = Scenario::small();
    scenario.vms[1].state = "Stopped".into();
    scenario.vms[2].nics[0].ipv6 = Some("fd00::12".into());
    let sim = start(scenario).await;
    let alice = client(&sim, "alice");
    let all = alice
        .list_virtual_machines(&ListVirtualMachines {
            details: vms(&["min", "nics"]),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    let node3 = all
        .iter()
        .find(|v| v.name.as_deref() == Some("node-3"))
        .unwrap();
    let nic = node3.default_nic().expect("a default NIC");
    assert_eq!(nic.ipaddress.as_deref(), Some("10.1.1.12"));
    assert_eq!(nic.ip6address.as_deref(), Some("fd00::12"));
    assert_eq!(nic.networkname.as_deref(), Some("net-vr"));
    assert!(
        node3.serviceofferingname.is_none(),
        "details=min,nics has no service offering"
    );
    assert!(
        node3.hostname.is_none() && node3.instancename.is_none(),
        "admin-only fields hidden from users"
    );

    let with_offering = alice
        .list_virtual_machines(&ListVirtualMachines {
            details: vms(&["min", "nics", "servoff"]),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        with_offering
            .iter()
            .all(|v| v.serviceofferingname.as_deref() == Some("small"))
    );

    let stopped = alice
        .list_virtual_machines(&ListVirtualMachines {
            state: Some("Stopped".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        stopped
            .iter()
            .map(|v| v.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["node-2"]
    );

    let ids = vec![node3.id.clone().unwrap(), all[0].id.clone().unwrap()];
    let by_ids = alice
        .list_virtual_machines(&ListVirtualMachines {
            ids: ids.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_ids.len(), 2);

    let bad = alice
        .call(
            "listVirtualMachines",
            Params::new().set("details", "everything"),
        )
        .await
        .unwrap_err();
    assert_eq!(common::api_error(bad).0, 431);
}

#[tokio::test]
async fn vm_name_is_exact_from_4_19_and_a_substring_before() {
    let mut scenario = Scenario::small();
    let longer = scenario
        .add_vms(cloudstack_sim::SMALL_NETWORK, "node-1", 1)
        .remove(0);
    let sim = start(scenario.clone()).await;
    let exact = client(&sim, "alice")
        .list_virtual_machines(&ListVirtualMachines {
            name: Some("node-1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(exact.len(), 1);

    scenario.version = cloudstack_sim::Version::parse("4.18.1.0").unwrap();
    let legacy = start(scenario).await;
    let like = client(&legacy, "alice")
        .list_virtual_machines(&ListVirtualMachines {
            name: Some("node-1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut names: Vec<String> = like.into_iter().filter_map(|v| v.name).collect();
    names.sort();
    assert_eq!(names, ["node-1".to_owned(), longer]);
}

#[tokio::test]
async fn scoping_by_account_listall_and_project() {
    let mut scenario = Scenario::small();
    scenario.networks.push(cloudstack_sim::NetworkSpec {
        id: None,
        name: "proj-net".into(),
        zone: "zone1".into(),
        cidr: "10.9.0.0/24".into(),
        vpc: None,
        acl: None,
        lb_provider: Default::default(),
        account: None,
        project: Some("proj1".into()),
        ..Default::default()
    });
    scenario.vms.push(VmSpec {
        id: None,
        name: "proj-vm".into(),
        state: "Running".into(),
        zone: "zone1".into(),
        offering: "small".into(),
        nics: vec![NicSpec {
            network: "proj-net".into(),
            ipv4: "10.9.0.5".into(),
            ipv6: None,
            isdefault: true,
        }],
        static_nat_ip: None,
        account: None,
        project: Some("proj1".into()),
    });
    let sim = start(scenario).await;
    let project_id = id_of(&sim, "projects", "proj1");
    let alice = client(&sim, "alice");
    let own = alice
        .list_virtual_machines(&ListVirtualMachines {
            listall: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(own.len(), 3, "project VMs only with projectid");
    let in_project = alice
        .list_virtual_machines(&ListVirtualMachines {
            projectid: Some(project_id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(in_project.len(), 1);
    assert_eq!(in_project[0].project.as_deref(), Some("proj1"));
    assert_eq!(
        in_project[0].projectid.as_deref(),
        Some(project_id.as_str())
    );

    let bob = client(&sim, "bob");
    assert!(
        bob.list_virtual_machines(&ListVirtualMachines {
            listall: Some(true),
            ..Default::default()
        })
        .await
        .unwrap()
        .is_empty()
    );
    let denied = bob
        .list_virtual_machines(&ListVirtualMachines {
            projectid: Some(project_id),
            ..Default::default()
        })
        .await
        .unwrap_err();
    // A project the caller is no member of: the project checker's 432 before the command
    // runs (`ProjectRoleBasedApiAccessChecker.checkAccess`), not the command's 531.
    assert_eq!(common::api_error(denied).0, 432);
    let admin = client(&sim, "admin");
    assert!(
        admin
            .list_virtual_machines(&ListVirtualMachines::default())
            .await
            .unwrap()
            .is_empty(),
        "admin's own account has none"
    );
    let everything = admin
        .list_virtual_machines(&ListVirtualMachines {
            listall: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(everything.len(), 3);
    assert!(
        everything[0].hostname.is_some(),
        "root admin sees the hypervisor host"
    );

    let projects = alice.list_projects(&ListProjects::default()).await.unwrap();
    assert_eq!(projects.len(), 1);
    assert!(
        bob.list_projects(&ListProjects::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn networks_advertise_services_like_the_server() {
    let sim = start(Scenario::small()).await;
    let networks = client(&sim, "alice")
        .list_networks(&ListNetworks {
            listall: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    let by_name = |n: &str| {
        networks
            .iter()
            .find(|x| x.name.as_deref() == Some(n))
            .unwrap()
    };
    let vr = by_name("net-vr");
    assert!(vr.has_service("Firewall") && !vr.has_service("NetworkACL") && !vr.is_vpc_tier());
    assert_eq!(
        vr.capability("Lb", "SupportedProtocols"),
        Some("tcp, udp, tcp-proxy")
    );
    assert_eq!(
        vr.capability("Lb", "SupportedLbAlgorithms"),
        Some("roundrobin,leastconn,source")
    );
    assert!(vr.capability("Lb", "HealthCheckPolicy").is_none());
    assert_eq!(
        (
            vr.cidr.as_deref(),
            vr.gateway.as_deref(),
            vr.netmask.as_deref()
        ),
        (Some("10.1.1.0/24"), Some("10.1.1.1"), Some("255.255.255.0"))
    );
    let tier = by_name("tier1");
    assert!(tier.is_vpc_tier() && tier.has_service("NetworkACL") && !tier.has_service("Firewall"));
    assert_eq!(tier.aclname.as_deref(), Some("tier1-acl"));
    let ns = by_name("net-ns");
    assert_eq!(ns.capability("Lb", "HealthCheckPolicy"), Some("true"));
    let stickiness = vr.capability("Lb", "SupportedStickinessMethods").unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(stickiness).is_ok(),
        "stickiness methods are JSON text"
    );
}

#[tokio::test]
async fn capabilities_report_the_version_and_apis_are_discoverable() {
    let mut scenario = Scenario::small();
    scenario.version = cloudstack_sim::Version::parse("4.19.1").unwrap();
    let sim = start(scenario).await;
    let alice = client(&sim, "alice");
    let caps = alice.list_capabilities().await.unwrap();
    assert_eq!(caps.cloudstackversion.as_deref(), Some("4.19.1.0"));
    assert!(
        caps.apilimitmax.is_none(),
        "no api limit fields when throttling is off"
    );
    let apis = alice.call("listApis", Params::new()).await.unwrap();
    let names: Vec<&str> = apis["api"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert!(names.contains(&"createLoadBalancerRule") && names.contains(&"listVirtualMachines"));
    let lb = apis["api"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "createLoadBalancerRule")
        .unwrap();
    assert_eq!(lb["isasync"], true);
}

#[tokio::test]
async fn management_server_metrics_are_admin_only_and_new() {
    let sim = start(Scenario::small()).await;
    let err = client(&sim, "alice")
        .call("listManagementServersMetrics", Params::new())
        .await
        .unwrap_err();
    // The default User role has no row for it (`authorized = {RoleType.Admin}`): the role
    // checker's 432 (`DynamicRoleBasedAPIAccessChecker.checkAccess`), no longer a 401.
    let (status, errorcode, cserrorcode, text) = common::api_error(err);
    assert_eq!((status, errorcode, cserrorcode), (432, 432, Some(9999)));
    let alice_user = sim.with_state(|s| s.account("alice").unwrap().user_id.clone());
    assert_eq!(
        text,
        format!(
            "The API [listManagementServersMetrics] does not exist or is not available for the account for user id [{alice_user}]."
        )
    );
    let metrics = client(&sim, "admin")
        .call("listManagementServersMetrics", Params::new())
        .await
        .unwrap();
    assert_eq!(metrics["managementserver"][0]["version"], "4.22.0.0");

    let mut scenario = Scenario::small();
    scenario.version = cloudstack_sim::Version::parse("4.16").unwrap();
    let old = start(scenario).await;
    let err = client(&old, "admin")
        .call("listManagementServersMetrics", Params::new())
        .await
        .unwrap_err();
    // A command the server does not have fails ApiServer.verifyRequest: 401.
    assert_eq!(common::api_error(err).0, 401, "absent before 4.17");
}
