//! VM lifecycle as CloudStack's source has it: what destroyVirtualMachine (with and without
//! `expunge`), expungeVirtualMachine and the `/sim/vms/…` equivalents do to load-balancer
//! mappings, static NAT and NICs, and how assign/removeFromLoadBalancerRule answer for VMs
//! that are gone, not assigned or do not exist.

use crate::common;

use cloudstack::{
    AssignToLoadBalancerRule, AssociateIpAddress, CreateLoadBalancerRule,
    ListLoadBalancerRuleInstances, Params, RemoveFromLoadBalancerRule,
};
use cloudstack_sim::{NicSpec, Scenario, SimServer, VmSpec};
use common::{api_error, client, id_of, job_error, start};
use serde_json::Value;

/// An address on `net-vr` with one LB rule on port 80; returns the rule id.
async fn rule_on_net_vr(sim: &SimServer) -> String {
    let alice = client(sim, "alice");
    let ip = alice
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(sim, "networks", "net-vr")),
            ..Default::default()
        })
        .await
        .expect("associate")
        .id
        .expect("ip id");
    alice
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: "web-tcp-80".into(),
            algorithm: "roundrobin".into(),
            privateport: 30080,
            publicport: 80,
            publicipid: Some(ip),
            openfirewall: Some(false),
            ..Default::default()
        })
        .await
        .expect("create rule")
        .id
        .expect("rule id")
}

async fn assign(sim: &SimServer, rule: &str, vms: &[&str]) {
    client(sim, "alice")
        .assign_to_load_balancer_rule(&AssignToLoadBalancerRule {
            id: rule.into(),
            virtualmachineids: vms.iter().map(|v| (*v).to_owned()).collect(),
            ..Default::default()
        })
        .await
        .expect("assign");
}

/// VM ids mapped to `rule` in the simulator's state (`LoadBalancerVMMapVO` rows).
fn mapped(sim: &SimServer, rule: &str) -> Vec<String> {
    sim.with_state(|s| {
        s.lb_rule(rule)
            .map(|r| r.members.iter().map(|m| m.vm_id.clone()).collect())
            .unwrap_or_default()
    })
}

/// VM ids `listLoadBalancerRuleInstances` answers.
async fn listed(sim: &SimServer, rule: &str) -> Vec<String> {
    let mut ids: Vec<String> = client(sim, "alice")
        .list_load_balancer_rule_instances(&ListLoadBalancerRuleInstances {
            id: rule.into(),
            ..Default::default()
        })
        .await
        .expect("list instances")
        .into_iter()
        .filter_map(|vm| vm.id)
        .collect();
    ids.sort();
    ids
}

async fn vm_job(
    sim: &SimServer,
    account: &str,
    command: &str,
    params: Params,
) -> Result<Value, cloudstack::Error> {
    client(sim, account).call_async(command, params).await
}

/// `UserVmManagerImpl.destroyVm` without `expunge`: the VM becomes Destroyed and nothing
/// else changes; its `LoadBalancerVMMapVO` rows, static NAT and NICs stay until expunge
/// (`cleanupVmResources` runs only from `expunge`). `listLoadBalancerRuleInstances`
/// skips Destroyed VMs (`LoadBalancingRulesManagerImpl.listLoadBalancerInstances`).
#[tokio::test]
async fn destroy_without_expunge_keeps_mappings_static_nat_and_nics() {
    let sim = start(Scenario::small()).await;
    let rule = rule_on_net_vr(&sim).await;
    let (n1, n2) = (id_of(&sim, "vms", "node-1"), id_of(&sim, "vms", "node-2"));
    assign(&sim, &rule, &[&n1, &n2]).await;

    let result = vm_job(
        &sim,
        "alice",
        "destroyVirtualMachine",
        Params::new().set("id", &n1),
    )
    .await
    .expect("destroy succeeds");
    assert_eq!(result["virtualmachine"]["state"], "Destroyed", "{result}");
    assert_eq!(result["virtualmachine"]["id"], n1.as_str());
    let mut both = vec![n1.clone(), n2.clone()];
    both.sort();
    let mut kept = mapped(&sim, &rule);
    kept.sort();
    assert_eq!(kept, both, "destroy leaves the mapping rows in place");
    assert_eq!(
        listed(&sim, &rule).await,
        vec![n2.clone()],
        "a Destroyed VM is not listed as a member"
    );
    assert!(
        sim.with_state(|s| s.vm(&n1).is_some_and(|v| !v.nics.is_empty())),
        "NICs stay until expunge"
    );
    // Destroying a Destroyed VM again answers it unchanged.
    let again = vm_job(
        &sim,
        "alice",
        "destroyVirtualMachine",
        Params::new().set("id", &n1),
    )
    .await
    .expect("second destroy succeeds");
    assert_eq!(again["virtualmachine"]["state"], "Destroyed");

    // Static NAT stays on a destroyed VM.
    let static_vm = sim
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
    assert!(sim.destroy_vm(&static_vm), "/sim destroy of a known VM");
    assert!(sim.with_state(|s| {
        s.ips
            .iter()
            .any(|i| i.static_nat_vm.as_deref() == Some(static_vm.as_str()))
    }));
    assert!(sim.with_state(|s| s.vm(&static_vm).is_some_and(|v| v.state == "Destroyed")));
}

