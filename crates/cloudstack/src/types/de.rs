//! Lenient field decoding: CloudStack versions disagree on whether ids and ports are numbers
//! or strings, and omit null fields. Every response field goes through [`Lenient`].

use std::fmt;

use serde::Deserialize as _;
use serde::de::{DeserializeOwned, Deserializer, Visitor};
use serde_json::Value;

/// A response field type that decodes tolerantly and knows when it is absent.
pub trait Lenient: Sized {
    /// Decodes the field from whatever JSON the server sent (`null` means absent), straight
    /// from the decoder: no JSON tree is built for it.
    fn decode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
    /// Whether the field is absent (skipped when serialising).
    fn is_absent(&self) -> bool;
}

/// `deserialize_with` entry point used by every response struct.
pub fn lenient<'de, D: Deserializer<'de>, T: Lenient>(deserializer: D) -> Result<T, D::Error> {
    T::decode(deserializer)
}

/// The visitor methods of a lenient field for `null` (and an absent optional): `None`.
macro_rules! absent_is_none {
    () => {
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_any(self)
        }
    };
}

/// Text fields: strings, or numbers and booleans written as text.
struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Some(text.to_owned()))
    }
    fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Self::Value, E> {
        Ok(Some(text))
    }
    fn visit_u64<E: serde::de::Error>(self, number: u64) -> Result<Self::Value, E> {
        Ok(Some(number.to_string()))
    }
    fn visit_i64<E: serde::de::Error>(self, number: i64) -> Result<Self::Value, E> {
        Ok(Some(number.to_string()))
    }
    fn visit_f64<E: serde::de::Error>(self, number: f64) -> Result<Self::Value, E> {
        Ok(Some(Value::from(number).to_string()))
    }
    fn visit_bool<E: serde::de::Error>(self, flag: bool) -> Result<Self::Value, E> {
        Ok(Some(flag.to_string()))
    }
    absent_is_none!();
}

impl Lenient for Option<String> {
    fn decode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor)
    }
    fn is_absent(&self) -> bool {
        self.is_none()
    }
}

/// Boolean fields: booleans, or `"true"`/`"false"` (any case); an empty string is absent.
struct FlagVisitor;

impl<'de> Visitor<'de> for FlagVisitor {
    type Value = Option<bool>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a boolean")
    }
    fn visit_bool<E: serde::de::Error>(self, flag: bool) -> Result<Self::Value, E> {
        Ok(Some(flag))
    }
    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok((!text.is_empty()).then(|| text.eq_ignore_ascii_case("true")))
    }
    absent_is_none!();
}

impl Lenient for Option<bool> {
    fn decode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FlagVisitor)
    }
    fn is_absent(&self) -> bool {
        self.is_none()
    }
}

/// Integer fields: JSON integers or decimal strings; an empty string is absent.
struct IntegerVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T> Visitor<'de> for IntegerVisitor<T>
where
    T: TryFrom<u64> + TryFrom<i64> + std::str::FromStr,
{
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer")
    }
    fn visit_u64<E: serde::de::Error>(self, number: u64) -> Result<Self::Value, E> {
        T::try_from(number)
            .map(Some)
            .map_err(|_| E::custom(format!("expected an integer, got {number}")))
    }
    fn visit_i64<E: serde::de::Error>(self, number: i64) -> Result<Self::Value, E> {
        T::try_from(number)
            .map(Some)
            .map_err(|_| E::custom(format!("expected an integer, got {number}")))
    }
    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(None);
        }
        trimmed
            .parse()
            .map(Some)
            .map_err(|_| E::custom(format!("expected an integer, got {text:?}")))
    }
    absent_is_none!();
}

macro_rules! lenient_integer {
    ($($ty:ty),*) => {$(
        impl Lenient for Option<$ty> {
            fn decode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any(IntegerVisitor::<$ty>(std::marker::PhantomData))
            }
            fn is_absent(&self) -> bool {
                self.is_none()
            }
        }
    )*};
}
lenient_integer!(u32, u64, i32, i64);

impl Lenient for Option<Value> {
    fn decode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(deserializer)? {
            Value::Null => None,
            other => Some(other),
        })
    }
    fn is_absent(&self) -> bool {
        self.is_none()
    }
}

