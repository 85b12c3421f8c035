//! CloudStack's own API listing (`api/listing.json`: `listApis` of the 4.22 era, 828
//! commands with their parameter names, required flags, maps and whether they are async),
//! and the checks the server's dispatcher makes with it before a command runs.
//!
//! `ParamProcessWorker.processParameters` walks the command class's `@Parameter` fields: a
//! required one the request does not carry is a 431 "Unable to execute API command
//! `<command>` due to missing parameter `<name>`" (the command name lower-cased, as
//! `getCommandName()` without its `response` suffix gives it), before anything else the
//! command checks. A name the command does not declare is never bound: the server ignores it
//! silently and the command runs without it. The simulator ignores it too, and records it
//! in the call log ([`crate::faults::CallRecord::unknown_params`]), so a test can assert
//! that a client sent none.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::error::ApiError;

/// The listing as shipped: CloudStack's `listApis`, taken through the generated Go SDK.
const LISTING_JSON: &str = include_str!("../api/listing.json");

/// Names the servlet and `ApiServer` consume before a command's parameters are bound
/// (`ApiServlet.processRequestInContext`, `ApiServer.verifyRequest`): never a command's own.
pub const TRANSPORT_PARAMS: &[&str] = &[
    "command",
    "response",
    "apikey",
    "signature",
    "signatureversion",
    "expires",
    "sessionkey",
    "_",
];

/// One command of the listing.
#[derive(Debug, Clone, Deserialize)]
pub struct CommandListing {
    /// Every parameter name the command declares (lower case).
    pub params: Vec<String>,
    /// The required ones.
    pub required: Vec<String>,
    /// The map parameters (`name[i].field=value`).
    pub maps: Vec<String>,
    /// Whether the command answers with a job id.
    #[serde(rename = "async")]
    pub is_async: bool,
}

#[derive(Deserialize)]
struct ListingFile {
    commands: BTreeMap<String, CommandListing>,
}

/// Every command of the listing, by its case-sensitive name.
pub fn commands() -> &'static BTreeMap<String, CommandListing> {
    static LISTING: OnceLock<BTreeMap<String, CommandListing>> = OnceLock::new();
    LISTING.get_or_init(|| {
        serde_json::from_str::<ListingFile>(LISTING_JSON)
            .expect("api/listing.json is CloudStack's listing")
            .commands
    })
}

/// The listing of `command`, if CloudStack has it.
pub fn command(command: &str) -> Option<&'static CommandListing> {
    commands().get(command)
}

impl CommandListing {
    /// Whether `name` (any case) binds to a parameter of this command: a declared name, an
    /// entry `map[i].field` of a declared map, or a transport name.
    pub fn accepts(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        if TRANSPORT_PARAMS.contains(&name.as_str()) || self.params.contains(&name) {
            return true;
        }
        name.split_once('[')
            .is_some_and(|(map, _)| self.maps.iter().any(|m| m == map))
    }

    /// The names among the request's `sent` pairs that this command does not declare
    /// (sorted, once each): the server ignores them.
    pub fn unknown_names(&self, sent: &[(String, String)]) -> Vec<String> {
        let mut unknown: Vec<String> = sent
            .iter()
            .map(|(name, _)| name.to_ascii_lowercase())
            .filter(|name| !self.accepts(name))
            .collect();
        unknown.sort();
        unknown.dedup();
        unknown
    }

    /// The 431 of `ParamProcessWorker` for the first required parameter the request's
    /// `sent` pairs lack (`command` as sent, for the text). A map parameter is present when
    /// any `name[i].field` entry is (`ParamUnpackWorker` gathers them under `name`); an
    /// empty value is present (only a missing one is null).
    pub fn check_required(&self, command: &str, sent: &[(String, String)]) -> Result<(), ApiError> {
        let present = |required: &str| {
            sent.iter().any(|(name, _)| {
                let name = name.to_ascii_lowercase();
                name == required
                    || self.maps.iter().any(|m| m == required)
                        && name
                            .strip_prefix(required)
                            .is_some_and(|rest| rest.starts_with('['))
            })
        };
        match self.required.iter().find(|r| !present(r)) {
            Some(missing) => Err(ApiError::missing(command, missing)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;

    #[test]
    fn every_simulated_command_is_in_the_listing_with_its_kind() {
        for simulated in crate::commands::COMMANDS {
            let listed = command(simulated.name)
                .unwrap_or_else(|| panic!("{} is not a CloudStack command", simulated.name));
            assert_eq!(
                listed.is_async, simulated.is_async,
                "{}: async in the listing is {}",
                simulated.name, listed.is_async
            );
        }
        assert!(commands().len() > 800);
    }

    #[test]
    fn a_missing_required_parameter_is_the_dispatchers_431() {
        let assign = command("assignCertToLoadBalancer").unwrap();
        let sent = Params::from_pairs(&[
            ("command", "assignCertToLoadBalancer"),
            ("lbid", "x"),
            ("certid", "y"),
        ]);
        let error = assign.check_required(&sent.command, &sent.raw).unwrap_err();
        assert_eq!(error.code, 431);
        assert_eq!(
            error.text,
            "Unable to execute API command assigncerttoloadbalancer due to missing parameter lbruleid"
        );
        assert_eq!(assign.unknown_names(&sent.raw), vec!["lbid".to_owned()]);

        let tags = command("createTags").unwrap();
        let with_map = Params::from_pairs(&[
            ("command", "createTags"),
            ("resourceids", "r"),
            ("resourcetype", "LoadBalancer"),
            ("tags[0].key", "k"),
            ("tags[0].value", "v"),
            ("apiKey", "k"),
            ("signature", "s"),
        ]);
        assert!(
            tags.check_required(&with_map.command, &with_map.raw)
                .is_ok()
        );
        assert!(tags.unknown_names(&with_map.raw).is_empty());
        let without_map = Params::from_pairs(&[
            ("command", "createTags"),
            ("resourceids", "r"),
            ("resourcetype", "LoadBalancer"),
            ("tagsx", "k"),
        ]);
        assert!(
            tags.check_required(&without_map.command, &without_map.raw)
                .unwrap_err()
                .text
                .ends_with("missing parameter tags")
        );
    }
}