/// `expungeVirtualMachine` (`UserVmManagerImpl.expungeVm` → `expunge` →
/// `cleanupVmResources`): `removeVmFromLoadBalancers` drops the mappings, `disableStaticNat`
/// frees the static NAT, `releaseNetworkResourcesOnExpunge` the NICs. Non-admins may not
/// expunge (`checkExpungeVmPermission`, 530 in the job); a VM not destroyed first fails with
/// "Please destroy vm with specified vmId before expunge" (530).
#[tokio::test]
async fn expunge_drops_mappings_static_nat_and_nics() {
    let sim = start(Scenario::small()).await;
    let rule = rule_on_net_vr(&sim).await;
    let (n1, n2) = (id_of(&sim, "vms", "node-1"), id_of(&sim, "vms", "node-2"));
    assign(&sim, &rule, &[&n1, &n2]).await;

    let running = vm_job(
        &sim,
        "admin",
        "expungeVirtualMachine",
        Params::new().set("id", &n1),
    )
    .await
    .unwrap_err();
    assert_eq!(
        job_error(running),
        (
            530,
            "Please destroy vm with specified vmId before expunge".into()
        )
    );
    vm_job(
        &sim,
        "alice",
        "destroyVirtualMachine",
        Params::new().set("id", &n1),
    )
    .await
    .expect("destroy");
    let by_user = vm_job(
        &sim,
        "alice",
        "expungeVirtualMachine",
        Params::new().set("id", &n1),
    )
    .await
    .unwrap_err();
    assert_eq!(
        job_error(by_user),
        (
            530,
            "Account does not have permission for expunging.".into()
        )
    );
    let done = vm_job(
        &sim,
        "admin",
        "expungeVirtualMachine",
        Params::new().set("id", &n1),
    )
    .await
    .expect("admin expunges");
    assert_eq!(done["success"], true);
    assert_eq!(
        mapped(&sim, &rule),
        vec![n2.clone()],
        "expunge drops the mapping"
    );
    assert_eq!(listed(&sim, &rule).await, vec![n2.clone()]);
    assert!(
        sim.with_state(|s| s.vm(&n1).is_none()),
        "an expunged VM is gone from lookups"
    );
    assert!(
        sim.with_state(|s| s
            .vm_including_removed(&n1)
            .is_some_and(|v| v.nics.is_empty())),
        "its NICs are released; the removed row keeps the UUID resolvable"
    );
    // Expunging again: the UUID still resolves (ParamProcessWorker searches removed rows),
    // the manager finds no VM → InvalidParameterValueException → 431 in the job.
    let twice = vm_job(
        &sim,
        "admin",
        "expungeVirtualMachine",
        Params::new().set("id", &n1),
    )
    .await
    .unwrap_err();
    assert_eq!(
        job_error(twice),
        (
            431,
            "Unable to find a virtual machine with specified vmId".into()
        )
    );

    // destroyVirtualMachine expunge=true: admin only, then the same cleanup; the job answers
    // the VM in state Expunging.
    let denied = vm_job(
        &sim,
        "alice",
        "destroyVirtualMachine",
        Params::new().set("id", &n2).set("expunge", true),
    )
    .await
    .unwrap_err();
    assert_eq!(
        job_error(denied),
        (
            530,
            "Account does not have permission for expunging.".into()
        )
    );
    assert_eq!(
        mapped(&sim, &rule),
        vec![n2.clone()],
        "a failed job changes nothing"
    );
    let gone = vm_job(
        &sim,
        "admin",
        "destroyVirtualMachine",
        Params::new().set("id", &n2).set("expunge", true),
    )
    .await
    .expect("admin destroys with expunge");
    assert_eq!(gone["virtualmachine"]["state"], "Expunging");
    assert!(mapped(&sim, &rule).is_empty());
    assert!(listed(&sim, &rule).await.is_empty());

    // The /sim equivalent (DELETE /sim/vms/{id}) expunges the same way, static NAT included.
    let n3 = id_of(&sim, "vms", "node-3");
    assign(&sim, &rule, &[&n3]).await;
    sim.with_state(|s| {
        assert!(
            s.ips
                .iter()
                .all(|i| i.static_nat_vm.as_deref() != Some(n3.as_str()))
        )
    });
    let static_vm = sim
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
    let status = reqwest::Client::new()
        .delete(format!("{}/vms/{n3}", sim.admin_url()))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 204);
    assert!(mapped(&sim, &rule).is_empty());
    assert!(sim.remove_vm(&static_vm));
    assert!(
        sim.with_state(|s| s.ips.iter().all(|i| i.static_nat_vm.is_none())),
        "expunge disables the VM's static NAT"
    );
    assert!(
        sim.with_state(|s| s
            .ips
            .iter()
            .any(|i| i.address == "203.0.113.200" && i.owner.is_some())),
        "the address itself stays allocated (disableStaticNat, not a release)"
    );
}

