//! What the keys may call: the commands CloudStack refused to their role, and the commands
//! their `listApis` lists, so a refused command is asked once, not on every call.
//!
//! CloudStack's API access checkers (`ApiServer.checkCommandAvailable`: the dynamic role
//! checker, the project role checker) answer a command the role does not allow with 432
//! "The API [<cmd>] does not exist or is not available for the account …", before the
//! signature is verified. That answer is a fact about the keys' role: asking again gives
//! the same answer until an administrator changes the role. The client keeps it per set of
//! keys (new keys start with nothing known) and holds the command — calls fail at once with
//! [`Error::CommandUnavailable`] — until [`crate::ClientConfig::refused_command_recheck`]
//! has passed; then one call may ask again. `listApis`, where the role allows it, tells the
//! allowed commands before any is refused ([`Client::discover_api_access`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;

use tokio::time::Instant;

use crate::requests::{ListApis, Request as _};
use crate::types::ApiInfo;
use crate::version::ServerVersion;
use crate::{Client, Error, Params};

/// What one set of keys is known to be allowed and refused.
#[derive(Debug, Default)]
pub(crate) struct AccessState {
    /// The commands `listApis` listed (lower case), and when.
    listed: Option<(HashSet<String>, Instant)>,
    /// The commands refused with 432 (lower case), and when.
    refused: HashMap<String, Instant>,
}

/// The commands a client's keys may call, as far as it knows.
#[derive(Debug)]
pub(crate) struct KeyAccess {
    state: Mutex<AccessState>,
}

