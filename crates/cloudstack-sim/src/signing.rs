//! Request signature verification, an independent re-implementation of the server's
//! `ApiServer.verifyRequest` (API.md §1.2 and §1.4).

use crate::version::Version;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

/// Encodes a value like Java's `URLEncoder.encode(v, "UTF-8")` followed by `+` → `%20`.
pub fn java_url_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(byte as char)
            }
            b' ' => out.push_str("%20"),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The lower-cased string the server signs: names sorted as sent (UTF-16 order), the
/// `signature` parameter skipped, the first value of each name, values Java-URL-encoded.
pub fn canonical_string(raw: &[(String, String)]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for (name, _) in raw {
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    names.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    let pairs: Vec<String> = names
        .into_iter()
        .filter(|n| !n.eq_ignore_ascii_case("signature"))
        .map(|name| {
            let value = raw
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .unwrap_or_default();
            format!("{name}={}", java_url_encode(value))
        })
        .collect();
    pairs.join("&").to_lowercase()
}

/// Base64 of HMAC-SHA1 over `canonical` keyed with `secret`.
pub fn compute_signature(canonical: &str, secret: &str) -> String {
    let mut mac = <Hmac<Sha1> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC accepts any key length");
    mac.update(canonical.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Exact comparison in constant time over the common length.
fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Verifies the signature of a request against the account's secret; `now` is the current time.
/// Returns false for every reason the server folds into the 401 answer.
pub fn verify(
    raw: &[(String, String)],
    secret: &str,
    version: &Version,
    now: jiff::Timestamp,
) -> bool {
    let get = |name: &str| {
        raw.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let Some(signature) = get("signature") else {
        return false;
    };
    if get("signatureversion") == Some("3") {
        let Some(expires) = get("expires").and_then(|e| parse_expires(e, version)) else {
            return false;
        };
        if expires < now {
            return false;
        }
    }
    same_text(
        signature,
        &compute_signature(&canonical_string(raw), secret),
    )
}

/// Parses `expires` with the formats the emulated version accepts (§1.4). Servers before
/// 4.19 accept only `yyyy-MM-dd'T'HH:mm:ssZ` (`+0100`); newer ones also ISO-8601 variants.
pub fn parse_expires(text: &str, version: &Version) -> Option<jiff::Timestamp> {
    let numeric_offset = |s: &str| {
        jiff::fmt::strtime::parse("%Y-%m-%dT%H:%M:%S%z", s)
            .ok()
            .and_then(|t| t.to_timestamp().ok())
    };
    if has_basic_offset(text) {
        return numeric_offset(text);
    }
    if !version.at_least(4, 19) {
        return None;
    }
    // Legacy `yyyy-MM-dd'T'HH:mm:ss'Z'Z`, e.g. `2030-01-01T00:00:00Z+0000`.
    if let Some((stamp, offset)) = text
        .split_once('Z')
        .filter(|(_, offset)| !offset.is_empty())
    {
        let joined = format!("{stamp}{offset}");
        return if has_basic_offset(&joined) {
            numeric_offset(&joined)
        } else {
            None
        };
    }
    text.parse::<jiff::Timestamp>().ok()
}

/// True for `yyyy-MM-ddTHH:mm:ss±hhmm` (the format every version accepts).
fn has_basic_offset(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 24
        && matches!(bytes[19], b'+' | b'-')
        && bytes[20..].iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const SECRET: &str = "TestSecret-XyZ_987";

    #[test]
    fn vector_a() {
        let raw = pairs(&[
            ("apiKey", "TESTAPIKEY-abc_123"),
            ("command", "listZones"),
            ("response", "json"),
        ]);
        assert_eq!(
            canonical_string(&raw),
            "apikey=testapikey-abc_123&command=listzones&response=json"
        );
        assert_eq!(
            compute_signature(&canonical_string(&raw), SECRET),
            "r/Wu6dNRajeKdyjRwb5hoyXhnzU="
        );
    }

    #[test]
    fn vector_b_and_expiry() {
        let mut raw = pairs(&[
            ("apiKey", "TESTAPIKEY-abc_123"),
            ("command", "listVirtualMachines"),
            ("response", "json"),
            ("details", "min,nics"),
            ("listall", "true"),
            ("signatureVersion", "3"),
            ("expires", "2030-01-01T00:00:00+0000"),
        ]);
        assert_eq!(
            canonical_string(&raw),
            "apikey=testapikey-abc_123&command=listvirtualmachines&details=min%2cnics&expires=2030-01-01t00%3a00%3a00%2b0000&listall=true&response=json&signatureversion=3"
        );
        raw.push(("signature".into(), "1Xwv6AQ2ZUk+9X9DocJdirDyarA=".into()));
        let v = Version::default();
        let before: jiff::Timestamp = "2029-12-31T00:00:00Z".parse().unwrap();
        let after: jiff::Timestamp = "2030-01-02T00:00:00Z".parse().unwrap();
        assert!(verify(&raw, SECRET, &v, before));
        assert!(
            !verify(&raw, SECRET, &v, after),
            "expired request must fail"
        );
        assert!(!verify(&raw, "wrong", &v, before));
    }

    #[test]
    fn vector_c_encodes_tilde_and_reserved_characters() {
        let raw = pairs(&[
            ("apikey", "TESTAPIKEY-abc_123"),
            ("command", "createLoadBalancerRule"),
            ("response", "json"),
            ("name", "a1b2c3-tcp-80 x"),
            ("algorithm", "roundrobin"),
            ("privateport", "30080"),
            ("publicport", "80"),
            ("cidrlist", "10.0.0.0/8,192.168.1.0/24"),
            ("protocol", "tcp-proxy"),
            ("description", "k8s svc ns/name ~*+:;'!()"),
            ("signatureversion", "3"),
            ("expires", "2030-01-01T00:00:00+0000"),
        ]);
        assert_eq!(
            canonical_string(&raw),
            "algorithm=roundrobin&apikey=testapikey-abc_123&cidrlist=10.0.0.0%2f8%2c192.168.1.0%2f24&command=createloadbalancerrule&description=k8s%20svc%20ns%2fname%20%7e*%2b%3a%3b%27%21%28%29&expires=2030-01-01t00%3a00%3a00%2b0000&name=a1b2c3-tcp-80%20x&privateport=30080&protocol=tcp-proxy&publicport=80&response=json&signatureversion=3"
        );
    }

    #[test]
    fn vector_d_keeps_map_names_literal() {
        let raw = pairs(&[
            ("apikey", "TESTAPIKEY-abc_123"),
            ("command", "createTags"),
            ("response", "json"),
            ("resourceids", "0b1d2c3e-0000-4000-8000-000000000001"),
            ("resourcetype", "LoadBalancer"),
            ("tags[0].key", "cloudstack-ccm/cluster"),
            ("tags[0].value", "kubernetes"),
            ("signatureversion", "3"),
            ("expires", "2030-01-01T00:00:00+0000"),
        ]);
        assert_eq!(
            compute_signature(&canonical_string(&raw), SECRET),
            "EgAW913nwGSaTJlCNGwFpCe7Lsc="
        );
    }

    #[test]
    fn expires_formats_depend_on_version() {
        let old = Version::parse("4.18").unwrap();
        let new = Version::parse("4.22").unwrap();
        assert!(parse_expires("2030-01-01T00:00:00+0100", &old).is_some());
        assert!(parse_expires("2030-01-01T00:00:00Z", &old).is_none());
        assert!(parse_expires("2030-01-01T00:00:00Z", &new).is_some());
        assert!(parse_expires("2030-01-01T00:00:00+01:00", &new).is_some());
        assert!(parse_expires("2030-01-01T00:00:00.123456Z", &new).is_some());
        assert!(parse_expires("2030-01-01T00:00:00Z+0000", &new).is_some());
        assert!(parse_expires("tomorrow", &new).is_none());
    }
}
