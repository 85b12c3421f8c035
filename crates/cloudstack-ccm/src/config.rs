//! The `cloud-config` file (gcfg, `[Global]` section) and its environment overrides.
//!
//! Compatible with the Go `external-cloudstack` provider: the same keys, the same file,
//! with or without the `[Global]` header. New keys: `ca-file`, `version`,
//! `requests-per-second`, `job-timeout`. Environment variables (`CLOUDSTACK_API_URL`, …)
//! override the file.

pub mod gcfg;

use std::fmt;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cloudstack::Secret;
use thiserror::Error;

/// Environment variables that override file values, with the key each one overrides.
pub(crate) const ENV_OVERRIDES: &[(&str, &str)] = &[
    ("CLOUDSTACK_API_URL", "api-url"),
    ("CLOUDSTACK_API_KEY", "api-key"),
    ("CLOUDSTACK_SECRET_KEY", "secret-key"),
    ("CLOUDSTACK_PROJECT_ID", "project-id"),
    ("CLOUDSTACK_ZONE", "zone"),
    ("CLOUDSTACK_REGION", "region"),
    ("CLOUDSTACK_SSL_NO_VERIFY", "ssl-no-verify"),
];

/// Every key the `[Global]` section accepts.
pub(crate) const KEYS: &[&str] = &[
    "api-url",
    "api-key",
    "secret-key",
    "project-id",
    "zone",
    "region",
    "ssl-no-verify",
    "ca-file",
    "version",
    "requests-per-second",
    "job-timeout",
];

/// The settings read from the `cloud-config` file and the environment.
/// `Debug` never shows the keys.
#[derive(Clone, PartialEq, Eq)]
pub struct CloudConfig {
    /// `api-url`: the CloudStack API endpoint, e.g. `https://cloud.example.com/client/api`.
    pub api_url: String,
    /// `api-key`: the account's API key.
    pub api_key: Secret,
    /// `secret-key`: the account's secret key.
    pub secret_key: Secret,
    /// `project-id`: scope every call to this project.
    pub project_id: Option<String>,
    /// `zone`: the zone name the cluster runs in (informational; nodes report their own).
    pub zone: Option<String>,
    /// `region`: the value of the region label; the zone name when unset.
    pub region: Option<String>,
    /// `ssl-no-verify`: accept any TLS certificate from the API endpoint.
    pub ssl_no_verify: bool,
    /// `ca-file`: a PEM bundle of extra trusted CA certificates.
    pub ca_file: Option<PathBuf>,
    /// `version`: the CloudStack version to assume instead of asking `listCapabilities`.
    pub version: Option<String>,
    /// `requests-per-second`: a client-side limit on CloudStack API calls.
    pub requests_per_second: Option<NonZeroU32>,
    /// `job-timeout`: how long to wait for one CloudStack async job (the client's default,
    /// 10 minutes, when unset).
    pub job_timeout: Option<Duration>,
}

impl fmt::Debug for CloudConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudConfig")
            .field("api_url", &self.api_url)
            .field("api_key", &self.api_key)
            .field("secret_key", &self.secret_key)
            .field("project_id", &self.project_id)
            .field("zone", &self.zone)
            .field("region", &self.region)
            .field("ssl_no_verify", &self.ssl_no_verify)
            .field("ca_file", &self.ca_file)
            .field("version", &self.version)
            .field("requests_per_second", &self.requests_per_second)
            .field("job_timeout", &self.job_timeout)
            .finish()
    }
}

/// Where a value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A line of the cloud-config file.
    Line(usize),
    /// An environment variable.
    Env(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Line(line) => write!(f, "line {line}"),
            Origin::Env(name) => write!(f, "environment variable {name}"),
        }
    }
}

/// Why the cloud configuration could not be loaded. Messages never contain key values.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read cloud-config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid gcfg.
    #[error("cloud-config syntax error at {0}")]
    Syntax(#[from] gcfg::SyntaxError),
    /// A section other than `[Global]`.
    #[error("cloud-config line {line}: unknown section [{name}] (only [Global] is supported)")]
    UnknownSection {
        /// The section as written (lower-cased, with its subsection).
        name: String,
        /// 1-based line of its header.
        line: usize,
    },
    /// A key that is not one of `KEYS`.
    #[error("cloud-config line {line}: unknown key {key:?} in [Global] (known keys: {known})", known = KEYS.join(", "))]
    UnknownKey {
        /// The key (lower-cased).
        key: String,
        /// 1-based line.
        line: usize,
    },
    /// A value that does not fit its key.
    #[error("cloud-config {origin}: invalid {key}: {reason}")]
    InvalidValue {
        /// The key.
        key: &'static str,
        /// Where the value came from.
        origin: Origin,
        /// What is wrong with it.
        reason: String,
    },
    /// A required key has no value.
    #[error("cloud-config: required key {key} is missing from [Global] (or set {env})")]
    MissingKey {
        /// The key.
        key: &'static str,
        /// The environment variable that could provide it.
        env: &'static str,
    },
}

