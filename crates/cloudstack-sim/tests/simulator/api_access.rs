//! Who may call what (`crates/cloudstack-sim/src/roles.rs`): a role's refusal is a 432
//! under `errorresponse`, decided before the signature (`ApiServer.verifyRequest` →
//! `checkCommandAvailable`); CKS's project role allows its 31 APIs and nothing else; the
//! default User role everything but the admin-only commands; `listApis` lists what the
//! caller may call; a server may hide its version.

use crate::common;

use cloudstack::Params;
use cloudstack_sim::{
    AccountSpec, CKS_ACCOUNT, CKS_NETWORK, CKS_TIER, Role, RoleSpec, RuleSpec, SMALL_PROJECT_ID,
    Scenario, SimServer, Version,
};
use common::{Raw, client, id_of, keys, raw_get, start};
use serde_json::Value;

/// A signed JSON GET of `command` with `extra` parameters as `account`; `signature`
/// replaces the computed one when given.
async fn get(
    sim: &SimServer,
    account: &str,
    command: &str,
    extra: &[(&str, &str)],
    signature: Option<&str>,
) -> Raw {
    let (api_key, secret) = keys(sim, account);
    let mut params = vec![
        ("apikey", api_key.as_str()),
        ("command", command),
        ("response", "json"),
    ];
    params.extend_from_slice(extra);
    raw_get(sim, &params, &secret, signature).await
}

/// The user uuid of `account`.
fn user_id(sim: &SimServer, account: &str) -> String {
    sim.with_state(|s| s.account(account).expect("account").user_id.clone())
}

/// Asserts the role checker's 432 under `errorresponse`, with its header.
fn assert_refused(raw: &Raw, text: &str) {
    assert_eq!(raw.status, 432, "{}", raw.text);
    let body = raw.json();
    let error = &body["errorresponse"];
    assert_eq!(error["errorcode"], 432, "{body}");
    assert_eq!(error["cserrorcode"], 9999, "{body}");
    assert_eq!(error["errortext"], text, "{body}");
    assert_eq!(raw.description.as_deref(), Some(text));
}

fn refusal(sim: &SimServer, account: &str, command: &str) -> String {
    format!(
        "The API [{command}] does not exist or is not available for the account for user id [{}].",
        user_id(sim, account)
    )
}

