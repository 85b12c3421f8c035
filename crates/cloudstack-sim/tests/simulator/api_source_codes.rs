//! Codes, orders and texts taken from CloudStack's source where they are easy to get wrong:
//! the `cserrorcode` 9999 of errors rethrown as a bare `ServerApiException`, blank `page=`,
//! the static-NAT refusals, the order of `listAsyncJobs` and `listNetworkACLs`, and the
//! command classes a job reports in `cmd`.

use crate::common;

use cloudstack::{AssociateIpAddress, CreateNetworkAcl, Params};
use cloudstack_sim::{NicSpec, Scenario, SimServer, VmSpec};
use common::{api_error, client, id_of, keys, raw_get, start};

async fn ip_on(sim: &SimServer, network: &str) -> String {
    client(sim, "alice")
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(sim, "networks", network)),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap()
}

fn lb(ip: &str, name: &str, protocol: &str, port: u32) -> Params {
    Params::new()
        .set("publicipid", ip)
        .set("name", name)
        .set("algorithm", "roundrobin")
        .set("protocol", protocol)
        .set("publicport", port)
        .set("privateport", 30000 + port)
        .set("openfirewall", false)
}

/// `CreateLoadBalancerRuleCmd.create` rethrows the `InvalidParameterValueException` of the
/// create phase as a `ServerApiException` without its cause (`cserrorcode` 9999, not 4350);
/// `CreateFirewallRuleCmd.create` throws its CIDR error as one; the Virtual Router refuses
/// UDP (`validateLbRule`) before any conflict check, so UDP on a port a TCP rule holds is
/// that refusal, not a 537.
#[tokio::test]
async fn create_phase_parameter_errors_carry_cserrorcode_9999() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    let bad_algorithm = lb(&ip, "x-tcp-80", "tcp", 80).set("algorithm", "fastest");
    let (status, code, cs, text) = api_error(
        alice
            .call_async("createLoadBalancerRule", bad_algorithm)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, code, cs, text.as_str()),
        (431, 431, Some(9999), "Invalid algorithm: fastest")
    );

    alice
        .call_async("createLoadBalancerRule", lb(&ip, "x-tcp-53", "tcp", 53))
        .await
        .expect("tcp rule");
    let (status, code, cs, text) = api_error(
        alice
            .call_async("createLoadBalancerRule", lb(&ip, "x-udp-53", "udp", 53))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, code, cs, text.as_str()),
        (
            431,
            431,
            Some(9999),
            "LB service provider cannot support this rule"
        ),
        "UDP on the Virtual Router is refused before the conflict check"
    );

    let firewall = Params::new()
        .set("ipaddressid", &ip)
        .set("protocol", "tcp")
        .set("startport", 22)
        .set("cidrlist", "10.0.0.0/33");
    let (status, code, cs, text) = api_error(
        alice
            .call_async("createFirewallRule", firewall)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, code, cs, text.as_str()),
        (
            431,
            431,
            Some(9999),
            "Source CIDRs formatting error 10.0.0.0/33"
        )
    );
}

/// `BaseListCmd.validateSpecificParameters` checks the raw parameters and throws bare
/// `ServerApiException`s (9999): a blank `page=` is present there, and
/// `ParamProcessWorker.setFieldValue` leaves the blank integer unset, so with a `pagesize`
/// it is the first page, and without one it is the "pagesize is required" error.
#[tokio::test]
async fn blank_page_with_a_pagesize_is_the_first_page() {
    let sim = start(Scenario::small()).await;
    let (api_key, secret) = keys(&sim, "alice");
    let list = |extra: &'static [(&'static str, &'static str)]| {
        let mut params = vec![
            ("apikey", api_key.as_str()),
            ("command", "listVirtualMachines"),
            ("response", "json"),
        ];
        params.extend_from_slice(extra);
        params
    };
    let first = raw_get(
        &sim,
        &list(&[("page", ""), ("pagesize", "2")]),
        &secret,
        None,
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.text);
    let body = first.json()["listvirtualmachinesresponse"].clone();
    assert_eq!(body["count"], 3);
    assert_eq!(body["virtualmachine"].as_array().map(Vec::len), Some(2));

    let no_size = raw_get(&sim, &list(&[("page", "")]), &secret, None).await;
    let error = no_size.json()["listvirtualmachinesresponse"].clone();
    assert_eq!(
        (no_size.status, error["cserrorcode"].as_u64()),
        (431, Some(9999))
    );
    assert_eq!(
        error["errortext"],
        "\"pagesize\" parameter is required when \"page\" is specified"
    );
    let no_page = raw_get(&sim, &list(&[("pagesize", "2")]), &secret, None).await;
    let error = no_page.json()["listvirtualmachinesresponse"].clone();
    assert_eq!(
        (no_page.status, error["cserrorcode"].as_u64()),
        (431, Some(9999))
    );
}

