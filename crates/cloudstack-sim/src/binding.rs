//! Parameter processing as `ParamProcessWorker.processParameters` does it: the command's
//! `@Parameter` fields are walked in declaration order (`BaseCmd.getParamFields`: the
//! class's own fields, then its superclasses'), and each one is either missing — a required
//! one is the 431 "missing parameter" at once — or bound there and then: a UUID that is
//! malformed or names no entity is the 431 "invalid value. Invalid parameter `<p>` value=…"
//! (`translateUuidToInternalId`), an integer that does not parse is "invalid value `<v>` for
//! parameter `<p>`" (`setFieldValue`, `Integer.valueOf`). So the first failing field in
//! declaration order decides the answer, not the first required name in alphabetical order.
//!
//! A parameter sent empty (`id=`) is present (`params.get(name)` is `""`, not null): a
//! required one is never "missing". An empty integer is skipped (`isNotBlank`); an empty
//! UUID is bound as any other value and, matching no entity, is the invalid-value 431 (the
//! simulator applies this to every UUID field: a field added after 3.x would bind null
//! instead, and the command would fail later — never more permissive).
//!
//! The declaration order is CloudStack's, read from each command class; commands not in
//! [`FIELDS`] fall back to the listing's required names (they have at most one).

use crate::error::ApiError;
use crate::listing::CommandListing;
use crate::params::is_uuid;
use crate::state::State;

/// What a field binds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `CommandType.STRING`, `BOOLEAN`, `LIST` of strings, `MAP`: bound as sent.
    Text,
    /// `CommandType.INTEGER`.
    Int,
    /// `CommandType.UUID` of a public address (`IPAddressResponse`).
    Ip,
    /// `CommandType.UUID` of a network (`NetworkResponse`).
    Network,
    /// `CommandType.UUID` of a zone (`ZoneResponse`).
    Zone,
    /// `CommandType.UUID` of a project (`ProjectResponse`).
    Project,
    /// `CommandType.UUID` of a domain (`DomainResponse`).
    Domain,
}

/// One `@Parameter` field: name, kind, required.
pub type Field = (&'static str, Kind, bool);

use Kind::{Domain, Int, Ip, Network, Project, Text, Zone};

/// The `@Parameter` fields of the commands where the order decides, in declaration order.
pub const FIELDS: &[(&str, &[Field])] = &[
    // CreateLoadBalancerRuleCmd.
    (
        "createLoadBalancerRule",
        &[
            ("algorithm", Text, true),
            ("description", Text, false),
            ("name", Text, true),
            ("privateport", Int, true),
            ("publicipid", Ip, false),
            ("zoneid", Zone, false),
            ("publicport", Int, true),
            ("openfirewall", Text, false),
            ("account", Text, false),
            ("domainid", Domain, false),
            ("cidrlist", Text, false),
            ("networkid", Network, false),
            ("protocol", Text, false),
            ("fordisplay", Text, false),
        ],
    ),
    // CreateApplicationLoadBalancerCmd.
    (
        "createLoadBalancer",
        &[
            ("name", Text, true),
            ("description", Text, false),
            ("networkid", Network, true),
            ("sourceport", Int, true),
            ("algorithm", Text, true),
            ("instanceport", Int, true),
            ("sourceipaddress", Text, false),
            ("sourceipaddressnetworkid", Network, true),
            ("scheme", Text, true),
            ("fordisplay", Text, false),
        ],
    ),
    // CreateFirewallRuleCmd.
    (
        "createFirewallRule",
        &[
            ("ipaddressid", Ip, true),
            ("protocol", Text, true),
            ("startport", Int, false),
            ("endport", Int, false),
            ("cidrlist", Text, false),
            ("icmptype", Int, false),
            ("icmpcode", Int, false),
            ("type", Text, false),
            ("fordisplay", Text, false),
        ],
    ),
    // CreateRoutingFirewallRuleCmd.
    (
        "createRoutingFirewallRule",
        &[
            ("protocol", Text, true),
            ("startport", Int, false),
            ("endport", Int, false),
            ("cidrlist", Text, false),
            ("destcidrlist", Text, false),
            ("icmptype", Int, false),
            ("icmpcode", Int, false),
            ("networkid", Network, true),
            ("traffictype", Text, false),
            ("fordisplay", Text, false),
        ],
    ),
    // CreateTagsCmd.
    (
        "createTags",
        &[
            ("tags", Text, true),
            ("resourcetype", Text, true),
            ("resourceids", Text, true),
            ("customer", Text, false),
        ],
    ),
    // DeleteTagsCmd.
    (
        "deleteTags",
        &[
            ("tags", Text, false),
            ("resourcetype", Text, true),
            ("resourceids", Text, true),
        ],
    ),
    // UploadSslCertCmd.
    (
        "uploadSslCert",
        &[
            ("certificate", Text, true),
            ("privatekey", Text, true),
            ("certchain", Text, false),
            ("password", Text, false),
            ("account", Text, false),
            ("projectid", Project, false),
            ("domainid", Domain, false),
            ("name", Text, true),
            ("enabledrevocationcheck", Text, false),
        ],
    ),
    // DisassociateIPAddrCmd (4.19+: `id` optional, `ipaddress` added).
    (
        "disassociateIpAddress",
        &[("id", Ip, false), ("ipaddress", Text, false)],
    ),
];

/// The declared fields of `command`, when the simulator knows their order.
pub fn fields(command: &str) -> Option<&'static [Field]> {
    FIELDS
        .iter()
        .find(|(name, _)| *name == command)
        .map(|(_, fields)| *fields)
}

