//! The error type of every client call.

use std::time::Duration;

/// CloudStack error code for a missing or invalid parameter (`PARAM_ERROR`).
pub const PARAM_ERROR: u32 = 431;
/// CloudStack error code for the per-account API rate limit (`API_LIMIT_EXCEED`).
pub const API_LIMIT_EXCEEDED: u32 = 429;
/// CloudStack error code for conflicting network rules (`NETWORK_RULE_CONFLICT_ERROR`).
pub const NETWORK_RULE_CONFLICT: u32 = 537;
/// CloudStack error code for a command the caller may not call (`UNSUPPORTED_ACTION_ERROR`):
/// the key's role refuses it, or the key is not a member of the `projectid` sent.
pub const UNSUPPORTED_ACTION: u32 = 432;

/// Everything a CloudStack call can fail with. `Display` names the command and the error
/// text; no variant ever carries the API key, the secret key or the request signature.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error envelope (or a non-2xx status without one).
    #[error("{command}: CloudStack error {errorcode} (HTTP {http_status}{}): {errortext}", cs_suffix(*.cserrorcode))]
    Api {
        /// The command that failed (e.g. `createLoadBalancerRule`).
        command: String,
        /// The HTTP status of the reply.
        http_status: u16,
        /// CloudStack `errorcode` (equals the HTTP status for envelopes; the status itself
        /// when the body was not an envelope).
        errorcode: u32,
        /// CloudStack `cserrorcode` (exception class code), when present.
        cserrorcode: Option<u32>,
        /// CloudStack `errortext` (or a short description of a non-envelope reply).
        errortext: String,
    },
    /// An async job finished with `jobstatus` 2.
    #[error("{command}: async job {jobid} failed with error {errorcode}: {errortext}")]
    JobFailed {
        /// The command that started the job.
        command: String,
        /// The job id.
        jobid: String,
        /// The job's error code (`jobresult.errorcode`, else `jobresultcode`).
        errorcode: u32,
        /// The job's `errortext`.
        errortext: String,
    },
    /// An async job did not finish within the configured job timeout.
    #[error("{command}: async job {jobid} did not finish within {timeout:?}")]
    JobTimeout {
        /// The command that started the job.
        command: String,
        /// The job id.
        jobid: String,
        /// How long the client waited.
        timeout: Duration,
    },
    /// The request did not get an HTTP reply (connection refused, timeout, TLS failure …).
    #[error("{command}: transport error: {source}")]
    Transport {
        /// The command being sent.
        command: String,
        /// The underlying error, stripped of the request URL (which holds the API key).
        #[source]
        source: reqwest::Error,
    },
    /// TLS to the endpoint failed: the server's certificate is not trusted, has expired,
    /// names another host, or the handshake failed. Not retried: it fails the same way until
    /// the configuration (`ca_file`) or the server changes.
    #[error(
        "{command}: TLS to {url} failed: {detail} (the certificate must be for the host of the \
         cloud-config api-url, and ca-file must hold the CA that signed it or the certificate itself)"
    )]
    Certificate {
        /// The command being sent.
        command: String,
        /// The API endpoint (it holds no key: keys travel in the query of each request).
        url: String,
        /// What rustls reported.
        detail: String,
    },
    /// The reply could not be understood (not JSON, missing envelope, unexpected shape).
    #[error("{command}: cannot decode the response: {detail}")]
    Decode {
        /// The command whose reply was bad.
        command: String,
        /// What was wrong.
        detail: String,
    },
    /// CloudStack refused the client's keys (401 "unable to verify user credentials and/or
    /// request signature"), on this call or an earlier one: until a probe passes or new keys
    /// are adopted, calls are not sent (see [`crate::Client`]). Not retried.
    #[error(
        "{command}: CloudStack refused the credentials (HTTP 401: the api-key / secret-key are not accepted)"
    )]
    CredentialsRefused {
        /// The command that was refused or held.
        command: String,
        /// The server's reply when this call met the refusal itself (the 401 API error);
        /// `None` for a call held without being sent.
        #[source]
        reply: Option<Box<Error>>,
    },
    /// The command was not sent: CloudStack refused it to the keys in use earlier (432,
    /// their role may not call it), or the keys' `listApis` does not list it. Held until
    /// the keys change or the recheck interval ([`crate::ClientConfig::refused_command_recheck`])
    /// has passed. Not retried.
    #[error(
        "{command}: the role of the CloudStack keys may not call {command} (refused with 432, or not in listApis); not sent"
    )]
    CommandUnavailable {
        /// The command that was held.
        command: String,
    },
    /// The client configuration is invalid.
    #[error("invalid CloudStack client configuration: {0}")]
    Config(String),
}

/// The text `ApiServer.verifyRequest`'s 401 carries for keys or a signature it cannot verify.
const UNVERIFIED_CREDENTIALS: &str = "unable to verify user credentials";

