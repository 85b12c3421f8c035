//! What a pending job looks like from outside: rules in state `Add` until applied, VMs that
//! carry the `jobid`/`jobstatus` of their pending job, a hung virtual router that holds its
//! network's job queue until the job is cancelled, and the association of a VPC tier's
//! address by `networkid`, which fails inside the job.

use crate::common;

use cloudstack::{AssociateIpAddress, ListLoadBalancerRules, ListVirtualMachines, Params};
use cloudstack_sim::{Faults, Scenario, SimServer};
use common::{client, id_of, job_error, start};
use serde_json::Value;
use std::time::Duration;

/// The raw `queryAsyncJobResult` answer.
async fn query(sim: &SimServer, jobid: &str) -> Value {
    client(sim, "alice")
        .call("queryAsyncJobResult", Params::new().set("jobid", jobid))
        .await
        .expect("query job")
}

/// Polls until the job is no longer pending (generous limit; the machine may be loaded).
async fn finished(sim: &SimServer, jobid: &str) -> Value {
    for _ in 0..600 {
        let job = query(sim, jobid).await;
        if job["jobstatus"] != 0 {
            return job;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("job {jobid} still pending");
}

async fn ip_on(sim: &SimServer, network: &str) -> String {
    client(sim, "alice")
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(sim, "networks", network)),
            ..Default::default()
        })
        .await
        .expect("associate")
        .id
        .expect("ip id")
}

fn lb_params(ip: &str, name: &str, port: u32) -> Params {
    Params::new()
        .set("name", name)
        .set("algorithm", "roundrobin")
        .set("privateport", 30000 + port)
        .set("publicport", port)
        .set("publicipid", ip)
        .set("openfirewall", false)
}

/// A hung virtual router: its job never finishes and the next job on the same network waits
/// behind it (`BaseAsyncCmd.networkSyncObject` queues), while other networks go on. The
/// rule stays in state `Add` until applied (`FirewallRule.State`). After
/// `job.cancel.threshold.minutes` the cleanup task cancels the blocking job (status 2, result
/// code 0, "Job is cancelled as it has been blocking others for too long") — without undoing
/// its create phase — and the queue moves on.
#[tokio::test]
async fn a_hung_router_blocks_its_network_queue_until_cancelled() {
    let mut scenario = Scenario::small();
    scenario.settings.job_cancel_threshold_ms = 1500;
    let sim = start(scenario).await;
    let alice = client(&sim, "alice");
    let vr_ip = ip_on(&sim, "net-vr").await;
    let ns_ip = ip_on(&sim, "net-ns").await;

    sim.set_faults(Faults {
        hung_networks: vec!["net-vr".into()],
        ..Faults::default()
    });
    let hung = alice
        .start_async(
            "createLoadBalancerRule",
            lb_params(&vr_ip, "hung-tcp-80", 80),
        )
        .await
        .expect("create phase answers at once");
    sim.set_faults(Faults::default());
    let behind = alice
        .start_async(
            "createLoadBalancerRule",
            lb_params(&vr_ip, "next-tcp-81", 81),
        )
        .await
        .expect("second rule");
    let elsewhere = alice
        .start_async(
            "createLoadBalancerRule",
            lb_params(&ns_ip, "other-tcp-80", 80),
        )
        .await
        .expect("rule on another network");

    let other = finished(&sim, &elsewhere.jobid).await;
    assert_eq!(
        other["jobstatus"], 1,
        "other networks are not blocked: {other}"
    );
    assert_eq!(query(&sim, &hung.jobid).await["jobstatus"], 0);
    assert_eq!(
        query(&sim, &behind.jobid).await["jobstatus"],
        0,
        "queued behind the hung job"
    );
    let states: Vec<(String, String)> = alice
        .list_load_balancer_rules(&ListLoadBalancerRules::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.name.unwrap_or_default(), r.state.unwrap_or_default()))
        .collect();
    // The create job applies only the opened firewall rule: every rule stays `Add`, done
    // or not (the job statuses above tell them apart).
    assert_eq!(states.len(), 3, "{states:?}");
    for (name, state) in &states {
        assert_eq!(state, "Add", "{name}: {states:?}");
    }

    let cancelled = finished(&sim, &hung.jobid).await;
    assert_eq!(cancelled["jobstatus"], 2, "{cancelled}");
    assert_eq!(cancelled["jobresultcode"], 0, "{cancelled}");
    assert_eq!(
        cancelled["jobresult"]["errortext"],
        "Job is cancelled as it has been blocking others for too long"
    );
    let next = finished(&sim, &behind.jobid).await;
    assert_eq!(next["jobstatus"], 1, "the queue moves on: {next}");
    let hung_rule = alice
        .list_load_balancer_rules(&ListLoadBalancerRules {
            id: hung.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        hung_rule[0].state.as_deref(),
        Some("Add"),
        "a cancelled job is not rolled back"
    );
}

/// `user_vm_view` joins the VM's pending job: `listVirtualMachines` shows `jobid` and
/// `jobstatus` 0 while a destroy runs.
#[tokio::test]
async fn a_vm_with_a_pending_job_carries_its_jobid() {
    let sim = start(Scenario::small()).await;
    sim.set_job_duration(Duration::from_secs(3));
    let alice = client(&sim, "alice");
    let vm = id_of(&sim, "vms", "node-1");
    let destroy = alice
        .start_async("destroyVirtualMachine", Params::new().set("id", &vm))
        .await
        .expect("destroy queued");
    let listed = alice
        .call(
            "listVirtualMachines",
            Params::new().set("id", &vm).set("details", "min"),
        )
        .await
        .unwrap();
    let row = &listed["virtualmachine"][0];
    assert_eq!(row["jobid"], destroy.jobid.as_str(), "{listed}");
    assert_eq!(row["jobstatus"], 0);
    let other = alice
        .list_virtual_machines(&ListVirtualMachines {
            name: Some("node-2".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(other.len(), 1);
    assert!(
        alice
            .call("listVirtualMachines", Params::new().set("name", "node-2"))
            .await
            .unwrap()["virtualmachine"][0]
            .get("jobid")
            .is_none(),
        "only the VM of the pending job carries one"
    );
}

/// `associateIpAddress networkid=<VPC tier>`: the create phase allocates the address, the
/// job (`NetworkServiceImpl.associateIPToNetwork`) refuses a tier — 431 "…Specify vpcId to
/// associate ip address to VPC" — and releases the address.
#[tokio::test]
async fn associating_a_tier_address_by_networkid_fails_in_the_job() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let started = alice
        .associate_ip_address_begin(&AssociateIpAddress {
            networkid: Some(id_of(&sim, "networks", "tier1")),
            ..Default::default()
        })
        .await
        .expect("the create phase answers with an id and a job");
    let ip = started.id.clone().expect("new address id");
    let failed = alice
        .associate_ip_address_finish(&started)
        .await
        .unwrap_err();
    assert_eq!(
        job_error(failed),
        (
            431,
            "Can't assign ip to the network directly when network belongs to VPC.Specify vpcId to associate ip address to VPC".into()
        )
    );
    assert!(
        sim.with_state(|s| s
            .ip(&ip)
            .is_some_and(|i| i.state == "Free" && i.owner.is_none())),
        "the address goes back to the pool"
    );
}
