//! Async jobs: per-network serialisation, queryAsyncJobResult/listAsyncJobs, job faults.

use crate::common;

use cloudstack::{
    AssociateIpAddress, CreateFirewallRule, CreateLoadBalancerRule, ListAsyncJobs,
    ListLoadBalancerRules, ListZones,
};
use cloudstack_sim::{ErrorFault, Faults, Scenario, SimServer};
use common::{api_error, client, id_of, job_error, start};
use std::time::Duration;

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

fn firewall(ip: &str, port: u32) -> CreateFirewallRule {
    CreateFirewallRule {
        ipaddressid: ip.into(),
        protocol: "tcp".into(),
        startport: Some(port),
        ..Default::default()
    }
}

#[tokio::test]
async fn jobs_on_one_network_run_one_at_a_time() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let (vr_ip, ns_ip) = (ip_on(&sim, "net-vr").await, ip_on(&sim, "net-ns").await);
    sim.set_job_duration(Duration::from_millis(150));
    let first = alice
        .create_firewall_rule_begin(&firewall(&vr_ip, 80))
        .await
        .unwrap();
    let second = alice
        .create_firewall_rule_begin(&firewall(&vr_ip, 443))
        .await
        .unwrap();
    let other = alice
        .create_firewall_rule_begin(&firewall(&ns_ip, 80))
        .await
        .unwrap();
    let pending = alice.query_async_job_result(&second.jobid).await.unwrap();
    assert_eq!(pending.jobstatus, Some(0));
    assert!(pending.jobresult.is_none(), "a pending job has no result");
    for start in [&first, &second, &other] {
        alice
            .wait_job("createFirewallRule", &start.jobid)
            .await
            .unwrap();
    }
    let jobs = sim.with_state(|s| s.jobs.clone());
    let job = |id: &str| jobs.iter().find(|j| j.id == id).unwrap().clone();
    let (j1, j2, j3) = (job(&first.jobid), job(&second.jobid), job(&other.jobid));
    assert!(
        j2.start_ms >= j1.finish_ms.unwrap(),
        "the second job waits for the first on net-vr"
    );
    assert!(j2.completed_ms.unwrap() > j1.completed_ms.unwrap());
    assert_eq!(
        j3.start_ms, j3.created_ms,
        "a job on another network does not wait"
    );
    assert!(j3.finish_ms.unwrap() < j2.finish_ms.unwrap());
    let done = alice.query_async_job_result(&second.jobid).await.unwrap();
    assert_eq!(
        (
            done.jobstatus,
            done.jobresultcode,
            done.jobinstancetype.as_deref()
        ),
        (Some(1), Some(0), Some("FirewallRule"))
    );
    assert_eq!(done.jobresult.unwrap()["firewallrule"]["startport"], 443);
}

#[tokio::test]
async fn unknown_or_foreign_job_ids_are_431() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let err = alice
        .query_async_job_result("0b1d2c3e-0000-4000-8000-000000000001")
        .await
        .unwrap_err();
    let (status, code, cs, text) = api_error(err);
    assert_eq!((status, code, cs), (431, 431, Some(9999)));
    assert_eq!(
        text,
        "Unable to execute API command queryasyncjobresult due to invalid value. Invalid parameter jobid value=0b1d2c3e-0000-4000-8000-000000000001 due to incorrect long value format, or entity does not exist or due to incorrect parameter annotation for the field in api cmd class."
    );
    let ip = ip_on(&sim, "net-vr").await;
    let start = alice
        .create_firewall_rule_begin(&firewall(&ip, 22))
        .await
        .unwrap();
    assert_eq!(
        api_error(
            client(&sim, "bob")
                .query_async_job_result(&start.jobid)
                .await
                .unwrap_err()
        )
        .0,
        431
    );
    client(&sim, "admin")
        .query_async_job_result(&start.jobid)
        .await
        .expect("root admin sees every job");
    let jobs = alice
        .list_async_jobs(&ListAsyncJobs::default())
        .await
        .unwrap();
    assert_eq!(jobs.len(), 2, "associate + firewall");
    assert!(
        client(&sim, "bob")
            .list_async_jobs(&ListAsyncJobs::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn injected_job_failures_and_stuck_jobs() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    sim.set_faults(Faults {
        job_failure_rate: 1.0,
        ..Faults::default()
    });
    let request = CreateLoadBalancerRule {
        name: "r-tcp-80".into(),
        algorithm: "roundrobin".into(),
        privateport: 30080,
        publicport: 80,
        publicipid: Some(ip.clone()),
        openfirewall: Some(false),
        ..Default::default()
    };
    let (code, text) = job_error(alice.create_load_balancer_rule(&request).await.unwrap_err());
    assert_eq!(code, 530);
    assert!(text.contains("Simulated failure"), "{text}");
    assert!(
        alice
            .list_load_balancer_rules(&ListLoadBalancerRules::default())
            .await
            .unwrap()
            .is_empty(),
        "a failed create leaves nothing"
    );

    sim.set_faults(Faults {
        job_never_finish_rate: 1.0,
        ..Faults::default()
    });
    let stuck = alice
        .create_load_balancer_rule_begin(&request)
        .await
        .unwrap();
    sim.set_faults(Faults::default());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        alice
            .query_async_job_result(&stuck.jobid)
            .await
            .unwrap()
            .jobstatus,
        Some(0)
    );

    let mut faults = Faults::default();
    faults.errors.insert(
        "listZones".into(),
        ErrorFault {
            rate: 1.0,
            code: 534,
            text: Some("router down".into()),
        },
    );
    sim.set_faults(faults);
    let (status, _, _, text) =
        api_error(alice.list_zones(&ListZones::default()).await.unwrap_err());
    assert_eq!((status, text.as_str()), (534, "router down"));
}