/// A static-NAT address: `createPortForwardingRule` → `RulesManagerImpl.createPortForwardingRule`
/// "… has static nat enabled", an `InvalidParameterValueException` the command lets through
/// (431, 4350); `createLoadBalancerRule` → `createPublicLoadBalancerRule`'s
/// `NetworkRuleConflictException` "Can't do load balance on ip address: …", rethrown by
/// `CreateLoadBalancerRuleCmd.create` without its cause (537, 9999).
#[tokio::test]
async fn static_nat_addresses_refuse_forwarding_and_load_balancing() {
    let sim = start(Scenario::small()).await;
    let vm = sim
        .add_vm(VmSpec {
            id: None,
            name: "nat-vm".into(),
            state: "Running".into(),
            zone: "zone1".into(),
            offering: "small".into(),
            nics: vec![NicSpec {
                network: "net-vr".into(),
                ipv4: "10.1.1.77".into(),
                ipv6: None,
                isdefault: true,
            }],
            static_nat_ip: Some("203.0.113.200".into()),
            account: Some("alice".into()),
            project: None,
        })
        .expect("add vm");
    let ip = sim.with_state(|s| {
        s.ips
            .iter()
            .find(|i| i.static_nat_vm.as_deref() == Some(vm.as_str()))
            .map(|i| i.id.clone())
            .expect("the static-NAT address")
    });
    let alice = client(&sim, "alice");
    let forward = Params::new()
        .set("ipaddressid", &ip)
        .set("virtualmachineid", &vm)
        .set("protocol", "tcp")
        .set("publicport", 22)
        .set("privateport", 22);
    let (status, code, cs, text) = api_error(
        alice
            .call_async("createPortForwardingRule", forward)
            .await
            .unwrap_err(),
    );
    assert_eq!((status, code, cs), (431, 431, Some(4350)));
    assert_eq!(
        text,
        format!("Unable to create port forwarding rule; ip id={ip} has static nat enabled")
    );
    let (status, code, cs, text) = api_error(
        alice
            .call_async("createLoadBalancerRule", lb(&ip, "n-tcp-80", "tcp", 80))
            .await
            .unwrap_err(),
    );
    assert_eq!((status, code, cs), (537, 537, Some(9999)));
    assert_eq!(text, "Can't do load balance on ip address: 203.0.113.200");
}

/// `QueryManagerImpl.searchForAsyncJobs` lists by `id` ascending (oldest first);
/// `NetworkACLServiceImpl.listNetworkACLItems` by `id` descending (newest first, whatever
/// the item numbers).
#[tokio::test]
async fn async_jobs_oldest_first_and_acl_items_newest_first() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let first = ip_on(&sim, "net-vr").await;
    let second = ip_on(&sim, "net-ns").await;
    let jobs = alice.call("listAsyncJobs", Params::new()).await.unwrap();
    let instances: Vec<&str> = jobs["asyncjobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|j| j["jobinstanceid"].as_str())
        .collect();
    assert_eq!(instances, [first.as_str(), second.as_str()]);

    let tier = id_of(&sim, "networks", "tier1");
    for (number, port) in [(20, 443), (10, 80)] {
        alice
            .create_network_acl(&CreateNetworkAcl {
                protocol: "tcp".into(),
                networkid: Some(tier.clone()),
                number: Some(number),
                startport: Some(port),
                traffictype: Some("ingress".into()),
                action: Some("allow".into()),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let listed = alice
        .call("listNetworkACLs", Params::new().set("networkid", &tier))
        .await
        .unwrap();
    let numbers: Vec<u64> = listed["networkacl"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["number"].as_u64())
        .collect();
    assert_eq!(numbers, [10, 20], "the newest (number 10) first");
}

/// The `cmd` of a job is the command's Java class: `AssociateIPAddrCmd` and
/// `DisassociateIPAddrCmd` in `user.address`, the static-route commands in `user.vpc`.
#[tokio::test]
async fn jobs_name_their_command_classes() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    alice
        .call_async("disassociateIpAddress", Params::new().set("id", &ip))
        .await
        .unwrap();
    let route = Params::new()
        .set("vpcid", id_of(&sim, "vpcs", "vpc1"))
        .set("cidr", "10.244.1.0/24")
        .set("nexthop", "10.100.1.11");
    alice
        .call_async("createStaticRoute", route)
        .await
        .expect("route");
    let jobs = alice.call("listAsyncJobs", Params::new()).await.unwrap();
    let classes: Vec<&str> = jobs["asyncjobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|j| j["cmd"].as_str())
        .collect();
    assert_eq!(
        classes,
        [
            "org.apache.cloudstack.api.command.user.address.AssociateIPAddrCmd",
            "org.apache.cloudstack.api.command.user.address.DisassociateIPAddrCmd",
            "org.apache.cloudstack.api.command.user.vpc.CreateStaticRouteCmd",
        ]
    );
}