/// The `name`s of a listApis body.
fn api_names(body: &Value) -> Vec<String> {
    body["api"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|a| a["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_cks_project_key_calls_its_apis_and_gets_432_for_the_rest() {
    let sim = start(Scenario::cks_project()).await;
    let cks = client(&sim, CKS_ACCOUNT);
    let project = Params::new().set("projectid", SMALL_PROJECT_ID);
    let vms = cks
        .call("listVirtualMachines", project.clone())
        .await
        .unwrap();
    assert_eq!(vms["count"], 3, "{vms}");
    let networks = cks.call("listNetworks", project.clone()).await.unwrap();
    let names = networks["network"].to_string();
    assert!(
        names.contains(CKS_NETWORK) && names.contains(CKS_TIER),
        "{names}"
    );
    let ip = cks
        .call(
            "associateIpAddress",
            project
                .clone()
                .set("networkid", id_of(&sim, "networks", CKS_NETWORK)),
        )
        .await
        .unwrap();
    assert!(ip["jobid"].is_string(), "{ip}");
    cks.call("listLoadBalancerRules", project.clone())
        .await
        .unwrap();

    for command in [
        "listCapabilities",
        "listZones",
        "createTags",
        "listSslCerts",
        "listApis",
    ] {
        // createTags without its required parameters: the 432 comes before the 431.
        let raw = get(&sim, CKS_ACCOUNT, command, &[], None).await;
        assert_refused(&raw, &refusal(&sim, CKS_ACCOUNT, command));
        // The same with a bad signature: the role is asked before the signature.
        let raw = get(&sim, CKS_ACCOUNT, command, &[], Some("bad")).await;
        assert_refused(&raw, &refusal(&sim, CKS_ACCOUNT, command));
    }
    // An allowed command with a bad signature is the signature's 401.
    let raw = get(&sim, CKS_ACCOUNT, "listVirtualMachines", &[], Some("bad")).await;
    assert_eq!(raw.status, 401, "{}", raw.text);
    assert_eq!(
        raw.json()["listvirtualmachinesresponse"]["errorcode"],
        401,
        "{}",
        raw.text
    );
    // A 432 says nothing about the keys: they keep working for what the role allows.
    cks.call("listVirtualMachines", project).await.unwrap();

    // Refused calls are logged with their status, per command.
    let log = sim.call_log();
    let refused = |command: &str| {
        log.iter()
            .filter(|c| c.command == command && c.status == 432)
            .count()
    };
    assert_eq!(refused("listZones"), 2);
    assert_eq!(refused("listApis"), 2);
    assert!(
        log.iter()
            .filter(|c| c.status == 432)
            .all(|c| c.account.as_deref() == Some(CKS_ACCOUNT))
    );
}

#[tokio::test]
async fn a_custom_role_allows_its_rules_then_the_annotated_commands() {
    let mut scenario = Scenario::small();
    scenario.roles.push(RoleSpec {
        name: "reader".into(),
        role_type: Role::User,
        rules: vec![
            RuleSpec::allow("listZones"),
            RuleSpec::deny("listNetworkACL*"),
            RuleSpec::allow("LISTNETWORK*"),
            RuleSpec::deny("*"),
        ],
    });
    scenario.roles.push(RoleSpec {
        name: "zones-only".into(),
        role_type: Role::User,
        rules: vec![RuleSpec::allow("listZones")],
    });
    for (name, role) in [("carol", "reader"), ("dave", "zones-only")] {
        let mut account = AccountSpec::new(name, Role::User, &[]);
        account.custom_role = Some(role.into());
        scenario.accounts.push(account);
    }
    let sim = start(scenario).await;
    let carol = client(&sim, "carol");
    carol.call("listZones", Params::new()).await.unwrap();
    carol.call("listNetworks", Params::new()).await.unwrap();
    for command in ["listNetworkACLs", "listVirtualMachines", "listApis"] {
        let raw = get(&sim, "carol", command, &[], None).await;
        assert_refused(&raw, &refusal(&sim, "carol", command));
    }

    // No rule matching: only the commands annotated `authorized` for the User type.
    let dave = client(&sim, "dave");
    let apis = dave.call("listApis", Params::new()).await.unwrap();
    let mut names = api_names(&apis);
    names.sort();
    assert_eq!(
        names,
        [
            "createRoutingFirewallRule",
            "deleteRoutingFirewallRule",
            "listApis",
            "listRoutingFirewallRules",
            "listZones",
        ]
    );
    let raw = get(&sim, "dave", "listNetworks", &[], None).await;
    assert_refused(&raw, &refusal(&sim, "dave", "listNetworks"));
}

#[tokio::test]
async fn the_default_user_role_and_list_apis() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let apis = alice.call("listApis", Params::new()).await.unwrap();
    let names = api_names(&apis);
    assert!(names.iter().any(|n| n == "listLoadBalancerRules"));
    assert!(!names.iter().any(|n| n == "listManagementServersMetrics"));
    assert_eq!(apis["count"], names.len());
    let raw = get(&sim, "alice", "listManagementServersMetrics", &[], None).await;
    assert_refused(
        &raw,
        &refusal(&sim, "alice", "listManagementServersMetrics"),
    );

    // A root admin lists it, with the version that brought it.
    let admin = client(&sim, "admin");
    let apis = admin.call("listApis", Params::new()).await.unwrap();
    let metrics = apis["api"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "listManagementServersMetrics")
        .expect("listed for a root admin")
        .clone();
    assert_eq!(metrics["since"], "4.17.0");
    assert_eq!(metrics["isasync"], false);

    // One command by name, its parameters from CloudStack's listing.
    let one = alice
        .call(
            "listApis",
            Params::new().set("name", "createLoadBalancerRule"),
        )
        .await
        .unwrap();
    assert_eq!(one["count"], 1);
    let api = &one["api"][0];
    assert_eq!(api["isasync"], true);
    assert!(
        api.get("since").is_none(),
        "unknown to the simulator: absent"
    );
    let params = api["params"].as_array().unwrap();
    let publicport = params.iter().find(|p| p["name"] == "publicport").unwrap();
    assert_eq!(publicport["required"], true);
    assert_eq!(publicport["type"], "string");

    // A refused or unknown name: ListApisCmd's 530.
    for name in ["listManagementServersMetrics", "listNothing"] {
        let raw = get(&sim, "alice", "listApis", &[("name", name)], None).await;
        assert_eq!(raw.status, 530, "{}", raw.text);
        let error = &raw.json()["listapisresponse"];
        assert_eq!(error["cserrorcode"], 9999);
        assert_eq!(
            error["errortext"],
            "Api Discovery plugin was unable to find an api by that name or process any apis"
        );
    }
}

#[tokio::test]
async fn a_project_the_caller_is_not_in_is_432_before_the_signature() {
    let sim = start(Scenario::small()).await;
    let text = format!(
        "The API [listVirtualMachines] does not exist or is not available for this account/user in project [{SMALL_PROJECT_ID}]."
    );
    let project = [("projectid", SMALL_PROJECT_ID)];
    let raw = get(&sim, "bob", "listVirtualMachines", &project, None).await;
    assert_refused(&raw, &text);
    let raw = get(&sim, "bob", "listVirtualMachines", &project, Some("bad")).await;
    assert_refused(&raw, &text);
    // Members and root admins pass.
    let raw = get(&sim, "alice", "listVirtualMachines", &project, None).await;
    assert_eq!(raw.status, 200, "{}", raw.text);
    let raw = get(&sim, "admin", "listVirtualMachines", &project, None).await;
    assert_eq!(raw.status, 200, "{}", raw.text);
}

#[tokio::test]
async fn from_4_23_the_refusal_names_the_account() {
    let mut scenario = Scenario::small();
    scenario.version = Version::parse("4.23.0.0").unwrap();
    let sim = start(scenario).await;
    let raw = get(&sim, "alice", "listManagementServersMetrics", &[], None).await;
    assert_refused(
        &raw,
        "The API [listManagementServersMetrics] does not exist or is not available for the account alice.",
    );
}

#[tokio::test]
async fn a_server_may_hide_its_version() {
    let mut scenario = Scenario::small();
    scenario.settings.expose_version_in_capabilities = false;
    scenario.settings.expose_version_in_xml = false;
    let sim = start(scenario).await;
    let caps = client(&sim, "alice")
        .call("listCapabilities", Params::new())
        .await
        .unwrap();
    assert!(
        caps["capability"].get("cloudstackversion").is_none(),
        "{caps}"
    );
    assert_eq!(caps["capability"]["dynamicrolesenabled"], true);
    let (api_key, secret) = keys(&sim, "alice");
    let xml = raw_get(
        &sim,
        &[("apikey", &api_key), ("command", "listZones")],
        &secret,
        None,
    )
    .await;
    assert_eq!(xml.status, 200);
    assert!(!xml.text.contains("cloud-stack-version"), "{}", xml.text);

    // Shown by default: in listCapabilities and on every XML reply to a verified caller.
    let sim = start(Scenario::small()).await;
    let caps = client(&sim, "alice")
        .call("listCapabilities", Params::new())
        .await
        .unwrap();
    assert_eq!(caps["capability"]["cloudstackversion"], "4.22.0.0");
    let (api_key, secret) = keys(&sim, "alice");
    let xml = |command: &'static str, signature: Option<&'static str>| {
        let (sim, api_key, secret) = (&sim, api_key.clone(), secret.clone());
        async move {
            raw_get(
                sim,
                &[("apikey", &api_key), ("command", command)],
                &secret,
                signature,
            )
            .await
        }
    };
    let zones = xml("listZones", None).await;
    assert!(
        zones
            .text
            .contains("<listzonesresponse cloud-stack-version=\"4.22.0.0\">"),
        "{}",
        zones.text
    );
    // An error of a verified caller carries it too (one serializer).
    let missing = xml("createTags", None).await;
    assert_eq!(missing.status, 431);
    assert!(
        missing
            .text
            .contains("<createtagsresponse cloud-stack-version=\"4.22.0.0\">"),
        "{}",
        missing.text
    );
    // Not to a caller whose signature was not verified: a 401, or a 432 decided before it.
    let unsigned = xml("listZones", Some("bad")).await;
    assert_eq!(unsigned.status, 401);
    assert!(
        !unsigned.text.contains("cloud-stack-version"),
        "{}",
        unsigned.text
    );
    let refused = xml("listManagementServersMetrics", None).await;
    assert_eq!(refused.status, 432);
    assert!(
        refused.text.contains("<errorresponse><"),
        "{}",
        refused.text
    );
}

#[tokio::test]
async fn the_cks_example_file_serves_the_role() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/sim/cks-project.toml");
    let sim = start(Scenario::load(&path).unwrap()).await;
    let raw = get(&sim, CKS_ACCOUNT, "listZones", &[], None).await;
    assert_refused(&raw, &refusal(&sim, CKS_ACCOUNT, "listZones"));
    let project = [("projectid", SMALL_PROJECT_ID)];
    let raw = get(&sim, CKS_ACCOUNT, "listVirtualMachines", &project, None).await;
    assert_eq!(raw.status, 200, "{}", raw.text);
    assert_eq!(raw.json()["listvirtualmachinesresponse"]["count"], 3);
}
