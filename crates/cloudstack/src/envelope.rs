//! Decoding CloudStack reply envelopes (API.md §2): the `<command>response` object, error
//! envelopes, list pages and async-start replies.

use std::marker::PhantomData;

use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
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
    mut inner: Value,
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
    let items = match inner.get_mut(item_key).map(Value::take) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
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

/// Decodes one page of a list reply straight from the body into typed items, without
/// building a JSON tree of the whole page: the items under `item_key` and the `count`
/// total. Anything else than a well-formed success page (an error envelope, an
/// unexpected shape, an item that does not decode) is decoded again through
/// [`decode_reply`] and [`list_page`], which name the problem exactly as for any reply.
pub fn decode_list_page<T: DeserializeOwned>(
    command: &str,
    http_status: u16,
    body: &[u8],
    item_key: &str,
) -> Result<(Vec<T>, Option<u64>), Error> {
    if (200..300).contains(&http_status) {
        let seed = RootSeed {
            response_key: &response_key(command),
            item_key,
            marker: PhantomData::<T>,
        };
        let mut deserializer = serde_json::Deserializer::from_slice(body);
        if let Ok(Some(page)) = seed.deserialize(&mut deserializer)
            && deserializer.end().is_ok()
        {
            return Ok(page);
        }
    }
    let inner = decode_reply(command, http_status, body)?;
    let (items, count) = list_page(command, inner, item_key)?;
    let items = items
        .into_iter()
        .map(|item| {
            serde_json::from_value(item).map_err(|e| Error::Decode {
                command: command.to_owned(),
                detail: format!("{item_key} item: {e}"),
            })
        })
        .collect::<Result<Vec<T>, Error>>()?;
    Ok((items, count))
}

/// A typed page; `None` when the reply is not a plain success page.
type TypedPage<T> = Option<(Vec<T>, Option<u64>)>;

/// Reads the root object of a reply and the page under `<command>response`.
struct RootSeed<'a, T> {
    response_key: &'a str,
    item_key: &'a str,
    marker: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for RootSeed<'_, T> {
    type Value = TypedPage<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for RootSeed<'_, T> {
    type Value = TypedPage<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "an object with key {:?}", self.response_key)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut page = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.response_key && page.is_none() {
                page = Some(map.next_value_seed(PageSeed {
                    item_key: self.item_key,
                    marker: PhantomData::<T>,
                })?);
            } else {
                // Another envelope (an error) or more than one: the general path decides.
                map.next_value::<IgnoredAny>()?;
                return Ok(None);
            }
        }
        Ok(page.flatten())
    }
}

/// Reads the page object: `count`, the items, and marks error bodies.
struct PageSeed<'a, T> {
    item_key: &'a str,
    marker: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for PageSeed<'_, T> {
    type Value = TypedPage<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for PageSeed<'_, T> {
    type Value = TypedPage<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a list page with {:?}", self.item_key)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut items: Option<Vec<T>> = None;
        let mut count = None;
        let mut plain = true;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.item_key && items.is_none() {
                items = map
                    .next_value::<Option<Vec<T>>>()?
                    .or_else(|| Some(Vec::new()));
            } else if key == "count" {
                count = match map.next_value::<Value>()? {
                    Value::Number(number) => number.as_u64(),
                    Value::String(text) => text.parse().ok(),
                    _ => {
                        plain = false;
                        None
                    }
                };
            } else {
                if key == "errorcode" || key == "errortext" || key == self.item_key {
                    plain = false;
                }
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(plain.then(|| (items.unwrap_or_default(), count)))
    }
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

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Zone {
        id: String,
    }

    #[test]
    fn typed_pages_decode_without_a_tree() {
        let body =
            br#"{"listzonesresponse":{"count":"2","zone":[{"id":"a","name":"x"},{"id":"b"}]}}"#;
        let (zones, count) = decode_list_page::<Zone>("listZones", 200, body, "zone").unwrap();
        assert_eq!(zones, [Zone { id: "a".into() }, Zone { id: "b".into() }]);
        assert_eq!(count, Some(2));
        let (empty, count) =
            decode_list_page::<Zone>("listZones", 200, br#"{"listzonesresponse":{}}"#, "zone")
                .unwrap();
        assert!(empty.is_empty());
        assert_eq!(count, None);
        let null = br#"{"listzonesresponse":{"count":0,"zone":null}}"#;
        let (empty, _) = decode_list_page::<Zone>("listZones", 200, null, "zone").unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn typed_pages_report_errors_like_any_reply() {
        let error = br#"{"listzonesresponse":{"errorcode":431,"errortext":"bad zone"}}"#;
        let err = decode_list_page::<Zone>("listZones", 200, error, "zone").unwrap_err();
        assert_eq!(err.code(), Some(431));
        let refused = br#"{"errorresponse":{"errorcode":432,"errortext":"no such command"}}"#;
        let err = decode_list_page::<Zone>("listZones", 432, refused, "zone").unwrap_err();
        assert_eq!(err.code(), Some(432));
        let bad_item = br#"{"listzonesresponse":{"count":1,"zone":[{"name":"no id"}]}}"#;
        match decode_list_page::<Zone>("listZones", 200, bad_item, "zone").unwrap_err() {
            Error::Decode { detail, .. } => assert!(detail.starts_with("zone item:"), "{detail}"),
            other => panic!("unexpected {other:?}"),
        }
        let not_array = br#"{"listzonesresponse":{"zone":{"id":"a"}}}"#;
        match decode_list_page::<Zone>("listZones", 200, not_array, "zone").unwrap_err() {
            Error::Decode { detail, .. } => assert!(detail.contains("not an array"), "{detail}"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn list_pages() {
        let (items, count) = list_page("listZones", json!({"count": 3}), "zone").unwrap();
        assert!(items.is_empty());
        assert_eq!(count, Some(3));
        let (items, count) = list_page("listZones", json!({"zone": [{"id": 1}]}), "zone").unwrap();
        assert_eq!((items.len(), count), (1, None));
    }
}