/// `removeFromLoadBalancerRule`: `virtualmachineids` is resolved by parameter processing
/// before the job (unknown UUID → synchronous 431, cs 9999, `ParamProcessWorker`); a VM that
/// is not mapped, or that is expunged, is left alone and the job succeeds
/// (`removeFromLoadBalancerInternal`: `listByLoadBalancerIdAndVmId` is never null); an
/// unmapped `vmidipmap` address fails the job with 431 "Failed to remove Instance from load
/// balancer rule" (`RemoveFromLoadBalancerRuleCmd.execute`), an unknown `vmidipmap` VM with
/// 431 "Unable to find Instance ID: …" (`getVmIdIpListMap`).
#[tokio::test]
async fn remove_from_rule_for_vms_not_assigned_gone_or_unknown() {
    let sim = start(Scenario::small()).await;
    let rule = rule_on_net_vr(&sim).await;
    let (n1, n2, n3) = (
        id_of(&sim, "vms", "node-1"),
        id_of(&sim, "vms", "node-2"),
        id_of(&sim, "vms", "node-3"),
    );
    assign(&sim, &rule, &[&n1, &n2]).await;
    let alice = client(&sim, "alice");
    let remove = |vms: Vec<String>, map: Vec<(String, String)>| RemoveFromLoadBalancerRule {
        id: rule.clone(),
        virtualmachineids: vms,
        vmidipmap: map,
    };

    alice
        .remove_from_load_balancer_rule(&remove(vec![n3.clone()], vec![]))
        .await
        .expect("removing a VM that is not assigned is a successful no-op");
    assert_eq!(mapped(&sim, &rule).len(), 2);

    let unknown = "0b1d2c3e-0000-4000-8000-00000000ffff".to_owned();
    let (status, code, cs, text) = api_error(
        alice
            .remove_from_load_balancer_rule(&remove(vec![unknown.clone()], vec![]))
            .await
            .unwrap_err(),
    );
    assert_eq!((status, code, cs), (431, 431, Some(9999)));
    assert_eq!(
        text,
        format!(
            "Unable to execute API command removefromloadbalancerrule due to invalid value. Invalid parameter virtualmachineids value={unknown} due to incorrect long value format, or entity does not exist or due to incorrect parameter annotation for the field in api cmd class."
        )
    );

    let unmapped_ip = alice
        .remove_from_load_balancer_rule(&remove(vec![], vec![(n3.clone(), "10.1.1.13".into())]))
        .await
        .unwrap_err();
    assert_eq!(
        job_error(unmapped_ip),
        (
            431,
            "Failed to remove Instance from load balancer rule".into()
        )
    );
    let unknown_in_map = alice
        .remove_from_load_balancer_rule(&remove(
            vec![],
            vec![(unknown.clone(), "10.1.1.13".into())],
        ))
        .await
        .unwrap_err();
    assert_eq!(
        job_error(unknown_in_map),
        (431, format!("Unable to find Instance ID: {unknown}"))
    );

    // An expunged VM's UUID still resolves; its mapping is already gone, so the job succeeds.
    assert!(sim.remove_vm(&n1));
    alice
        .remove_from_load_balancer_rule(&remove(vec![n1.clone()], vec![]))
        .await
        .expect("removing an expunged VM succeeds");
    assert_eq!(mapped(&sim, &rule), vec![n2.clone()]);
}

