//! Decoding CloudStack reply envelopes (API.md §2): the `<command>response` object, error
//! envelopes, list pages and async-start replies.

use serde_json::{Map, Value};

use crate::Error;

/// The envelope key of a command's reply: the command lower-cased plus `response`.
pub fn response_key(command: &str) -> String {
    format!("{}response", command.to_ascii_lowercase())
}

/// Turns an HTTP reply into the object under `<command>response`, or an error.
///
/// Non-2xx replies become [`Error::Api`] with the envelope's `errorcode`, `cserrorcode` and
/// `errortext`; a non-2xx reply without an envelope (a proxy's HTML page) becomes an
/// [`Error::Api`] whose code is the HTTP status. A 2xx reply that is not a JSON envelope is
/// an [`Error::Decode`].
pub fn decode_reply(command: &str, http_status: u16, body: &[u8]) -> Result<Value, Error> {
    let success = (200..300).contains(&http_status);
    let parsed: Option<Map<String, Value>> = serde_json::from_slice(body).ok();
    let inner = parsed.and_then(|mut root| take_envelope(command, &mut root));
    match inner {
        Some(inner) if !success || is_error_object(&inner) => {
            Err(api_error(command, http_status, &inner))
        }
        Some(inner) => Ok(inner),
        None if !success => Err(Error::Api {
            command: command.to_owned(),
            http_status,
            errorcode: u32::from(http_status),
            cserrorcode: None,
            errortext: format!(
                "HTTP {http_status} without a CloudStack envelope: {}",
                snippet(body)
            ),
        }),
        None => Err(Error::Decode {
            command: command.to_owned(),
            detail: format!(
                "expected a JSON object with key {:?}, got: {}",
                response_key(command),
                snippet(body)
            ),
        }),
    }
}

/// Takes the envelope object out of the root: `<command>response`, else `errorresponse`,
/// else the only key of the root.
fn take_envelope(command: &str, root: &mut Map<String, Value>) -> Option<Value> {
    let key = response_key(command);
    if let Some(inner) = root.remove(&key) {
        return Some(inner);
    }
    if let Some(inner) = root.remove("errorresponse") {
        return Some(inner);
    }
    if root.len() == 1 {
        let only = root.keys().next().cloned()?;
        if only.ends_with("response") {
            return root.remove(&only);
        }
    }
    None
}

/// Whether an envelope object is an error body (`errorcode` and `errortext`).
fn is_error_object(inner: &Value) -> bool {
    inner.get("errorcode").is_some() && inner.get("errortext").is_some()
}

/// Builds an [`Error::Api`] from an error envelope object.
fn api_error(command: &str, http_status: u16, inner: &Value) -> Error {
    Error::Api {
        command: command.to_owned(),
        http_status,
        errorcode: code_field(inner, "errorcode").unwrap_or(u32::from(http_status)),
        cserrorcode: code_field(inner, "cserrorcode"),
        errortext: inner
            .get("errortext")
            .and_then(Value::as_str)
            .unwrap_or("(no errortext)")
            .to_owned(),
    }
}

/// Reads a numeric code that may be sent as a number or a string.
pub(crate) fn code_field(object: &Value, name: &str) -> Option<u32> {
    match object.get(name)? {
        Value::Number(number) => number.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// Reads a string field that may be sent as a number (old servers use numeric ids).
pub(crate) fn string_field(object: &Value, name: &str) -> Option<String> {
    match object.get(name)? {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// One page of a list reply: its items (empty when the item key is missing, as for empty
/// lists and pages past the end) and the `count` total when present.
pub fn list_page(
    command: &str,
    inner: &Value,
    item_key: &str,
) -> Result<(Vec<Value>, Option<u64>), Error> {
    let count = match inner.get("count") {
        None => None,
        Some(Value::Number(number)) => number.as_u64(),
        Some(Value::String(text)) => text.parse().ok(),
        Some(other) => {
            return Err(Error::Decode {
                command: command.to_owned(),
                detail: format!("count is not a number: {other}"),
            });
        }
    };
    let items = match inner.get(item_key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(other) => {
            return Err(Error::Decode {
                command: command.to_owned(),
                detail: format!(
                    "{item_key} is not an array: {}",
                    snippet(other.to_string().as_bytes())
                ),
            });
        }
    };
    Ok((items, count))
}

/// The first characters of a body, for error texts.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut short: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn success_and_error_envelopes() {
        let ok = decode_reply("listZones", 200, br#"{"listzonesresponse":{}}"#).unwrap();
        assert_eq!(ok, json!({}));
        let body = br#"{"createloadbalancerruleresponse":{"uuidList":[],"errorcode":537,"cserrorcode":4360,"errortext":"conflict"}}"#;
        match decode_reply("createLoadBalancerRule", 537, body).unwrap_err() {
            Error::Api {
                errorcode,
                cserrorcode,
                errortext,
                http_status,
                ..
            } => {
                assert_eq!(
                    (errorcode, cserrorcode, errortext.as_str(), http_status),
                    (537, Some(4360), "conflict", 537)
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        let unknown = decode_reply(
            "foo",
            432,
            br#"{"errorresponse":{"errorcode":432,"errortext":"Unknown API command: foo"}}"#,
        );
        assert_eq!(unknown.unwrap_err().code(), Some(432));
        let proxy = decode_reply("listZones", 502, b"<html>bad gateway</html>").unwrap_err();
        assert_eq!(proxy.code(), Some(502));
        assert!(matches!(
            decode_reply("listZones", 200, b"<xml/>"),
            Err(Error::Decode { .. })
        ));
    }

    #[test]
    fn list_pages() {
        let (items, count) = list_page("listZones", &json!({"count": 3}), "zone").unwrap();
        assert!(items.is_empty());
        assert_eq!(count, Some(3));
        let (items, count) = list_page("listZones", &json!({"zone": [{"id": 1}]}), "zone").unwrap();
        assert_eq!((items.len(), count), (1, None));
    }
}
