//! The documented example scenario parses and builds, and the built-in one is consistent.

use cloudstack_sim::state::{Owner, State};
use cloudstack_sim::{LbProvider, Role, Scenario};

#[test]
fn example_small_toml_parses_and_builds() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sim/small.toml");
    let scenario = Scenario::load(&path).expect("examples/sim/small.toml parses");
    assert_eq!(scenario.version.text, "4.22.0.0");
    assert_eq!(
        scenario
            .accounts
            .iter()
            .filter(|a| a.role == Role::Admin)
            .count(),
        1
    );
    let state = State::from_scenario(&scenario).expect("references resolve");
    assert_eq!(state.ips.len(), 200);
    let ns = state.networks.iter().find(|n| n.name == "net-ns").unwrap();
    assert_eq!(ns.lb_provider, LbProvider::Netscaler);
    let tier = state.networks.iter().find(|n| n.name == "tier1").unwrap();
    assert_eq!(
        state
            .acl_list(tier.acl_id.as_deref().unwrap())
            .unwrap()
            .name,
        "tier1-acl"
    );
    let vm3 = state
        .vm("5c2d8a5e-6a0b-4f43-9d7e-0d1f1c7e3a01")
        .expect("fixed id kept");
    assert_eq!(vm3.state, "Stopped");
    assert_eq!(vm3.nics.iter().filter(|n| n.isdefault).count(), 1);
    let project_vm = state.vms.iter().find(|v| v.name == "proj-vm-1").unwrap();
    assert!(matches!(project_vm.owner, Owner::Project(_)));
    let static_nat = state
        .ips
        .iter()
        .find(|i| i.address == "203.0.113.200")
        .unwrap();
    assert!(static_nat.static_nat_vm.is_some());
    // one source-NAT address per isolated network (3) and per VPC (1)
    assert_eq!(state.ips.iter().filter(|i| i.source_nat).count(), 4);
}

#[test]
fn bad_references_name_the_object_and_field() {
    let mut scenario = Scenario::small();
    scenario.vms[0].offering = "huge".into();
    let err = State::from_scenario(&scenario).unwrap_err().to_string();
    assert!(
        err.contains("vm \"node-1\"") && err.contains("field offering") && err.contains("huge"),
        "{err}"
    );
    let err = Scenario::from_toml("version = \"4.22\"\n[[zone]]\nname = \"z\"\ncolour = \"red\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("colour"), "{err}");
}

#[test]
fn small_scenario_and_add_vms() {
    let mut scenario = Scenario::small();
    let names = scenario.add_vms(cloudstack_sim::SMALL_NETWORK, "node-", 2);
    assert_eq!(names, ["node-4", "node-5"]);
    let state = State::from_scenario(&scenario).unwrap();
    assert_eq!(state.vms.len(), 5);
    let ips: Vec<&str> = state.vms.iter().map(|v| v.nics[0].ipv4.as_str()).collect();
    assert_eq!(
        ips,
        [
            "10.1.1.10",
            "10.1.1.11",
            "10.1.1.12",
            "10.1.1.13",
            "10.1.1.14"
        ]
    );
    assert!(state.ips.len() >= 50);
    assert!(
        format!("{:?}", scenario.accounts[0]).contains("Secret(***)"),
        "keys never in Debug"
    );
    assert!(!format!("{:?}", scenario.accounts[0]).contains("alice-secret-key"));
}

#[test]
fn example_cks_project_toml_has_the_cks_role() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/sim/cks-project.toml");
    let scenario = Scenario::load(&path).expect("examples/sim/cks-project.toml parses");
    assert_eq!(
        scenario.roles,
        vec![cloudstack_sim::RoleSpec::cks_project()]
    );
    assert!(!scenario.settings.expose_version_in_capabilities);
    assert!(!scenario.settings.expose_version_in_xml);
    let state = State::from_scenario(&scenario).expect("references resolve");
    let account = state.account(cloudstack_sim::CKS_ACCOUNT).unwrap();
    assert_eq!(
        account.custom_role,
        Some(cloudstack_sim::RoleSpec::cks_project())
    );
    assert_eq!(
        state.projects[0].id,
        cloudstack_sim::SMALL_PROJECT_ID,
        "the account is named after this id"
    );
    let nodes = state.vms.iter().filter(|v| v.name.starts_with("pnode-"));
    assert!(
        nodes
            .map(|v| &v.owner)
            .all(|o| matches!(o, Owner::Project(_)))
    );
    // Older scenario files, without roles or the version settings, still load.
    let old = Scenario::from_toml("[settings]\njob_duration_ms = 5\n").unwrap();
    assert!(old.roles.is_empty() && old.settings.expose_version_in_xml);
}
