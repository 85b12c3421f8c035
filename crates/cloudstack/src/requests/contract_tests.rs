//! The client's side of CloudStack's contract: every request type, checked against
//! CloudStack's own API listing (`listApis`, kept in the simulator's `api/listing.json`).
//! A request with a parameter name the command does not declare (the server would ignore it
//! silently) or a required parameter it can leave out (a 431) fails here.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::*;
use crate::command::{PROJECT_SCOPED, is_read};

#[derive(Deserialize)]
struct Listed {
    params: Vec<String>,
    required: Vec<String>,
    maps: Vec<String>,
}

#[derive(Deserialize)]
struct ListingFile {
    commands: BTreeMap<String, Listed>,
}

fn listing() -> BTreeMap<String, Listed> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../cloudstack-sim/api/listing.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str::<ListingFile>(&text)
        .expect("CloudStack's listing parses")
        .commands
}

/// Commands the client sends without `page`/`pagesize` (one call, no pages): CloudStack's
/// `listSslCerts`, `listCapabilities` and `listApis` are `BaseCmd`s, not `BaseListCmd`s.
const UNPAGED_READS: &[&str] = &[
    "listSslCerts",
    "listCapabilities",
    "listApis",
    "queryAsyncJobResult",
];

/// Required list or map parameters the client's methods never send empty: the request
/// type holds a `Vec`, and its one caller always fills it. Each entry names the caller.
const REQUIRED_LISTS_ALWAYS_FILLED: &[(&str, &str)] = &[
    // `Client::create_tags`' callers build the resource ids and the ownership tags together
    // (`cloud::tags` in the controller); an empty request is refused before it is sent.
    ("createTags", "resourceids"),
    ("createTags", "tags"),
    ("deleteTags", "resourceids"),
];

/// What is wrong with request type `R` against `listing` (empty when nothing is).
fn problems_of<R: Request>(listing: &BTreeMap<String, Listed>) -> Vec<String> {
    let command = R::COMMAND;
    let Some(listed) = listing.get(command) else {
        return vec![format!("{command}: not a CloudStack command")];
    };
    let mut problems = Vec::new();
    let shapes = R::parameters();
    for shape in &shapes {
        if !listed.params.iter().any(|p| p == shape.name) {
            problems.push(format!(
                "{command}: sends `{}`, which the command does not declare",
                shape.name
            ));
        } else if shape.is_map != listed.maps.iter().any(|m| m == shape.name) {
            problems.push(format!(
                "{command}: `{}` is {} here and {} in the listing",
                shape.name,
                if shape.is_map { "a map" } else { "not a map" },
                if shape.is_map { "not a map" } else { "a map" },
            ));
        }
    }
    for required in &listed.required {
        let sent = shapes.iter().find(|s| s.name == required);
        let always = sent.is_some_and(|s| {
            s.always_sent || REQUIRED_LISTS_ALWAYS_FILLED.contains(&(command, required.as_str()))
        });
        if !always {
            problems.push(format!(
                "{command}: the required `{required}` is {}",
                if sent.is_some() {
                    "optional here"
                } else {
                    "never sent"
                }
            ));
        }
    }
    let paged = is_read(command) && !UNPAGED_READS.contains(&command);
    for added in ["page", "pagesize"] {
        if paged && !listed.params.iter().any(|p| p == added) {
            problems.push(format!("{command}: paged, but takes no `{added}`"));
        }
    }
    if PROJECT_SCOPED.contains(&command) && !listed.params.iter().any(|p| p == "projectid") {
        problems.push(format!("{command}: gets `projectid` added, but takes none"));
    }
    problems
}