impl<T: DeserializeOwned> Lenient for Vec<T> {
    fn decode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
    }
    fn is_absent(&self) -> bool {
        self.is_empty()
    }
}

/// Declares a response struct whose fields are all decoded with [`lenient`], default to
/// absent, and are skipped when absent on serialisation. Unknown fields are ignored.
macro_rules! response {
    ($(#[$meta:meta])* $name:ident { $($(#[$field_meta:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        pub struct $name {
            $(
                $(#[$field_meta])*
                #[serde(
                    default,
                    deserialize_with = "crate::types::de::lenient",
                    skip_serializing_if = "crate::types::de::Lenient::is_absent"
                )]
                pub $field: $ty,
            )*
        }
    };
}
pub(crate) use response;

/// Splits a CIDR list on commas and whitespace (LB rules use spaces, firewall rules and ACLs
/// commas), dropping empty entries.
pub(crate) fn split_cidrs(list: Option<&str>) -> Vec<String> {
    list.unwrap_or_default()
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|part| !part.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    response! {
        /// One field of each lenient kind.
        Probe {
            text: Option<String>,
            port: Option<u32>,
            flag: Option<bool>,
            items: Vec<Probe>,
            raw: Option<Value>,
        }
    }

    fn probe(json: Value) -> Result<Probe, String> {
        serde_json::from_value(json.clone())
            .and_then(|value: Probe| {
                // The same from text, as replies are decoded.
                let from_text: Probe = serde_json::from_str(&json.to_string())?;
                assert_eq!(value, from_text);
                Ok(value)
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn numbers_and_strings_both_decode() {
        let decoded = probe(serde_json::json!({
            "text": 2614, "port": "80", "flag": "false", "raw": {"a": 1},
            "items": [{"text": "x", "port": 443, "flag": true}]
        }))
        .expect("decodes");
        assert_eq!(decoded.text.as_deref(), Some("2614"));
        assert_eq!(decoded.port, Some(80));
        assert_eq!(decoded.flag, Some(false));
        assert_eq!(decoded.raw, Some(serde_json::json!({"a": 1})));
        assert_eq!(decoded.items.len(), 1);
        assert_eq!(decoded.items[0].port, Some(443));
        assert_eq!(
            probe(serde_json::json!({"text": true}))
                .unwrap()
                .text
                .as_deref(),
            Some("true")
        );
        assert_eq!(
            probe(serde_json::json!({"text": -3}))
                .unwrap()
                .text
                .as_deref(),
            Some("-3")
        );
        assert_eq!(
            probe(serde_json::json!({"text": 1.5}))
                .unwrap()
                .text
                .as_deref(),
            Some("1.5")
        );
    }

    #[test]
    fn empty_and_null_fields_are_absent() {
        let decoded = probe(serde_json::json!({
            "text": null, "port": " ", "flag": "", "items": null, "raw": null
        }))
        .expect("decodes");
        assert_eq!(decoded, Probe::default());
        assert_eq!(
            probe(serde_json::json!({})).expect("decodes"),
            Probe::default()
        );
    }

    #[test]
    fn values_of_the_wrong_kind_are_errors() {
        assert!(probe(serde_json::json!({"port": "eighty"})).is_err());
        assert!(
            probe(serde_json::json!({"port": -1})).is_err(),
            "out of range"
        );
        assert!(probe(serde_json::json!({"port": 1.5})).is_err());
        assert!(probe(serde_json::json!({"text": {"a": 1}})).is_err());
        assert!(probe(serde_json::json!({"flag": 1})).is_err());
        assert!(probe(serde_json::json!({"items": {"text": "x"}})).is_err());
    }

    #[test]
    fn cidr_lists_split_on_commas_and_spaces() {
        assert_eq!(
            split_cidrs(Some("10.0.0.0/8 192.168.1.0/24")),
            ["10.0.0.0/8", "192.168.1.0/24"]
        );
        assert_eq!(
            split_cidrs(Some("1.2.3.4/32, 5.6.7.8/32")),
            ["1.2.3.4/32", "5.6.7.8/32"]
        );
        assert!(split_cidrs(Some("")).is_empty());
        assert!(split_cidrs(None).is_empty());
    }
}
