//! Front-proxy authentication, as the framework's request-header authenticator
//! (`k8s.io/apiserver/pkg/authentication/request/headerrequest`): on a connection whose
//! client certificate a `--requestheader-client-ca-file` authority signed (with a
//! CommonName in `--requestheader-allowed-names`, when given), the user is the first
//! non-empty `--requestheader-username-headers` value (default `X-Remote-User`), its
//! groups every value of `--requestheader-group-headers` (`X-Remote-Group`), and its extra
//! attributes the headers starting with `--requestheader-extra-headers-prefix`
//! (`X-Remote-Extra-`: the rest of the name, lower case and percent-decoded, is the key).

use axum::http::{HeaderMap, HeaderName};

use super::authn::User;
use crate::cli::serving::ServingArgs;

/// The header names the front proxy's user is read from.
#[derive(Debug, Clone, Default)]
pub struct RequestHeaderNames {
    username: Vec<HeaderName>,
    group: Vec<HeaderName>,
    extra_prefixes: Vec<String>,
}

impl RequestHeaderNames {
    /// From the flags; a name that is no header name is an error naming the flag.
    pub fn from_args(args: &ServingArgs) -> Result<Self, String> {
        let names = |values: &[String], flag: &str| -> Result<Vec<HeaderName>, String> {
            values
                .iter()
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(|v| {
                    HeaderName::try_from(v).map_err(|_| format!("{flag}: {v:?} is no header name"))
                })
                .collect()
        };
        Ok(Self {
            username: names(
                &args.requestheader_username_headers,
                "--requestheader-username-headers",
            )?,
            group: names(
                &args.requestheader_group_headers,
                "--requestheader-group-headers",
            )?,
            extra_prefixes: args
                .requestheader_extra_headers_prefix
                .iter()
                .map(|p| p.trim().to_ascii_lowercase())
                .filter(|p| !p.is_empty())
                .collect(),
        })
    }

    /// The user the headers name; `None` without a user name.
    pub fn user(&self, headers: &HeaderMap) -> Option<User> {
        let name = self
            .username
            .iter()
            .flat_map(|header| headers.get_all(header))
            .filter_map(|value| value.to_str().ok())
            .find(|value| !value.is_empty())?
            .to_string();
        let mut groups: Vec<String> = self
            .group
            .iter()
            .flat_map(|header| headers.get_all(header))
            .filter_map(|value| value.to_str().ok())
            .filter(|value| !value.is_empty())
            .map(String::from)
            .collect();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        let mut user = User {
            name,
            groups,
            ..User::default()
        };
        for (header, value) in headers {
            let Some(key) = self
                .extra_prefixes
                .iter()
                .find_map(|prefix| header.as_str().strip_prefix(prefix.as_str()))
            else {
                continue;
            };
            if let Ok(value) = value.to_str()
                && !value.is_empty()
            {
                user.extra
                    .entry(percent_decode(key).to_ascii_lowercase())
                    .or_default()
                    .push(value.to_string());
            }
        }
        Some(user)
    }
}

/// `url.PathUnescape` for header-name keys (an invalid escape is kept as it is).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_comes_from_the_headers_as_headerrequest_reads_them() {
        let names = RequestHeaderNames {
            username: vec![
                HeaderName::from_static("x-remote-user"),
                HeaderName::from_static("x-user"),
            ],
            group: vec![HeaderName::from_static("x-remote-group")],
            extra_prefixes: vec!["x-remote-extra-".into()],
        };
        let mut headers = HeaderMap::new();
        assert_eq!(names.user(&headers), None, "no user name");
        headers.insert("x-remote-user", "".parse().unwrap());
        headers.insert("x-user", "alice".parse().unwrap());
        headers.append("x-remote-group", "ops".parse().unwrap());
        headers.append("x-remote-group", "dev,qa".parse().unwrap());
        headers.insert("x-remote-extra-scopes%2Fa", "read".parse().unwrap());
        let user = names.user(&headers).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["ops", "dev,qa", "system:authenticated"]);
        assert_eq!(user.extra["scopes/a"], ["read"]);
        assert_eq!(percent_decode("a%zz%41"), "a%zzA");
    }
}
