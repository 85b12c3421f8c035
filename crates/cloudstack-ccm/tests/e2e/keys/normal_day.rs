//! A normal day with alice's keys (the default User role): no refused and no failing call,
//! and the version wherever the server shows it.

use super::{Baseline, Ccm, assert_nothing_left, delete_and_wait, lb_service, register_nodes};
use super::{Rig, Scenario, assert_no_other_failures, refused_calls};
use super::{common, services, small_nodes, wait_initialised, wait_served};

/// Serves and deletes one Service with alice's keys on `scenario`; returns the log.
async fn normal_day(scenario: Scenario, name: &str) -> (Rig, String) {
    let rig = Rig::start(scenario).await;
    let baseline = Baseline::take(&rig.sim);
    let nodes = small_nodes(&rig);
    register_nodes(&rig, &nodes);
    let ccm = Ccm::start(&rig, name, &rig.cloud_config(common::ACCOUNT), &[]);
    wait_initialised(&rig, &nodes, &ccm).await;
    let cluster = rig.cluster();
    services::create(&cluster, lb_service("day", &[("TCP", 80, 30480)], &[]));
    wait_served(&rig, "day", &ccm).await;
    delete_and_wait(&rig, "day", &ccm).await;
    assert_nothing_left(&rig, &baseline);
    let output = ccm.output();
    (rig, output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_user_role_has_no_refused_and_no_failing_call() {
    let (rig, output) = normal_day(Scenario::small(), "user-day").await;
    assert!(refused_calls(&rig).is_empty(), "{:?}", refused_calls(&rig));
    assert_no_other_failures(&rig);
    assert!(
        output.contains("detected with listCapabilities"),
        "the version comes from listCapabilities: {output}"
    );
}

/// A normal day on a server that hides its version from `listCapabilities` (and from XML
/// replies when `in_xml` is false): the log names where the version was read instead, and
/// no call fails but the ones the hiding makes fail.
async fn hidden_version_day(in_xml: bool, name: &str, version_line: &str) {
    let mut scenario = Scenario::small();
    scenario.settings.expose_version_in_capabilities = false;
    scenario.settings.expose_version_in_xml = in_xml;
    let (rig, output) = normal_day(scenario, name).await;
    assert!(output.contains(version_line), "{output}");
    assert_no_other_failures(&rig);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_hiding_its_version_from_list_capabilities_is_read_from_an_xml_reply() {
    hidden_version_day(
        true,
        "hidden-version",
        "CloudStack version 4.22.0.0 read from an XML reply",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_hiding_its_version_everywhere_starts_from_what_list_apis_shows() {
    hidden_version_day(
        false,
        "hidden-everywhere",
        "at least this release, from listApis",
    )
    .await;
}