/// Values collected so far; `None` means unset.
#[derive(Default)]
struct Values {
    api_url: Option<String>,
    api_key: Option<Secret>,
    secret_key: Option<Secret>,
    project_id: Option<String>,
    zone: Option<String>,
    region: Option<String>,
    ssl_no_verify: Option<bool>,
    ca_file: Option<PathBuf>,
    version: Option<String>,
    requests_per_second: Option<NonZeroU32>,
    job_timeout: Option<Duration>,
}

impl Values {
    /// Sets `key` from `raw` (`None` = bare key). `key` must be one of [`KEYS`].
    fn set(&mut self, key: &str, raw: Option<&str>, origin: Origin) -> Result<(), ConfigError> {
        let known = KEYS.iter().copied().find(|k| *k == key);
        let Some(key) = known else {
            let line = match origin {
                Origin::Line(line) => line,
                Origin::Env(_) => 0,
            };
            return Err(ConfigError::UnknownKey {
                key: key.to_owned(),
                line,
            });
        };
        let invalid = |reason: String| ConfigError::InvalidValue {
            key,
            origin: origin.clone(),
            reason,
        };
        if key == "ssl-no-verify" {
            self.ssl_no_verify = Some(match raw {
                None => true,
                Some(text) => parse_bool(text).ok_or_else(|| {
                    invalid(format!(
                        "{text:?} is not a boolean (true/false, yes/no, on/off, 1/0)"
                    ))
                })?,
            });
            return Ok(());
        }
        let Some(text) = raw else {
            return Err(invalid("needs a value (`key = value`)".into()));
        };
        let text = text.to_owned();
        let optional = |text: String| (!text.is_empty()).then_some(text);
        match key {
            "api-url" => {
                if !(text.starts_with("http://") || text.starts_with("https://")) {
                    return Err(invalid(format!(
                        "{text:?} must start with http:// or https://"
                    )));
                }
                self.api_url = Some(text);
            }
            "api-key" => self.api_key = Some(Secret::new(text)),
            "secret-key" => self.secret_key = Some(Secret::new(text)),
            "project-id" => self.project_id = optional(text),
            "zone" => self.zone = optional(text),
            "region" => self.region = optional(text),
            "ca-file" => self.ca_file = optional(text).map(PathBuf::from),
            "version" => {
                let valid = !text.is_empty()
                    && text
                        .split('.')
                        .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
                if !valid {
                    return Err(invalid(format!("{text:?} is not a version like 4.19.1.0")));
                }
                self.version = Some(text);
            }
            "requests-per-second" => {
                let rate = text
                    .parse::<NonZeroU32>()
                    .map_err(|_| invalid(format!("{text:?} is not a positive whole number")))?;
                self.requests_per_second = Some(rate);
            }
            "job-timeout" => {
                let timeout = crate::cli::values::parse_duration(&text)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| {
                        invalid(format!(
                            "{text:?} is not a positive duration like 5m or 90s"
                        ))
                    })?;
                self.job_timeout = Some(timeout);
            }
            _ => unreachable!("every key of KEYS is handled"),
        }
        Ok(())
    }
}