/// Checks every request type of the client; returns the commands checked and the problems.
fn check_all(listing: &BTreeMap<String, Listed>) -> (BTreeSet<&'static str>, Vec<String>) {
    let mut checked = BTreeSet::new();
    let mut problems = Vec::new();
    macro_rules! check {
        ($($request:ty),* $(,)?) => {$(
            checked.insert(<$request as Request>::COMMAND);
            problems.extend(problems_of::<$request>(listing));
        )*};
    }
    check!(
        ListPublicIpAddresses,
        AssociateIpAddress,
        DisassociateIpAddress,
        UploadSslCert,
        ListSslCerts,
        DeleteSslCert,
        AssignCertToLoadBalancer,
        RemoveCertFromLoadBalancer,
        ListLoadBalancerRules,
        CreateLoadBalancerRule,
        UpdateLoadBalancerRule,
        DeleteLoadBalancerRule,
        CreateLoadBalancer,
        ListLoadBalancers,
        DeleteLoadBalancer,
        AssignToLoadBalancerRule,
        RemoveFromLoadBalancerRule,
        ListLoadBalancerRuleInstances,
        ListVirtualMachines,
        ListZones,
        ListNetworks,
        ListProjects,
        CreateLbHealthCheckPolicy,
        ListLbHealthCheckPolicies,
        DeleteLbHealthCheckPolicy,
        CreateLbStickinessPolicy,
        ListLbStickinessPolicies,
        DeleteLbStickinessPolicy,
        ListStaticRoutes,
        CreateStaticRoute,
        DeleteStaticRoute,
        ListFirewallRules,
        CreateFirewallRule,
        DeleteFirewallRule,
        ListNetworkAclLists,
        ListNetworkAcls,
        CreateNetworkAcl,
        DeleteNetworkAcl,
        CreateRoutingFirewallRule,
        ListRoutingFirewallRules,
        DeleteRoutingFirewallRule,
        ListAsyncJobs,
        ListCapabilities,
        QueryAsyncJobResult,
        ListAccounts,
        ListApis,
        CreateTags,
        DeleteTags,
        ListTags,
    );
    (checked, problems)
}

/// The commands of every `request!` in `src/requests/`, read from the source: a request
/// type added there and not to [`check_all`] fails [`every_request_type_is_checked`].
fn declared_commands() -> BTreeSet<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/requests");
    let mut commands = BTreeSet::new();
    for entry in std::fs::read_dir(dir).expect("src/requests") {
        let path = entry.expect("a directory entry").path();
        let text = std::fs::read_to_string(&path).expect("a source file");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("request! {") {
            rest = &rest[at + 1..];
            let declaration = rest.split_once("=> \"").map(|(_, after)| after);
            if let Some(name) = declaration.and_then(|after| after.split_once('"')) {
                commands.insert(name.0.to_owned());
            }
        }
    }
    commands
}

#[test]
fn every_request_type_meets_cloudstacks_listing() {
    let (_, problems) = check_all(&listing());
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn every_request_type_is_checked() {
    let (checked, _) = check_all(&listing());
    let checked: BTreeSet<String> = checked.into_iter().map(str::to_owned).collect();
    // The macro's own definition and doc example are not requests.
    let declared = declared_commands();
    assert_eq!(
        declared, checked,
        "every request type in src/requests is in check_all"
    );
    // Every command the client adds `projectid` to is one of its request types.
    for scoped in PROJECT_SCOPED {
        assert!(checked.contains(*scoped), "{scoped}");
    }
}

super::request! {
    /// A request as it was sent before the listing bound the client: the rule as `lbid`.
    WrongRuleName => "assignCertToLoadBalancer" {
        lbid: String,
        certid: String,
    }
}

super::request! {
    /// A request that may leave out a required parameter.
    OptionalRequired => "removeCertFromLoadBalancer" {
        lbruleid: Option<String>,
    }
}

#[test]
fn a_wrong_name_or_a_forgotten_required_parameter_is_found() {
    let listing = listing();
    assert_eq!(
        problems_of::<WrongRuleName>(&listing),
        vec![
            "assignCertToLoadBalancer: sends `lbid`, which the command does not declare",
            "assignCertToLoadBalancer: the required `lbruleid` is never sent",
        ]
    );
    assert_eq!(
        problems_of::<OptionalRequired>(&listing),
        vec!["removeCertFromLoadBalancer: the required `lbruleid` is optional here"]
    );
}
