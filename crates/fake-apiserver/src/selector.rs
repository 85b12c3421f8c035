//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`) and field selectors
//! (`metadata.name=x`, `metadata.name==x`, `spec.nodeName!=y`) as kube-apiserver parses
//! them. Field selectors follow `fields.ParseSelector`
//! (`staging/src/k8s.io/apimachinery/pkg/fields/selector.go`): terms split at commas not
//! escaped by a backslash and sorted, each split at its first `!=`, `==` or `=`, the field
//! taken as written (no trimming) and the value unescaped (`\\`, `\,`, `\=`; a bare `,` or
//! `=` in a value is an error). One parser serves the list and watch handlers and the
//! authorizer's [`RequestInfo`](crate::request_info::RequestInfo).

use serde_json::Value;

use crate::error::ApiError;
use crate::resources::ResourceKind;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelRequirement>);

/// Splits on commas that are not inside parentheses.
fn split_top_level(input: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&input[start..]);
    parts
}

fn parse_set(key: &str, rest: &str, raw: &str) -> Result<(String, Vec<String>), ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: {raw:?}: expected a parenthesised value set"
            ))
        })?;
    let values = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    Ok((key.to_string(), values))
}

fn parse_requirement(raw: &str) -> Result<LabelRequirement, ApiError> {
    let part = raw.trim();
    if let Some(key) = part.strip_prefix('!') {
        return Ok(LabelRequirement::DoesNotExist(key.trim().to_string()));
    }
    if let Some((key, value)) = part.split_once("!=") {
        return Ok(LabelRequirement::NotEquals(
            key.trim().into(),
            value.trim().into(),
        ));
    }
    if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(LabelRequirement::Equals(
            key.trim().into(),
            value.trim().into(),
        ));
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let rest = words[1].trim_start();
        if let Some(set) = rest.strip_prefix("notin") {
            let (key, values) = parse_set(words[0], set, part)?;
            return Ok(LabelRequirement::NotIn(key, values));
        }
        if let Some(set) = rest.strip_prefix("in") {
            let (key, values) = parse_set(words[0], set, part)?;
            return Ok(LabelRequirement::In(key, values));
        }
        return Err(ApiError::bad_request(format!(
            "unable to parse requirement: {part:?}: expected one of =, ==, !=, in, notin"
        )));
    }
    if part.is_empty() || part.contains(['(', ')', ' ']) {
        return Err(ApiError::bad_request(format!(
            "unable to parse requirement: {part:?}"
        )));
    }
    Ok(LabelRequirement::Exists(part.to_string()))
}

impl LabelSelector {
    /// Parses a `labelSelector` query value.
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        if input.trim().is_empty() {
            return Ok(Self::default());
        }
        split_top_level(input)
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            LabelRequirement::Equals(k, v) => label(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::DoesNotExist(k) => label(k).is_none(),
        })
    }
}

/// One field selector term: `field=value` or `field==value`, or `field!=value` when
/// `negated`.
#[derive(Debug, Clone, PartialEq)]
struct FieldTerm {
    field: String,
    value: String,
    negated: bool,
}

/// A parsed field selector: terms, all of which must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<FieldTerm>);

/// `splitTerms`: the terms between commas a backslash does not escape.
fn split_terms(input: &str) -> Vec<&str> {
    if input.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in input.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&input[start..]);
    terms
}

/// `splitTerm`: field, operator and raw value, split at the first operator (`!=` before
/// `==` before `=` at the same place).
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    (0..term.len())
        .filter(|i| term.is_char_boundary(*i))
        .find_map(|i| {
            ["!=", "==", "="]
                .into_iter()
                .find(|op| term[i..].starts_with(op))
                .map(|op| (&term[..i], op, &term[i + op.len()..]))
        })
}

/// `UnescapeValue`.
fn unescape_value(raw: &str) -> Result<String, String> {
    let mut value = String::with_capacity(raw.len());
    let mut escaped = false;
    for c in raw.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            value.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescapedRune character in value: {}",
                    u32::from(c)
                ));
            }
            _ => value.push(c),
        }
    }
    if escaped {
        return Err("invalid field selector: invalid escape sequence: \\".into());
    }
    Ok(value)
}