impl KeyAccess {
    /// Nothing known yet.
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(AccessState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, AccessState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `command` may be sent: not refused within `recheck`, and listed by a
    /// `listApis` answer younger than `recheck` (when there is one).
    pub(crate) fn may_call(&self, command: &str, recheck: std::time::Duration) -> bool {
        let name = command.to_ascii_lowercase();
        let now = Instant::now();
        let state = self.state();
        if state
            .refused
            .get(&name)
            .is_some_and(|at| now.duration_since(*at) < recheck)
        {
            return false;
        }
        match &state.listed {
            Some((listed, at)) if now.duration_since(*at) < recheck => listed.contains(&name),
            _ => true,
        }
    }

    /// Records that CloudStack refused `command`; whether it was not known refused (the
    /// first refusal, or the first after a recheck).
    pub(crate) fn record_refused(&self, command: &str, recheck: std::time::Duration) -> bool {
        let name = command.to_ascii_lowercase();
        let now = Instant::now();
        let mut state = self.state();
        let known = state
            .refused
            .get(&name)
            .is_some_and(|at| now.duration_since(*at) < recheck);
        state.refused.insert(name.clone(), now);
        if let Some((listed, _)) = &mut state.listed {
            listed.remove(&name);
        }
        !known
    }

    /// Records that CloudStack served `command`: a refusal older than this is forgotten.
    pub(crate) fn record_served(&self, command: &str) {
        let mut state = self.state();
        if !state.refused.is_empty() {
            state.refused.remove(&command.to_ascii_lowercase());
        }
    }

    /// Records the commands `listApis` listed.
    fn record_listed(&self, names: impl IntoIterator<Item = String>) {
        let listed = names
            .into_iter()
            .map(|name| name.to_ascii_lowercase())
            .collect();
        self.state().listed = Some((listed, Instant::now()));
    }

    /// The commands known refused (lower case), sorted.
    fn refused(&self, recheck: std::time::Duration) -> BTreeSet<String> {
        let now = Instant::now();
        self.state()
            .refused
            .iter()
            .filter(|(_, at)| now.duration_since(**at) < recheck)
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// The read every role that can run a cluster may call (CKS's project role included).
pub(crate) const LAST_PROBE: &str = "listVirtualMachines";

/// The cheapest read the keys' role is not known to refuse: `listCapabilities`, else one
/// VM of `listVirtualMachines` (which every role that runs a cluster may call).
pub(crate) fn probe_request(
    access: &KeyAccess,
    recheck: std::time::Duration,
) -> (&'static str, Params) {
    if access.may_call("listCapabilities", recheck) {
        ("listCapabilities", Params::new())
    } else {
        (LAST_PROBE, Params::new().set("page", 1).set("pagesize", 1))
    }
}

/// What `listApis` told of the keys' role and of the server.
#[derive(Debug, Clone, Default)]
pub struct ApiListing {
    /// The commands the role may call (names as CloudStack spells them).
    pub commands: BTreeSet<String>,
    /// The newest `since` among them: the server is at least this release.
    pub newest_since: Option<ServerVersion>,
}

impl ApiListing {
    /// The listing of these APIs.
    pub fn of(apis: &[ApiInfo]) -> ApiListing {
        ApiListing {
            commands: apis.iter().filter_map(|api| api.name.clone()).collect(),
            newest_since: apis.iter().filter_map(ApiInfo::since_version).max(),
        }
    }
}

impl Client {
    /// Whether the keys in use may call `command`, as far as the client knows: CloudStack
    /// has not refused it (432) within [`crate::ClientConfig::refused_command_recheck`],
    /// and the keys' `listApis` lists it (when it was read). A call of a command this
    /// says no to fails at once with [`Error::CommandUnavailable`].
    pub fn may_call(&self, command: &str) -> bool {
        self.live()
            .access
            .may_call(command, self.inner.config.refused_command_recheck)
    }

    /// The commands CloudStack refused to the keys in use (lower case, sorted), within the
    /// recheck interval.
    pub fn refused_commands(&self) -> BTreeSet<String> {
        self.live()
            .access
            .refused(self.inner.config.refused_command_recheck)
    }

    /// Asks `listApis` which commands the keys' role allows and remembers them, so a
    /// command the role does not list is never sent. `Ok(None)` when the role may not call
    /// `listApis` itself (432, remembered): what the keys may call is then learnt from the
    /// first refusal of each command.
    pub async fn discover_api_access(&self) -> Result<Option<ApiListing>, Error> {
        if !self.may_call(ListApis::COMMAND) {
            return Ok(None);
        }
        let live = self.live();
        let apis = match self.list_apis().await {
            Ok(apis) => apis,
            Err(error) if error.is_command_refused() => return Ok(None),
            Err(error) => return Err(error),
        };
        let listing = ApiListing::of(&apis);
        // A listing of replaced keys says nothing of the keys in use.
        if live.generation == self.live().generation {
            live.access.record_listed(listing.commands.iter().cloned());
        }
        Ok(Some(listing))
    }

    /// `listApis` without a name: every API the keys' role may call.
    pub async fn list_apis(&self) -> Result<Vec<ApiInfo>, Error> {
        const COMMAND: &str = ListApis::COMMAND;
        let inner = self.call(COMMAND, ListApis::default().to_params()).await?;
        let (items, _) = crate::envelope::list_page(COMMAND, inner, "api")?;
        items
            .into_iter()
            .map(|item| {
                serde_json::from_value(item).map_err(|e| Error::Decode {
                    command: COMMAND.to_owned(),
                    detail: format!("api: {e}"),
                })
            })
            .collect()
    }

    /// The server version the root element of an XML reply shows (`cloud-stack-version`),
    /// read with one cheap call the keys' role allows (the probe's read). `Ok(None)` when
    /// the server hides it (`expose.cloudstack.version.api.xml.response=false`) or it does
    /// not parse. For servers that hide `cloudstackversion` from `listCapabilities` or
    /// roles that may not call it.
    pub async fn server_version_from_xml(&self) -> Result<Option<ServerVersion>, Error> {
        let recheck = self.inner.config.refused_command_recheck;
        let (command, params) = probe_request(&self.live().access, recheck);
        let version = self
            .call_decoded(command, params.set("response", "xml"), &|status, body| {
                decode_xml_reply(command, status, body)
            })
            .await?;
        Ok(version.and_then(|text| text.parse().ok()))
    }

    /// What a reply of `command` to keys of generation `generation` says about their role:
    /// a refusal is remembered (and reported once to the observer), a success forgets an
    /// old refusal.
    pub(crate) fn judge_access<R>(
        &self,
        command: &str,
        access: &KeyAccess,
        result: &Result<R, Error>,
    ) {
        let recheck = self.inner.config.refused_command_recheck;
        match result {
            Ok(_) => access.record_served(command),
            Err(error @ Error::Api { .. }) if error.is_command_refused() => {
                // A project's 432 refuses the project, not the command.
                if !error.is_project_refused()
                    && access.record_refused(command, recheck)
                    && let Some(observer) = &self.inner.config.observer
                {
                    observer.on_command_refused(command, error.text().unwrap_or(""));
                }
            }
            Err(_) => {}
        }
    }
}

/// The version attribute of a successful XML reply, or the error an XML error reply holds.
fn decode_xml_reply(command: &str, status: u16, body: &[u8]) -> Result<Option<String>, Error> {
    let text = String::from_utf8_lossy(body);
    if (200..300).contains(&status) {
        return Ok(xml_version_attribute(&text).map(str::to_owned));
    }
    let element = |name: &str| {
        let open = format!("<{name}>");
        let at = text.find(&open)? + open.len();
        let length = text[at..].find('<')?;
        Some(text[at..at + length].to_owned())
    };
    let code = |name: &str| element(name).and_then(|value| value.trim().parse().ok());
    Err(Error::Api {
        command: command.to_owned(),
        http_status: status,
        errorcode: code("errorcode").unwrap_or(u32::from(status)),
        cserrorcode: code("cserrorcode"),
        errortext: element("errortext")
            .unwrap_or_else(|| format!("HTTP {status} without a CloudStack error body")),
    })
}

/// A held call's error.
pub(crate) fn unavailable(command: &str) -> Error {
    Error::CommandUnavailable {
        command: command.to_owned(),
    }
}

/// Finds `cloud-stack-version="…"` on the root element of an XML reply
/// (`ApiResponseSerializer.toXMLSerializedString` writes it for authenticated callers while
/// `expose.cloudstack.version.api.xml.response` is true).
pub(crate) fn xml_version_attribute(body: &str) -> Option<&str> {
    // The root element is the first one after the XML declaration.
    let start = body
        .match_indices('<')
        .map(|(at, _)| at)
        .find(|at| !body[*at..].starts_with("<?"))?;
    let end = start + body[start..].find('>')?;
    let root = &body[start..end];
    let at = root.find("cloud-stack-version=\"")? + "cloud-stack-version=\"".len();
    let value = &root[at..];
    Some(&value[..value.find('"')?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const RECHECK: Duration = Duration::from_secs(60);

    #[tokio::test(start_paused = true)]
    async fn a_refusal_holds_the_command_until_the_recheck() {
        let access = KeyAccess::new();
        assert!(access.may_call("createTags", RECHECK));
        assert!(
            access.record_refused("createTags", RECHECK),
            "first refusal"
        );
        assert!(!access.record_refused("CREATETAGS", RECHECK), "said once");
        assert!(!access.may_call("createtags", RECHECK));
        assert!(access.may_call("listTags", RECHECK));
        tokio::time::advance(RECHECK).await;
        assert!(
            access.may_call("createTags", RECHECK),
            "asked again after the recheck"
        );
        assert!(
            access.record_refused("createTags", RECHECK),
            "a new refusal is said"
        );
        access.record_served("createTags");
        assert!(access.may_call("createTags", RECHECK));
    }

    #[tokio::test(start_paused = true)]
    async fn a_listing_decides_until_it_is_old() {
        let access = KeyAccess::new();
        access.record_listed(["listVirtualMachines".to_owned(), "createTags".to_owned()]);
        assert!(access.may_call("listvirtualmachines", RECHECK));
        assert!(!access.may_call("listSslCerts", RECHECK));
        access.record_refused("createTags", RECHECK);
        tokio::time::advance(RECHECK).await;
        assert!(
            access.may_call("listSslCerts", RECHECK),
            "an old listing no longer decides"
        );
    }

    #[test]
    fn the_listing_keeps_the_newest_since() {
        let api = |name: &str, since: Option<&str>| ApiInfo {
            name: Some(name.into()),
            since: since.map(str::to_owned),
            isasync: Some(false),
        };
        let listing = ApiListing::of(&[
            api("listVirtualMachines", None),
            api("listRoutingFirewallRules", Some("4.20.0")),
            api("listSslCerts", Some("4.2.0")),
            api("odd", Some("")),
        ]);
        assert_eq!(listing.commands.len(), 4);
        assert_eq!(
            listing.newest_since.map(|v| v.to_string()),
            Some("4.20.0".to_owned())
        );
    }

    #[test]
    fn the_version_attribute_of_the_root_element() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?><listnetworksresponse cloud-stack-version="4.22.0.0"><count>1</count></listnetworksresponse>"#;
        assert_eq!(xml_version_attribute(body), Some("4.22.0.0"));
        let hidden = r#"<?xml version="1.0" encoding="UTF-8"?><listnetworksresponse><x cloud-stack-version="9"/></listnetworksresponse>"#;
        assert_eq!(xml_version_attribute(hidden), None, "only the root's");
    }

    #[test]
    fn an_xml_error_reply_keeps_code_and_text() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?><errorresponse><errorcode>432</errorcode><cserrorcode>9999</cserrorcode><errortext>The API [listNetworks] does not exist or is not available for the account for user id [u].</errortext></errorresponse>"#;
        let error = decode_xml_reply("listNetworks", 432, body).unwrap_err();
        assert!(error.is_command_refused(), "{error}");
        assert_eq!(error.code(), Some(432));
    }
}