/// The words every 432 of the API access checkers carries
/// (`DynamicRoleBasedAPIAccessChecker`: "The API [<cmd>] does not exist or is not available
/// for the account for user id [<uuid>]." and, from 4.23, "… for the account <name>.";
/// the project checker: "… for this account/user in project [<uuid>].").
const NOT_AVAILABLE_FOR_ACCOUNT: &str = "does not exist or is not available for";

/// The text of the 401 a project role's DENY gives (`ProjectRoleBasedApiAccessChecker`):
/// "The given command '<cmd>' either does not exist, is not available for user."
const NOT_AVAILABLE_FOR_USER: &str = "is not available for user";

/// Formats the optional `cserrorcode` for `Display`.
fn cs_suffix(cserrorcode: Option<u32>) -> String {
    cserrorcode
        .map(|code| format!(", cserrorcode {code}"))
        .unwrap_or_default()
}

impl Error {
    /// The CloudStack error code of an API error or failed job.
    pub fn code(&self) -> Option<u32> {
        match self {
            Error::Api { errorcode, .. } | Error::JobFailed { errorcode, .. } => Some(*errorcode),
            _ => None,
        }
    }

    /// The command that failed (none for a configuration error).
    pub fn command(&self) -> Option<&str> {
        match self {
            Error::Api { command, .. }
            | Error::JobFailed { command, .. }
            | Error::JobTimeout { command, .. }
            | Error::Transport { command, .. }
            | Error::Certificate { command, .. }
            | Error::Decode { command, .. }
            | Error::CredentialsRefused { command, .. }
            | Error::CommandUnavailable { command } => Some(command),
            Error::Config(_) => None,
        }
    }

    /// The error text of an API error or failed job.
    pub fn text(&self) -> Option<&str> {
        match self {
            Error::Api { errortext, .. } | Error::JobFailed { errortext, .. } => Some(errortext),
            _ => None,
        }
    }

    /// Whether the error says the referenced entity does not exist.
    ///
    /// CloudStack has no dedicated "not found" code: a UUID that matches nothing is a
    /// parameter error (431) with the text `… Invalid parameter id value=… due to incorrect
    /// long value format, or entity does not exist …`, and managers raise 431
    /// `Unable to find …` for ids that vanished. This returns true for an API error or failed
    /// job with code 431 whose text contains (case-insensitively) `does not exist` or
    /// `unable to find`. Other 431 errors (missing or malformed parameters) are not "not found".
    pub fn is_not_found(&self) -> bool {
        if self.code() != Some(PARAM_ERROR) {
            return false;
        }
        let text = self.text().unwrap_or_default().to_ascii_lowercase();
        text.contains("does not exist") || text.contains("unable to find")
    }

    /// Whether CloudStack refused the keys: an [`Error::CredentialsRefused`], or a 401
    /// whose text says the credentials or signature could not be verified (a 401 for a
    /// command the role may not call is not a refusal of the keys).
    pub fn is_refused_credentials(&self) -> bool {
        match self {
            Error::CredentialsRefused { .. } => true,
            Error::Api {
                errorcode: 401,
                errortext,
                ..
            } => errortext
                .to_ascii_lowercase()
                .contains(UNVERIFIED_CREDENTIALS),
            _ => false,
        }
    }