impl FieldSelector {
    /// Parses a `fieldSelector` query value as `fields.ParseSelector` does, whatever fields
    /// it names (the authorizer reads a selector before any resource is known).
    pub fn parse_any(input: &str) -> Result<Self, ApiError> {
        let mut parts = split_terms(input);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let (field, op, raw) = split_term(part).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "invalid selector: '{input}'; can't understand '{part}'"
                ))
            })?;
            terms.push(FieldTerm {
                field: field.to_string(),
                value: unescape_value(raw).map_err(ApiError::bad_request)?,
                negated: op == "!=",
            });
        }
        Ok(Self(terms))
    }

    /// Parses a `fieldSelector` query value, rejecting labels `kind` does not support with
    /// the real server's `field label not supported` error.
    pub fn parse(input: &str, kind: &ResourceKind) -> Result<Self, ApiError> {
        let selector = Self::parse_any(input)?;
        if let Some(term) = selector.0.iter().find(|t| !kind.supports_field(&t.field)) {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                term.field
            )));
        }
        Ok(selector)
    }

    /// `RequiresExactMatch`: the value the first `field=value` (or `==`) term requires.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|t| t.field == field && !t.negated)
            .map(|t| t.value.as_str())
    }

    /// Whether the object satisfies every term (missing fields compare as `""`).
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(
            |FieldTerm {
                 field,
                 value,
                 negated,
             }| {
                let pointer = format!("/{}", field.replace('.', "/"));
                let actual = match object.pointer(&pointer) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Bool(b)) => b.to_string(),
                    Some(Value::Number(n)) => n.to_string(),
                    Some(Value::Null) | None => {
                        if field == "spec.unschedulable" {
                            "false".to_string()
                        } else {
                            String::new()
                        }
                    }
                    Some(other) => other.to_string(),
                };
                (actual == *value) != *negated
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({ "metadata": { "name": "a", "namespace": "default", "labels": labels }, "spec": { "nodeName": "n1" } })
    }

    #[test]
    fn label_selector_operators() {
        let o = obj(json!({ "app": "web", "tier": "front" }));
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web,db)", false),
            ("tier,app=web", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=web,tier in (back)", false),
            ("other!=x", true),
        ];
        for (selector, expected) in cases {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&o), expected, "selector {selector:?}");
        }
    }

    #[test]
    fn label_selector_rejects_garbage() {
        assert_eq!(LabelSelector::parse("app inn (a)").unwrap_err().code, 400);
        assert_eq!(LabelSelector::parse("app in a").unwrap_err().code, 400);
    }

    #[test]
    fn field_selector_matches_and_rejects_unsupported() {
        let pods = lookup("pods").unwrap();
        let o = obj(json!({}));
        assert!(
            FieldSelector::parse("metadata.name=a,spec.nodeName=n1", pods)
                .unwrap()
                .matches(&o)
        );
        assert!(
            !FieldSelector::parse("spec.nodeName!=n1", pods)
                .unwrap()
                .matches(&o)
        );
        let err = FieldSelector::parse("spec.type=LoadBalancer", lookup("services").unwrap())
            .unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(err.message, "field label not supported: spec.type");
    }

    /// Cases of `TestSelectorParse` and `TestSplitTerm` in kubernetes'
    /// `staging/src/k8s.io/apimachinery/pkg/fields/selector_test.go`.
    #[test]
    fn field_selectors_parse_as_fields_parse_selector_does() {
        let name = |input: &str| {
            FieldSelector::parse_any(input)
                .unwrap()
                .requires_exact_match("metadata.name")
                .map(String::from)
        };
        assert_eq!(name("metadata.name=a").as_deref(), Some("a"));
        assert_eq!(name("metadata.name==a").as_deref(), Some("a"));
        assert_eq!(name("metadata.name!=a"), None);
        assert_eq!(
            name("spec.nodeName=n1,metadata.name==a").as_deref(),
            Some("a")
        );
        assert_eq!(
            name("metadata.name=b,metadata.name=a").as_deref(),
            Some("a"),
            "terms are sorted"
        );
        assert_eq!(name("metadata.name=a\\,b").as_deref(), Some("a,b"));
        assert_eq!(name(" metadata.name=a"), None, "the field is not trimmed");
        assert_eq!(name(""), None);

        let error = |input: &str| FieldSelector::parse_any(input).unwrap_err().message;
        assert_eq!(
            error("metadata.name=a,x"),
            "invalid selector: 'metadata.name=a,x'; can't understand 'x'"
        );
        assert_eq!(
            error("metadata.name=a=b"),
            "invalid field selector: unescapedRune character in value: 61"
        );
        assert_eq!(
            error("metadata.name!==a"),
            "invalid field selector: unescapedRune character in value: 61",
            "split at the first operator: value =a"
        );
        assert_eq!(
            error("metadata.name=a\\b"),
            "invalid field selector: invalid escape sequence: \\b"
        );

        let pods = lookup("pods").unwrap();
        assert!(
            FieldSelector::parse("metadata.name==a,spec.nodeName==n1", pods)
                .unwrap()
                .matches(&obj(json!({})))
        );
    }
}
