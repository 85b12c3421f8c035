//! Simulator fidelity IV (issue 42): behaviours read from CloudStack's Java source that a
//! stand-in written from it would check — parameter processing order, `listAccounts`
//! access, the SSL commands' error wrapping, an address still `Allocating`, ROUTED
//! networks, routing firewall rules in `listFirewallRules`, VM instance names, `fordisplay`
//! and `cserrorcode`s. Each test names the Java method it follows.

use crate::common;

use cloudstack::Params;
use cloudstack_sim::Scenario;
use common::{api_error, client, id_of, start};
use serde_json::Value;

/// `ParamProcessWorker.processParameters`: the `@Parameter` fields in declaration order,
/// each missing (required → 431) or bound there and then. CreateLoadBalancerRuleCmd
/// declares algorithm, description, name, privateport, publicipid, zoneid, publicport…
#[tokio::test]
async fn parameters_are_processed_in_declaration_order() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    // the first required field missing in declaration order
    let missing = alice
        .call(
            "createLoadBalancerRule",
            Params::new()
                .set("algorithm", "source")
                .set("privateport", 80),
        )
        .await
        .unwrap_err();
    assert_eq!(
        api_error(missing),
        (
            431,
            431,
            Some(9999),
            "Unable to execute API command createloadbalancerrule due to missing parameter name"
                .into()
        )
    );
    // an unknown `publicipid` is bound before the missing `publicport` is reached
    let unknown = "0b1d2c3e-0000-4000-8000-00000000dead";
    let bound = alice
        .call(
            "createLoadBalancerRule",
            Params::new()
                .set("algorithm", "source")
                .set("name", "n")
                .set("privateport", 80)
                .set("publicipid", unknown),
        )
        .await
        .unwrap_err();
    let (status, _, cs, text) = api_error(bound);
    assert_eq!((status, cs), (431, Some(9999)));
    assert_eq!(
        text,
        format!(
            "Unable to execute API command createloadbalancerrule due to invalid value. Invalid parameter publicipid value={unknown} due to incorrect long value format, or entity does not exist or due to incorrect parameter annotation for the field in api cmd class."
        )
    );
    // UploadSslCertCmd declares certificate, privatekey, …, name: with only `certificate`
    // sent, `privatekey` is missing first (alphabetical order would say `name`).
    let upload = alice
        .call("uploadSslCert", Params::new().set("certificate", "c"))
        .await
        .unwrap_err();
    assert!(
        api_error(upload)
            .3
            .ends_with("missing parameter privatekey")
    );
    // CreateFirewallRuleCmd: `ipaddressid` sent empty is present — bound, and naming no
    // address it is the invalid-value 431, not "missing parameter ipaddressid".
    let empty = alice
        .call(
            "createFirewallRule",
            Params::new().set("ipaddressid", "").set("protocol", "tcp"),
        )
        .await
        .unwrap_err();
    let (status, _, _, text) = api_error(empty);
    assert_eq!(status, 431);
    assert!(
        text.contains("due to invalid value. Invalid parameter ipaddressid value= due to"),
        "{text}"
    );
}

