//! One parse function per kind of value, each naming the annotation in its error.

use super::*;

/// Parses a bool the way Go's `strconv.ParseBool` does (the Go CCM's annotations).
pub(crate) fn parse_bool(key: &str, value: &str) -> Result<bool, AnnotationError> {
    match value.trim() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(AnnotationError::new(key, value, "expected true or false")),
    }
}

/// Parses a DNS hostname (RFC 1123 labels, at most 253 characters).
pub(crate) fn parse_hostname(key: &str, value: &str) -> Result<String, AnnotationError> {
    let host = value.trim();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) {
        return Err(AnnotationError::new(key, value, "expected a DNS hostname"));
    }
    Ok(host.to_ascii_lowercase())
}

/// Parses an IPv4 or IPv6 address.
pub(crate) fn parse_ip(key: &str, value: &str) -> Result<IpAddr, AnnotationError> {
    value
        .trim()
        .parse()
        .map_err(|_| AnnotationError::new(key, value, "expected an IP address"))
}

/// Parses a comma-separated CIDR list; spaces around entries and empty entries are
/// ignored, every other entry must be a CIDR or an address.
pub(crate) fn parse_cidr_list(key: &str, value: &str) -> Result<Vec<Cidr>, AnnotationError> {
    let mut out = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let cidr = Cidr::parse(entry)
            .ok_or_else(|| AnnotationError::new(key, value, format!("{entry:?} is not a CIDR")))?;
        if !out.contains(&cidr) {
            out.push(cidr);
        }
    }
    Ok(out)
}

/// Parses a load-balancing algorithm.
pub(crate) fn parse_algorithm(key: &str, value: &str) -> Result<Algorithm, AnnotationError> {
    Algorithm::parse(value)
        .ok_or_else(|| AnnotationError::new(key, value, "expected roundrobin, leastconn or source"))
}

/// Parses a whole number within `min..=max`.
pub(crate) fn parse_in_range(
    key: &str,
    value: &str,
    min: u32,
    max: u32,
) -> Result<u32, AnnotationError> {
    let out_of_range = || {
        AnnotationError::new(
            key,
            value,
            format!("expected a whole number from {min} to {max}"),
        )
    };
    let text = value.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(out_of_range());
    }
    let n: u32 = text.parse().map_err(|_| out_of_range())?;
    if n < min || n > max {
        return Err(out_of_range());
    }
    Ok(n)
}

/// Parses an HTTP path: starts with `/`, printable ASCII, no spaces.
pub(crate) fn parse_http_path(key: &str, value: &str) -> Result<String, AnnotationError> {
    let path = value.trim();
    if !path.starts_with('/') || !path.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(AnnotationError::new(
            key,
            value,
            "expected an HTTP path starting with / and without spaces",
        ));
    }
    Ok(path.to_string())
}

/// Parses a stickiness method name.
pub(crate) fn parse_stickiness_method(
    key: &str,
    value: &str,
) -> Result<StickinessMethod, AnnotationError> {
    StickinessMethod::parse(value).ok_or_else(|| {
        AnnotationError::new(key, value, "expected LbCookie, AppCookie or SourceBased")
    })
}

/// Parses `key=value` pairs separated by commas. Keys are lower-cased; a pair without a
/// value, a repeated key, or a space or one of `=&"'\#` inside a key or value is refused
/// (CloudStack copies them into the HAProxy configuration).
pub(crate) fn parse_key_values(
    key: &str,
    value: &str,
) -> Result<BTreeMap<String, String>, AnnotationError> {
    let bad = |c: char| c.is_whitespace() || "=&\"'\\#".contains(c);
    let mut out = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            return Err(AnnotationError::new(
                key,
                value,
                format!("{entry:?} is not key=value"),
            ));
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k.is_empty() || v.is_empty() || k.contains(bad) || v.contains(bad) {
            return Err(AnnotationError::new(
                key,
                value,
                format!("{entry:?} is not key=value"),
            ));
        }
        if out.insert(k.clone(), v.to_string()).is_some() {
            return Err(AnnotationError::new(
                key,
                value,
                format!("{k:?} is set twice"),
            ));
        }
    }
    Ok(out)
}

/// Parses a CloudStack UUID (returned in lower case, as CloudStack wants it).
pub(crate) fn parse_uuid(key: &str, value: &str) -> Result<String, AnnotationError> {
    let id = value.trim().to_ascii_lowercase();
    let groups: Vec<&str> = id.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    let ok = groups.len() == 5
        && groups
            .iter()
            .zip(lens)
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()));
    if !ok {
        return Err(AnnotationError::new(key, value, "expected a UUID"));
    }
    Ok(id)
}