/// Parses a gcfg boolean: `true/yes/on/1` or `false/no/off/0`, case-insensitive.
pub(crate) fn parse_bool(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

impl CloudConfig {
    /// Reads the file at `path` (if any), applies overrides from `env` (a lookup such as
    /// `|name| std::env::var(name).ok()`), and checks required keys.
    pub fn load(
        path: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let text = match path {
            Some(path) => std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?,
            None => String::new(),
        };
        Self::from_text(&text, env)
    }

    /// Parses cloud-config `text`, applies overrides from `env`, and checks required keys.
    pub fn from_text(
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut values = Values::default();
        let document = gcfg::parse_document(text)?;
        // Every header is checked, so an empty unknown section is an error too (as in the
        // Go provider's gcfg, which checks a section when it reads its header).
        for header in &document.headers {
            if header.section == "global" && header.subsection.is_none() {
                continue;
            }
            let name = match &header.subsection {
                Some(sub) => format!("{} {sub:?}", header.section),
                None => header.section.clone(),
            };
            return Err(ConfigError::UnknownSection {
                name,
                line: header.line,
            });
        }
        for entry in document.entries {
            values.set(&entry.key, entry.value.as_deref(), Origin::Line(entry.line))?;
        }
        for (name, key) in ENV_OVERRIDES {
            if let Some(value) = env(name).filter(|v| !v.is_empty()) {
                values.set(key, Some(&value), Origin::Env(name))?;
            }
        }
        let required = |key: &'static str| {
            let env = ENV_OVERRIDES
                .iter()
                .find(|(_, k)| *k == key)
                .map_or("", |(name, _)| *name);
            ConfigError::MissingKey { key, env }
        };
        let secret = |value: Option<Secret>, key| {
            value.filter(|s| !s.is_empty()).ok_or_else(|| required(key))
        };
        Ok(CloudConfig {
            api_url: values
                .api_url
                .filter(|u| !u.is_empty())
                .ok_or_else(|| required("api-url"))?,
            api_key: secret(values.api_key, "api-key")?,
            secret_key: secret(values.secret_key, "secret-key")?,
            project_id: values.project_id,
            zone: values.zone,
            region: values.region,
            ssl_no_verify: values.ssl_no_verify.unwrap_or(false),
            ca_file: values.ca_file,
            version: values.version,
            requests_per_second: values.requests_per_second,
            job_timeout: values.job_timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{CloudConfig, ConfigError};
    use std::time::Duration;

    const MINIMAL: &str =
        "[Global]\napi-url = https://cloud.example.com/client/api\napi-key = AK\nsecret-key = SK\n";

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn go_ccm_file_parses() {
        let text = "[Global]\napi-url = https://cloud.example.com/client/api\napi-key = AK\nsecret-key = SK\nproject-id = p-1\nzone = zone-a\nregion = eu\nssl-no-verify = true\n";
        let config = CloudConfig::from_text(text, no_env).unwrap();
        assert_eq!(config.api_url, "https://cloud.example.com/client/api");
        assert_eq!(config.api_key.expose(), "AK");
        assert_eq!(config.secret_key.expose(), "SK");
        assert_eq!(config.project_id.as_deref(), Some("p-1"));
        assert_eq!(config.zone.as_deref(), Some("zone-a"));
        assert_eq!(config.region.as_deref(), Some("eu"));
        assert!(config.ssl_no_verify);
    }

    #[test]
    fn file_without_global_header_parses() {
        let text = MINIMAL.trim_start_matches("[Global]\n");
        let config = CloudConfig::from_text(text, no_env).unwrap();
        assert_eq!(config.api_key.expose(), "AK");
        assert!(!config.ssl_no_verify);
    }

    #[test]
    fn new_keys_parse() {
        let text = format!(
            "{MINIMAL}ca-file = /etc/ca.pem\nversion = 4.19.1.0\nrequests-per-second = 20\njob-timeout = 2m30s\nssl-no-verify\n"
        );
        let config = CloudConfig::from_text(&text, no_env).unwrap();
        assert_eq!(
            config.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/ca.pem"))
        );
        assert_eq!(config.version.as_deref(), Some("4.19.1.0"));
        assert_eq!(config.requests_per_second.map(|r| r.get()), Some(20));
        assert_eq!(config.job_timeout, Some(Duration::from_secs(150)));
        assert!(config.ssl_no_verify, "a bare key is true");
    }

    #[test]
    fn bools_table() {
        for (text, want) in [
            ("yes", true),
            ("On", true),
            ("1", true),
            ("TRUE", true),
            ("no", false),
            ("off", false),
            ("0", false),
            ("False", false),
        ] {
            let config =
                CloudConfig::from_text(&format!("{MINIMAL}ssl-no-verify = {text}"), no_env)
                    .unwrap();
            assert_eq!(config.ssl_no_verify, want, "{text}");
        }
    }

    #[test]
    fn last_value_wins() {
        let config = CloudConfig::from_text(&format!("{MINIMAL}api-key = AK2\n"), no_env).unwrap();
        assert_eq!(config.api_key.expose(), "AK2");
    }

    #[test]
    fn env_overrides_file() {
        let env = |name: &str| match name {
            "CLOUDSTACK_API_KEY" => Some("ENVKEY".to_owned()),
            "CLOUDSTACK_REGION" => Some("r1".to_owned()),
            "CLOUDSTACK_SSL_NO_VERIFY" => Some("yes".to_owned()),
            "CLOUDSTACK_ZONE" => Some(String::new()),
            _ => None,
        };
        let config = CloudConfig::from_text(&format!("{MINIMAL}zone = z\n"), env).unwrap();
        assert_eq!(config.api_key.expose(), "ENVKEY");
        assert_eq!(config.secret_key.expose(), "SK");
        assert_eq!(config.region.as_deref(), Some("r1"));
        assert_eq!(
            config.zone.as_deref(),
            Some("z"),
            "an empty variable does not override"
        );
        assert!(config.ssl_no_verify);
    }

    #[test]
    fn env_alone_is_enough() {
        let env = |name: &str| match name {
            "CLOUDSTACK_API_URL" => Some("http://127.0.0.1:8080/client/api".to_owned()),
            "CLOUDSTACK_API_KEY" | "CLOUDSTACK_SECRET_KEY" => Some("k".to_owned()),
            _ => None,
        };
        assert!(CloudConfig::load(None, env).is_ok());
    }

    #[test]
    fn errors_name_the_problem() {
        let cases: Vec<(String, &str)> = vec![
            (
                "[Global]\napi-key = AK\nsecret-key = SK\n".into(),
                "required key api-url is missing",
            ),
            (
                "[Global]\napi-url = http://x\nsecret-key = SK\n".into(),
                "required key api-key",
            ),
            (
                "[Global]\napi-url = http://x\napi-key = AK\n".into(),
                "required key secret-key",
            ),
            (
                format!("{MINIMAL}api-secret = x\n"),
                "line 5: unknown key \"api-secret\"",
            ),
            (
                format!("{MINIMAL}[Other]\nzone = z\n"),
                "line 5: unknown section [other]",
            ),
            (
                format!("{MINIMAL}[Globl]\n"),
                "line 5: unknown section [globl]",
            ),
            (
                format!("{MINIMAL}[Global \"x\"]\nzone = z\n"),
                "unknown section [global \"x\"]",
            ),
            (
                format!("{MINIMAL}ssl-no-verify = maybe\n"),
                "line 5: invalid ssl-no-verify",
            ),
            (
                format!("{MINIMAL}requests-per-second = 0\n"),
                "invalid requests-per-second",
            ),
            (
                format!("{MINIMAL}job-timeout = soon\n"),
                "invalid job-timeout",
            ),
            (format!("{MINIMAL}version = 4.x\n"), "invalid version"),
            (format!("{MINIMAL}zone\n"), "invalid zone: needs a value"),
            (
                "[Global]\napi-url = ftp://x\n".into(),
                "line 2: invalid api-url",
            ),
            (
                format!("{MINIMAL}zone = \"open\n"),
                "syntax error at line 5: unterminated",
            ),
        ];
        for (text, fragment) in cases {
            let err = CloudConfig::from_text(&text, no_env)
                .expect_err(fragment)
                .to_string();
            assert!(err.contains(fragment), "want {fragment:?} in {err:?}");
            assert!(!err.contains('\n'), "one line: {err:?}");
        }
    }

    #[test]
    fn bad_env_value_names_the_variable() {
        let env = |name: &str| (name == "CLOUDSTACK_SSL_NO_VERIFY").then(|| "perhaps".to_owned());
        let err = CloudConfig::from_text(MINIMAL, env)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("environment variable CLOUDSTACK_SSL_NO_VERIFY"),
            "{err}"
        );
    }

    #[test]
    fn unreadable_file_names_the_path() {
        let err = CloudConfig::load(
            Some(std::path::Path::new("/nonexistent/cloud-config")),
            no_env,
        )
        .unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }));
        assert!(
            err.to_string().contains("/nonexistent/cloud-config"),
            "{err}"
        );
    }

    #[test]
    fn debug_and_errors_hide_keys() {
        let config =
            CloudConfig::from_text(MINIMAL.replace("AK", "VERYSECRET1").as_str(), no_env).unwrap();
        let debug = format!("{config:?}");
        assert!(
            !debug.contains("VERYSECRET1") && !debug.contains("SK\""),
            "{debug}"
        );
        let err =
            CloudConfig::from_text("[Global]\napi-key = VERYSECRET1 \"x\n", no_env).unwrap_err();
        assert!(!err.to_string().contains("VERYSECRET1"), "{err}");
    }
}