/// `QueryManagerImpl.searchForAccounts` → `searchForAccountsInternal`: a user naming
/// another account's `id` fails `accountMgr.checkAccess` (531 cs 4365); `name=` without
/// `id` narrows the caller's own account (empty, no error); an admin without `listall`
/// sees its own account; each account carries its `user` list
/// (`AccountJoinDaoImpl.newAccountResponse`).
#[tokio::test]
async fn list_accounts_checks_access_and_lists_users() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let bob_id = sim.with_state(|s| s.account("bob").unwrap().id.clone());
    let refused = alice
        .call("listAccounts", Params::new().set("id", bob_id.as_str()))
        .await
        .unwrap_err();
    let (status, _, cs, _) = api_error(refused);
    assert_eq!((status, cs), (531, Some(4365)));

    let by_name: Vec<Value> = alice
        .list_all("listAccounts", "account", Params::new().set("name", "bob"))
        .await
        .unwrap();
    assert!(by_name.is_empty(), "{by_name:?}");

    let own: Vec<Value> = alice
        .list_all("listAccounts", "account", Params::new())
        .await
        .unwrap();
    assert_eq!(own.len(), 1);
    assert_eq!(own[0]["name"], "alice");
    let users = own[0]["user"].as_array().expect("the account's users");
    assert_eq!(users.len(), 1);
    assert_eq!(users[0]["username"], "alice");
    assert_eq!(users[0]["accountid"], own[0]["id"]);

    let admin = client(&sim, "admin");
    let admin_own: Vec<Value> = admin
        .list_all("listAccounts", "account", Params::new())
        .await
        .unwrap();
    assert_eq!(admin_own.len(), 1);
    assert_eq!(admin_own[0]["name"], "admin");
    let bob: Vec<Value> = admin
        .list_all(
            "listAccounts",
            "account",
            Params::new().set("id", bob_id.as_str()),
        )
        .await
        .unwrap();
    assert_eq!(bob.len(), 1, "an admin may name any account");
}

/// `associateIpAddress` binds the network in its job (`IpAddressManagerImpl
/// .associateIPToGuestNetwork`), not at once: while the address is `Allocating` it shows no
/// `associatednetworkid`; a firewall rule on it fails as `CreateFirewallRuleCmd.getNetworkId`
/// (the argument `createIngressFirewallRule` evaluates first) refuses an address bound to no
/// network; a load-balancer rule fails in parameter processing (`doAccessChecks` →
/// `CreateLoadBalancerRuleCmd.getSourceIpAddressId`: not `readyToUse()`), 431 cs 4350.
#[tokio::test]
async fn an_allocating_address_has_no_network_yet() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let network = id_of(&sim, "networks", "net-vr");
    sim.set_job_duration(std::time::Duration::from_secs(3));
    let started = alice
        .start_async(
            "associateIpAddress",
            Params::new().set("networkid", network.as_str()),
        )
        .await
        .unwrap();
    let ip_id = started.id.clone().expect("the new address's id");
    let listed: Vec<Value> = alice
        .list_all(
            "listPublicIpAddresses",
            "publicipaddress",
            Params::new().set("id", ip_id.as_str()),
        )
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["state"], "Allocating");
    assert!(
        listed[0].get("associatednetworkid").is_none(),
        "{:?}",
        listed[0]
    );

    let firewall = alice
        .call(
            "createFirewallRule",
            Params::new()
                .set("ipaddressid", ip_id.as_str())
                .set("protocol", "tcp")
                .set("startport", 80),
        )
        .await
        .unwrap_err();
    assert_eq!(
        api_error(firewall),
        (
            431,
            431,
            Some(4350),
            format!(
                "Unable to create firewall rule for the IP address ID={ip_id} as IP is not associated with any network and no networkId is passed in"
            )
        )
    );
    let lb = alice
        .call(
            "createLoadBalancerRule",
            Params::new()
                .set("publicipid", ip_id.as_str())
                .set("name", "web")
                .set("algorithm", "roundrobin")
                .set("privateport", 30080)
                .set("publicport", 80),
        )
        .await
        .unwrap_err();
    assert_eq!(
        api_error(lb),
        (
            431,
            431,
            Some(4350),
            format!("Unable to create load balancer rule, invalid IP address ID {ip_id}")
        )
    );

    sim.set_job_duration(std::time::Duration::from_millis(1));
    let done = alice.wait_job("associateIpAddress", &started.jobid).await;
    let address = &done.unwrap()["ipaddress"];
    assert_eq!(address["associatednetworkid"], network.as_str());
}