/// The value of `name` as `ParamProcessWorker` reads it: the first one sent, any case; a
/// map is present when any `name[i].field` entry is (`ParamUnpackWorker`).
fn sent<'a>(raw: &'a [(String, String)], name: &str, is_map: bool) -> Option<&'a str> {
    raw.iter().find_map(|(n, v)| {
        let n = n.to_ascii_lowercase();
        let hit = n == name
            || is_map
                && n.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('['));
        hit.then_some(v.as_str())
    })
}

fn exists(state: &State, kind: Kind, id: &str) -> bool {
    match kind {
        Ip => state.ip(id).is_some(),
        Network => state.network(id).is_some(),
        Zone => state.zone(id).is_some(),
        Project => state.project(id).is_some(),
        Domain => state.domain_id == id,
        Text | Int => true,
    }
}

/// `ParamProcessWorker.processParameters` for one request: the first field, in declaration
/// order, that is missing (required) or fails to bind decides the 431. `command` is the name
/// as sent (the texts lower-case it).
pub fn process(
    listed: &CommandListing,
    command: &str,
    raw: &[(String, String)],
    state: &State,
) -> Result<(), ApiError> {
    let Some(fields) = fields(command) else {
        return listed.check_required(command, raw);
    };
    for &(name, kind, required) in fields {
        // The emulated version's listing decides what is required and declared.
        let required = required && listed.required.iter().any(|r| r == name);
        let is_map = listed.maps.iter().any(|m| m == name);
        let Some(value) = sent(raw, name, is_map) else {
            if required {
                return Err(ApiError::missing(command, name));
            }
            continue;
        };
        match kind {
            Text => {}
            Int => {
                if !value.trim().is_empty() && value.parse::<i32>().is_err() {
                    return Err(ApiError::invalid_value(command, name, value));
                }
            }
            _ => {
                if !is_uuid(value) || !exists(state, kind, value) {
                    return Err(ApiError::invalid_uuid(command, name, value));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;

    fn run(pairs: &[(&str, &str)]) -> Result<(), ApiError> {
        let p = Params::from_pairs(pairs);
        let listed = crate::listing::command(&p.command).unwrap();
        let state = State::from_scenario(&crate::scenario::Scenario::small()).unwrap();
        process(listed, &p.command, &p.raw, &state)
    }

    #[test]
    fn the_first_failing_field_in_declaration_order_decides() {
        // CreateLoadBalancerRuleCmd: algorithm, description, name, privateport, publicipid,
        // zoneid, publicport… — `name` is missing before `privateport` and `publicport`.
        let e = run(&[
            ("command", "createLoadBalancerRule"),
            ("algorithm", "source"),
        ])
        .unwrap_err();
        assert_eq!(
            e.text,
            "Unable to execute API command createloadbalancerrule due to missing parameter name"
        );
        // an unknown `publicipid` is bound before the missing `publicport` is reached
        let e = run(&[
            ("command", "createLoadBalancerRule"),
            ("algorithm", "source"),
            ("name", "n"),
            ("privateport", "80"),
            ("publicipid", "0b1d2c3e-0000-4000-8000-00000000dead"),
        ])
        .unwrap_err();
        assert!(
            e.text
                .contains("invalid value. Invalid parameter publicipid value=0b1d2c3e"),
            "{}",
            e.text
        );
        assert_eq!((e.code, e.cs_code), (431, Some(9999)));
        // a bad integer before a missing required parameter
        let e = run(&[
            ("command", "createLoadBalancerRule"),
            ("algorithm", "source"),
            ("name", "n"),
            ("privateport", "http"),
        ])
        .unwrap_err();
        assert!(
            e.text
                .ends_with("invalid value http for parameter privateport")
        );
        // UploadSslCertCmd declares `name` last: `privatekey` is reported first
        let e = run(&[("command", "uploadSslCert"), ("certificate", "c")]).unwrap_err();
        assert!(
            e.text.ends_with("missing parameter privatekey"),
            "{}",
            e.text
        );
    }

    #[test]
    fn an_empty_value_is_present() {
        // CreateFirewallRuleCmd: an empty `ipaddressid` is bound (and names no address),
        // it is not "missing"; an empty integer is skipped.
        let e = run(&[
            ("command", "createFirewallRule"),
            ("ipaddressid", ""),
            ("protocol", "tcp"),
        ])
        .unwrap_err();
        assert!(
            e.text
                .contains("Invalid parameter ipaddressid value= due to"),
            "{}",
            e.text
        );
        let e = run(&[
            ("command", "createTags"),
            ("tags[0].key", "k"),
            ("resourcetype", ""),
        ])
        .unwrap_err();
        assert!(
            e.text.ends_with("missing parameter resourceids"),
            "{}",
            e.text
        );
        let e = run(&[
            ("command", "createLoadBalancerRule"),
            ("algorithm", "source"),
            ("name", "n"),
            ("privateport", ""),
        ])
        .unwrap_err();
        assert!(
            e.text.ends_with("missing parameter publicport"),
            "{}",
            e.text
        );
    }

    #[test]
    fn every_ordered_command_matches_the_listing() {
        for (command, fields) in FIELDS {
            let listed = crate::listing::command(command).unwrap();
            let mut names: Vec<&str> = fields.iter().map(|f| f.0).collect();
            names.sort_unstable();
            let mut declared: Vec<&str> = listed.params.iter().map(String::as_str).collect();
            declared.sort_unstable();
            assert_eq!(names, declared, "{command}");
            for required in &listed.required {
                assert!(
                    fields.iter().any(|f| f.0 == required && f.2),
                    "{command}: {required}"
                );
            }
        }
    }
}