/// `assignToLoadBalancer`: a Destroyed VM ("Invalid instance id specified") fails the job,
/// and `AssignToLoadBalancerRuleCmd.execute` turns every such `CloudRuntimeException` into
/// 530 "Failed to assign load balancer rule".
#[tokio::test]
async fn assigning_a_destroyed_vm_fails_the_job() {
    let sim = start(Scenario::small()).await;
    let rule = rule_on_net_vr(&sim).await;
    let n1 = id_of(&sim, "vms", "node-1");
    assert!(sim.destroy_vm(&n1));
    let failed = client(&sim, "alice")
        .assign_to_load_balancer_rule(&AssignToLoadBalancerRule {
            id: rule.clone(),
            virtualmachineids: vec![n1.clone()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        job_error(failed),
        (530, "Failed to assign load balancer rule".into())
    );
    assert!(mapped(&sim, &rule).is_empty());
}

/// `DestroyVMCmd.id` carries `@ACL(OperateEntry)`: another account's VM is refused before a
/// job is queued (531, `ParamProcessWorker.doAccessChecks`); an unknown id is the
/// parameter-processing 431.
#[tokio::test]
async fn destroy_checks_the_id_before_queueing() {
    let sim = start(Scenario::small()).await;
    let n1 = id_of(&sim, "vms", "node-1");
    let (status, code, _, _) = api_error(
        vm_job(
            &sim,
            "bob",
            "destroyVirtualMachine",
            Params::new().set("id", &n1),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((status, code), (531, 531));
    let (status, _, cs, text) = api_error(
        vm_job(
            &sim,
            "alice",
            "expungeVirtualMachine",
            Params::new().set("id", "0b1d2c3e-0000-4000-8000-00000000ffff"),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((status, cs), (431, Some(9999)));
    assert!(text.starts_with("Unable to execute API command expungevirtualmachine due to invalid value. Invalid parameter id value="), "{text}");
    assert!(sim.with_state(|s| s.vm(&n1).is_some_and(|v| v.state == "Running")));
}

/// `QueryManagerImpl.searchForUserVMsInternal`: without `state` an admin lists Destroyed VMs
/// too; a non-admin never sees them (`allow.user.view.destroyed.vm` off), not even with
/// `state=Destroyed`; `state=Present` hides them; an expunged VM is listed to nobody.
#[tokio::test]
async fn destroyed_vms_are_listed_to_admins_only() {
    let sim = start(Scenario::small()).await;
    let n1 = id_of(&sim, "vms", "node-1");
    assert!(sim.destroy_vm(&n1));
    let names = |list: Value| -> Vec<String> {
        list["virtualmachine"]
            .as_array()
            .map(|vms| {
                vms.iter()
                    .map(|v| {
                        format!(
                            "{}={}",
                            v["name"].as_str().unwrap_or(""),
                            v["state"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let alice = client(&sim, "alice");
    let admin = client(&sim, "admin");
    let mine = names(
        alice
            .call("listVirtualMachines", Params::new())
            .await
            .unwrap(),
    );
    assert_eq!(mine, vec!["node-2=Running", "node-3=Running"]);
    let asked = names(
        alice
            .call(
                "listVirtualMachines",
                Params::new().set("state", "Destroyed"),
            )
            .await
            .unwrap(),
    );
    assert!(asked.is_empty(), "{asked:?}");
    let all = names(
        admin
            .call("listVirtualMachines", Params::new().set("listall", true))
            .await
            .unwrap(),
    );
    assert_eq!(
        all,
        vec!["node-1=Destroyed", "node-2=Running", "node-3=Running"]
    );
    let present = names(
        admin
            .call(
                "listVirtualMachines",
                Params::new().set("listall", true).set("state", "Present"),
            )
            .await
            .unwrap(),
    );
    assert_eq!(present, vec!["node-2=Running", "node-3=Running"]);
    assert!(sim.remove_vm(&n1));
    let after = names(
        admin
            .call("listVirtualMachines", Params::new().set("listall", true))
            .await
            .unwrap(),
    );
    assert_eq!(after, vec!["node-2=Running", "node-3=Running"]);
}