/// Routing and plain firewall rules are rows of one table (`firewall_rules`, purpose
/// Firewall): `FirewallManagerImpl.listFirewallRules` of a ROUTED network lists its routing
/// firewall rules, and lists newest first (`Filter(FirewallRuleVO.class, "id", false, …)`),
/// as `listRoutingFirewallRules` does.
#[tokio::test]
async fn routing_firewall_rules_are_firewall_rules_listed_newest_first() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let network = id_of(&sim, "networks", cloudstack_sim::KINDS_ROUTED_NETWORK);
    let mut created = Vec::new();
    for port in [80, 443] {
        let rule = alice
            .call_async(
                "createRoutingFirewallRule",
                Params::new()
                    .set("networkid", network.as_str())
                    .set("protocol", "tcp")
                    .set("startport", port),
            )
            .await
            .unwrap();
        created.push(rule["firewallrule"]["id"].as_str().unwrap().to_owned());
    }
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();
    let ids = |rules: Vec<Value>| -> Vec<String> {
        rules
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let plain: Vec<Value> = alice
        .list_all(
            "listFirewallRules",
            "firewallrule",
            Params::new().set("networkid", network.as_str()),
        )
        .await
        .unwrap();
    assert_eq!(ids(plain), newest_first, "listFirewallRules networkid=");
    let routing: Vec<Value> = alice
        .list_all(
            "listRoutingFirewallRules",
            "firewallrule",
            Params::new().set("networkid", network.as_str()),
        )
        .await
        .unwrap();
    assert_eq!(ids(routing), newest_first, "listRoutingFirewallRules");
}

/// `VirtualMachineName.getVmName(vmId, accountId, "VM")`: the instance name is
/// `i-<account id>-<numeric vm id>-VM`, unique because the numeric ids are.
#[tokio::test]
async fn vm_instance_names_are_unique() {
    let sim = start(Scenario::small()).await;
    let vms: Vec<Value> = client(&sim, "admin")
        .list_all(
            "listVirtualMachines",
            "virtualmachine",
            Params::new().set("listall", true),
        )
        .await
        .unwrap();
    assert!(vms.len() > 1);
    let mut names: Vec<&str> = vms
        .iter()
        .map(|vm| vm["instancename"].as_str().expect("an admin sees it"))
        .collect();
    for name in &names {
        let parts: Vec<&str> = name.split('-').collect();
        assert!(
            parts.len() == 4
                && parts[0] == "i"
                && parts[1].parse::<u64>().is_ok()
                && parts[2].parse::<u64>().is_ok()
                && parts[3] == "VM",
            "{name}"
        );
    }
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), vms.len(), "{names:?}");
}

/// `ApplicationLoadBalancerResponse.forDisplay` is `@Param(authorized = {RoleType.Admin})`:
/// the response serializer leaves it out for a user key — in the job result and in
/// `listLoadBalancers` — and shows it to a root admin.
#[tokio::test]
async fn internal_load_balancers_show_fordisplay_to_admins_only() {
    let sim = start(Scenario::network_kinds()).await;
    let tier = id_of(&sim, "networks", cloudstack_sim::KINDS_INTERNAL_LB_TIER);
    let alice = client(&sim, "alice");
    let created = alice
        .call_async(
            "createLoadBalancer",
            Params::new()
                .set("name", "ilb")
                .set("networkid", tier.as_str())
                .set("sourceipaddressnetworkid", tier.as_str())
                .set("sourceport", 80)
                .set("instanceport", 30080)
                .set("algorithm", "roundrobin")
                .set("scheme", "Internal"),
        )
        .await
        .unwrap();
    let created = &created["loadbalancer"];
    assert!(created["id"].is_string());
    assert!(created.get("fordisplay").is_none(), "{created}");
    let mine: Vec<Value> = alice
        .list_all("listLoadBalancers", "loadbalancer", Params::new())
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    assert!(mine[0].get("fordisplay").is_none(), "{:?}", mine[0]);
    let all: Vec<Value> = client(&sim, "admin")
        .list_all(
            "listLoadBalancers",
            "loadbalancer",
            Params::new().set("listall", true),
        )
        .await
        .unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["fordisplay"], true);
}