    /// Whether CloudStack refused the command to the keys' role (432 "does not exist or is
    /// not available for the account", a project's 432, a project role's 401 "is not
    /// available for user"), or the client held it for that reason
    /// ([`Error::CommandUnavailable`]). This is a fact about what the keys may call, not a
    /// refusal of the keys: the same keys keep working for the commands the role allows.
    /// The access checks run before the signature is verified, so such an answer says
    /// nothing about the keys either way.
    pub fn is_command_refused(&self) -> bool {
        match self {
            Error::CommandUnavailable { .. } => true,
            Error::Api {
                errorcode,
                errortext,
                ..
            } => {
                let text = errortext.to_ascii_lowercase();
                match *errorcode {
                    UNSUPPORTED_ACTION => text.contains(NOT_AVAILABLE_FOR_ACCOUNT),
                    401 => text.contains(NOT_AVAILABLE_FOR_USER),
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// Whether the refusal is the project checker's: the keys are not a member of the
    /// `projectid` sent (432 "… in project [<uuid>]."), so every command sent with that
    /// project is refused.
    pub fn is_project_refused(&self) -> bool {
        self.is_command_refused()
            && self
                .text()
                .is_some_and(|text| text.to_ascii_lowercase().contains("in project ["))
    }

    /// Whether the error is a network rule conflict (537), e.g. an overlapping port range.
    pub fn is_rule_conflict(&self) -> bool {
        self.code() == Some(NETWORK_RULE_CONFLICT)
    }

    /// Whether the server rejected the call because of its API rate limit (429).
    pub fn is_throttled(&self) -> bool {
        matches!(self, Error::Api { errorcode, .. } if *errorcode == API_LIMIT_EXCEEDED)
    }

    /// The delay the server asked for in a 429 text (`… retry after [N] ms.`, brackets
    /// optional).
    pub fn retry_after(&self) -> Option<Duration> {
        if !self.is_throttled() {
            return None;
        }
        parse_retry_after(self.text()?)
    }

    /// Whether sending the same read again may succeed: rate limiting (429), server-side
    /// failures that are not deterministic (HTTP 5xx other than CloudStack's account,
    /// capacity, allocation, in-use and rule-conflict codes 531–533 and 535–537), connection
    /// errors and timeouts. Parameter errors (4xx) are never retryable. The client retries
    /// reads and job queries on all of these and mutating commands only on 429; see
    /// [`crate::Client`].
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Api {
                http_status,
                errorcode,
                ..
            } => {
                *errorcode == API_LIMIT_EXCEEDED
                    || (*http_status >= 500 && !matches!(*errorcode, 531..=533 | 535..=537))
            }
            Error::Transport { source, .. } => {
                source.is_timeout() || source.is_connect() || source.is_request()
            }
            _ => false,
        }
    }
}

/// Parses `retry after [N] ms` or `retry after N ms` out of a rate-limit text.
pub(crate) fn parse_retry_after(text: &str) -> Option<Duration> {
    let lower = text.to_ascii_lowercase();
    let start = lower.find("retry after")? + "retry after".len();
    let rest = lower[start..].trim_start().trim_start_matches('[');
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u32, text: &str) -> Error {
        Error::Api {
            command: "deleteLoadBalancerRule".into(),
            http_status: code as u16,
            errorcode: code,
            cserrorcode: Some(4350),
            errortext: text.into(),
        }
    }

    #[test]
    fn retry_after_with_and_without_brackets() {
        let text = "The given user has reached his/her account api limit, please retry after";
        assert_eq!(
            parse_retry_after(&format!("{text} [250] ms.")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse_retry_after(&format!("{text} 1200 ms.")),
            Some(Duration::from_millis(1200))
        );
        assert_eq!(parse_retry_after("no hint here"), None);
    }

    #[test]
    fn classification() {
        let gone = api(
            431,
            "Unable to execute API command deleteloadbalancerrule due to invalid value. Invalid parameter id value=x due to incorrect long value format, or entity does not exist or due to incorrect parameter annotation for the field in api cmd class.",
        );
        assert!(gone.is_not_found());
        assert!(!gone.is_retryable());
        assert!(
            !api(
                431,
                "Unable to execute API command x due to missing parameter id"
            )
            .is_not_found()
        );
        assert!(!api(530, "Unable to find something").is_not_found());
        assert!(api(537, "conflicts with rule").is_rule_conflict());
        assert!(!api(537, "conflicts with rule").is_retryable());
        assert!(api(429, "retry after [5] ms").is_throttled());
        assert!(api(429, "retry after [5] ms").is_retryable());
        assert!(api(530, "internal").is_retryable());
        assert!(api(503, "unavailable").is_retryable());
        assert_eq!(api(431, "x").code(), Some(431));
        let refused = api(
            401,
            "unable to verify user credentials and/or request signature",
        );
        assert!(refused.is_refused_credentials() && !refused.is_retryable());
        assert!(
            !api(
                401,
                "The given command 'expungeVirtualMachine' either does not exist, is not available for user."
            )
            .is_refused_credentials()
        );
        let role = Error::Api {
            command: "listCapabilities".into(),
            http_status: 432,
            errorcode: 432,
            cserrorcode: Some(9999),
            errortext: "The API [listCapabilities] does not exist or is not available for the account for user id [6d1c6b9e-52a4-4b8a-9d3e-1b0c2a7f0e11].".into(),
        };
        assert!(role.is_command_refused() && !role.is_refused_credentials());
        assert!(!role.is_retryable() && !role.is_project_refused());
        let wording_4_23 = api(
            432,
            "The API [createTags] does not exist or is not available for the account kubeadmin-7f3e.",
        );
        assert!(wording_4_23.is_command_refused());
        let project = api(
            432,
            "The API [listNetworks] does not exist or is not available for this account/user in project [0b0c].",
        );
        assert!(project.is_command_refused() && project.is_project_refused());
        assert!(
            api(
                401,
                "The given command 'expungeVirtualMachine' either does not exist, is not available for user."
            )
            .is_command_refused()
        );
        assert!(!api(432, "Unknown API command: listFoo").is_command_refused());
        assert!(!refused.is_command_refused());
        let held_command = Error::CommandUnavailable {
            command: "listSslCerts".into(),
        };
        assert!(held_command.is_command_refused() && !held_command.is_retryable());
        let held = Error::CredentialsRefused {
            command: "listZones".into(),
            reply: None,
        };
        assert!(held.is_refused_credentials() && !held.is_retryable());
        assert_eq!(
            held.code(),
            None,
            "not mistaken for a command the role lacks"
        );
    }

    #[test]
    fn display_names_command_and_text() {
        let text = api(537, "The range specified, 80-80, conflicts").to_string();
        assert!(
            text.starts_with("deleteLoadBalancerRule: CloudStack error 537"),
            "{text}"
        );
        assert!(text.contains("cserrorcode 4350"), "{text}");
        assert!(text.contains("conflicts"), "{text}");
    }
}
