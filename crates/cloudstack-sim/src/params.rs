//! Request parameters as the servlet sees them: query and form body merged, names lower-cased
//! for binding, typed accessors that fail with the server's texts (API.md §2.3, §4).

use crate::error::ApiError;
use std::collections::BTreeMap;

/// The parameters of one request.
#[derive(Clone, Debug, Default)]
pub struct Params {
    /// Every `name=value` pair as sent (names not lower-cased), query first, then body.
    pub raw: Vec<(String, String)>,
    /// First value of each parameter, keyed by the lower-cased name.
    first: BTreeMap<String, String>,
    /// The command name (case-sensitive, as sent), used in error texts.
    pub command: String,
    /// The command's entry in CloudStack's listing, when it has one: a handler reading a
    /// name the command does not declare is a simulator defect (the server would never
    /// bind it), caught in debug builds.
    listed: Option<&'static crate::listing::CommandListing>,
}

/// Parses an `application/x-www-form-urlencoded` string the way a servlet does (`+` is a space).
pub fn parse_form(text: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(text)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// True for a lower-case UUID as the server's `translateUuidToInternalId` pattern accepts.
pub fn is_uuid(value: &str) -> bool {
    let bytes = value.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(b),
        })
}

impl Params {
    /// Builds the parameter set from the pairs of the query string and the body.
    pub fn new(raw: Vec<(String, String)>) -> Self {
        let mut first = BTreeMap::new();
        for (name, value) in &raw {
            first
                .entry(name.to_lowercase())
                .or_insert_with(|| value.clone());
        }
        let command = first.get("command").cloned().unwrap_or_default();
        let listed = crate::listing::command(&command);
        Self {
            raw,
            first,
            command,
            listed,
        }
    }

    /// Builds parameters from `(name, value)` literals (tests, internal calls).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Self::new(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    /// The first value of `name` (case-insensitive), if sent and declared by the listed
    /// command: the server ignores a name its command does not declare, so the simulator
    /// never acts on one either.
    pub fn get(&self, name: &str) -> Option<&str> {
        if !self.declared(name) {
            return None;
        }
        self.first.get(name).map(String::as_str)
    }

    /// The first value of `name` (case-insensitive) as sent, declared by the command or not:
    /// what `ApiServer` reads from the request map before any binding (the access checks of
    /// `verifyRequest`), never for a command's own parameters.
    pub fn sent(&self, name: &str) -> Option<&str> {
        self.first.get(name).map(String::as_str)
    }

    /// Whether the listed command declares `name` (commands the listing lacks declare
    /// everything). Debug builds panic when a handler reads an undeclared name: a reading of
    /// CloudStack the listing contradicts.
    fn declared(&self, name: &str) -> bool {
        let Some(listed) = self.listed else {
            return true;
        };
        let declared = listed.accepts(name);
        debug_assert!(
            declared,
            "the simulator's {} reads {name:?}, which CloudStack's listing does not declare",
            self.command
        );
        declared
    }

    /// The value of `name` when sent and non-empty.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.is_empty())
    }

    /// A required string parameter.
    pub fn required(&self, name: &str) -> Result<&str, ApiError> {
        self.text(name)
            .ok_or_else(|| ApiError::missing(&self.command, name))
    }

    /// An optional UUID parameter; a malformed value is a 431.
    pub fn uuid(&self, name: &str) -> Result<Option<&str>, ApiError> {
        match self.text(name) {
            None => Ok(None),
            Some(v) if is_uuid(v) => Ok(Some(v)),
            Some(v) => Err(ApiError::invalid_uuid(&self.command, name, v)),
        }
    }

    /// A required UUID parameter.
    pub fn required_uuid(&self, name: &str) -> Result<&str, ApiError> {
        self.uuid(name)?
            .ok_or_else(|| ApiError::missing(&self.command, name))
    }

    /// An optional integer parameter (empty means absent).
    pub fn int(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.text(name) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<i64>()
                .map(Some)
                .map_err(|_| ApiError::invalid_value(&self.command, name, v)),
        }
    }

    /// A required integer parameter.
    pub fn required_int(&self, name: &str) -> Result<i64, ApiError> {
        self.int(name)?
            .ok_or_else(|| ApiError::missing(&self.command, name))
    }

    /// An optional boolean (`Boolean.valueOf`: only case-insensitive `true` is true).
    pub fn bool(&self, name: &str) -> Option<bool> {
        self.text(name).map(|v| v.eq_ignore_ascii_case("true"))
    }

    /// A comma-separated list; empty tokens are skipped, nothing is trimmed.
    pub fn list(&self, name: &str) -> Option<Vec<String>> {
        self.text(name).map(|v| {
            v.split(',')
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        })
    }

    /// A map parameter `name[i].field=value` grouped by index (indices in ascending order).
    pub fn map(&self, name: &str) -> Result<BTreeMap<i64, BTreeMap<String, String>>, ApiError> {
        if !self.declared(&format!("{name}[0]")) {
            return Ok(BTreeMap::new());
        }
        let prefix = format!("{name}[");
        let mut out: BTreeMap<i64, BTreeMap<String, String>> = BTreeMap::new();
        for (key, value) in &self.first {
            let Some(rest) = key.strip_prefix(&prefix) else {
                continue;
            };
            let malformed = || {
                ApiError::new(
                    430,
                    Some(9999),
                    format!(
                        "Unable to decode parameter {key}; if specifying an object array, please use parameter[index].field=XXX, e.g. userGroupList[0].group=httpGroup"
                    ),
                )
            };
            let (index, field) = rest.split_once("].").ok_or_else(malformed)?;
            let index = index.parse::<i64>().map_err(|_| malformed())?;
            out.entry(index)
                .or_default()
                .insert(field.to_owned(), value.clone());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_value_wins_and_names_are_case_insensitive() {
        let p = Params::new(parse_form(b"command=listZones&apiKey=a&APIKEY=b&name=x+y"));
        assert_eq!(p.get("apikey"), Some("a"));
        assert_eq!(p.get("name"), Some("x y"));
        assert_eq!(p.command, "listZones");
    }

    #[test]
    fn maps_group_by_index_and_reject_bad_syntax() {
        let p = Params::from_pairs(&[
            ("tags[0].key", "k"),
            ("tags[0].value", "v"),
            ("tags[3].key", "k3"),
        ]);
        let m = p.map("tags").unwrap();
        assert_eq!(m[&0]["value"], "v");
        assert_eq!(m[&3]["key"], "k3");
        let bad = Params::from_pairs(&[("command", "createTags"), ("tags[x].key", "k")]);
        assert_eq!(bad.map("tags").unwrap_err().code, 430);
    }

    #[test]
    fn typed_accessors_report_the_parameter() {
        let p = Params::from_pairs(&[
            ("command", "listZones"),
            ("id", "NOT-A-UUID"),
            ("page", "x"),
        ]);
        let e = p.uuid("id").unwrap_err();
        assert!(
            e.text.contains("Invalid parameter id value=NOT-A-UUID"),
            "{}",
            e.text
        );
        assert!(
            p.int("page")
                .unwrap_err()
                .text
                .contains("invalid value x for parameter page")
        );
        assert!(
            p.required("name")
                .unwrap_err()
                .text
                .ends_with("due to missing parameter name")
        );
        assert!(is_uuid("0b1d2c3e-0000-4000-8000-000000000001"));
        assert!(!is_uuid("0B1D2C3E-0000-4000-8000-000000000001"));
    }
}
