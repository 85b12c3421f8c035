//! Lenient field decoding: CloudStack versions disagree on whether ids and ports are numbers
//! or strings, and omit null fields. Every response field goes through [`Lenient`].

use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde_json::Value;

/// A response field type that decodes tolerantly and knows when it is absent.
pub trait Lenient: Sized {
    /// Builds the field from any JSON value (`null` means absent).
    fn from_json(value: Value) -> Result<Self, String>;
    /// Whether the field is absent (skipped when serialising).
    fn is_absent(&self) -> bool;
}

/// `deserialize_with` entry point used by every response struct.
pub fn lenient<'de, D: Deserializer<'de>, T: Lenient>(deserializer: D) -> Result<T, D::Error> {
    let value = Value::deserialize(deserializer)?;
    T::from_json(value).map_err(D::Error::custom)
}

use serde::Deserialize as _;

impl Lenient for Option<String> {
    fn from_json(value: Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            Value::String(text) => Ok(Some(text)),
            Value::Number(number) => Ok(Some(number.to_string())),
            Value::Bool(flag) => Ok(Some(flag.to_string())),
            other => Err(format!("expected a string, got {other}")),
        }
    }
    fn is_absent(&self) -> bool {
        self.is_none()
    }
}

impl Lenient for Option<bool> {
    fn from_json(value: Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            Value::Bool(flag) => Ok(Some(flag)),
            Value::String(text) if text.is_empty() => Ok(None),
            Value::String(text) => Ok(Some(text.eq_ignore_ascii_case("true"))),
            other => Err(format!("expected a boolean, got {other}")),
        }
    }
    fn is_absent(&self) -> bool {
        self.is_none()
    }
}

/// Integer fields: JSON numbers or decimal strings; an empty string is absent.
macro_rules! lenient_integer {
    ($($ty:ty),*) => {$(
        impl Lenient for Option<$ty> {
            fn from_json(value: Value) -> Result<Self, String> {
                match value {
                    Value::Null => Ok(None),
                    Value::Number(number) => number
                        .to_string()
                        .parse()
                        .map(Some)
                        .map_err(|_| format!("expected an integer, got {number}")),
                    Value::String(text) if text.trim().is_empty() => Ok(None),
                    Value::String(text) => text
                        .trim()
                        .parse()
                        .map(Some)
                        .map_err(|_| format!("expected an integer, got {text:?}")),
                    other => Err(format!("expected an integer, got {other}")),
                }
            }
            fn is_absent(&self) -> bool {
                self.is_none()
            }
        }
    )*};
}
lenient_integer!(u32, u64, i32, i64);

impl Lenient for Option<Value> {
    fn from_json(value: Value) -> Result<Self, String> {
        Ok(match value {
            Value::Null => None,
            other => Some(other),
        })
    }
    fn is_absent(&self) -> bool {
        self.is_none()
    }
}

impl<T: DeserializeOwned> Lenient for Vec<T> {
    fn from_json(value: Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(Vec::new()),
            other => serde_json::from_value(other).map_err(|e| e.to_string()),
        }
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

    #[test]
    fn numbers_and_strings_both_decode() {
        assert_eq!(
            <Option<String>>::from_json(serde_json::json!(2614)),
            Ok(Some("2614".into()))
        );
        assert_eq!(
            <Option<u32>>::from_json(serde_json::json!("80")),
            Ok(Some(80))
        );
        assert_eq!(<Option<u32>>::from_json(serde_json::json!("")), Ok(None));
        assert!(<Option<u32>>::from_json(serde_json::json!("eighty")).is_err());
        assert_eq!(
            <Option<bool>>::from_json(serde_json::json!("false")),
            Ok(Some(false))
        );
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
