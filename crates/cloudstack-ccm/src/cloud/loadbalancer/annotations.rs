//! The Service annotations we read and write: one typed table, one parse function per
//! kind of value, and the Markdown for `docs/annotations.md` rendered from the table (a
//! unit test keeps the committed file equal to the rendering).
//!
//! Keys are those of the Go CCM (`apache/cloudstack-kubernetes-provider`) and of the
//! leaseweb fork, so Services move between the controllers unchanged, plus new ones in
//! the same `service.beta.kubernetes.io/cloudstack-load-balancer-` family.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::vocabulary::{Algorithm, StickinessMethod};
use crate::cloud::cidr::Cidr;

#[cfg(test)]
mod markdown;
mod parse;
mod table;

#[cfg(test)]
pub(crate) use markdown::render_markdown;
pub(crate) use parse::{
    parse_algorithm, parse_bool, parse_cidr_list, parse_hostname, parse_http_path, parse_in_range,
    parse_ip, parse_key_values, parse_stickiness_method, parse_uuid,
};
pub use table::*;

mod tls;
pub use tls::{TLS_CERTIFICATE_ID, TLS_PORTS, TLS_SECRET};
pub(crate) use tls::{parse_port_list, parse_secret_name};

/// An invalid annotation value. The message names the annotation and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {key}: invalid value {value:?}: {reason}")]
pub struct AnnotationError {
    /// The annotation key.
    pub key: String,
    /// The value as found on the Service.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

impl AnnotationError {
    fn new(key: &str, value: &str, reason: impl Into<String>) -> Self {
        AnnotationError {
            key: key.to_string(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// Who first defined an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Kubernetes itself.
    Kubernetes,
    /// The Go CCM, `apache/cloudstack-kubernetes-provider`.
    Apache,
    /// The leaseweb fork of the Go CCM.
    Leaseweb,
    /// This controller.
    CloudstackCcm,
}

#[cfg(test)]
impl Origin {
    fn label(self) -> &'static str {
        match self {
            Origin::Kubernetes => "Kubernetes",
            Origin::Apache => "Go CCM (apache)",
            Origin::Leaseweb => "leaseweb fork",
            Origin::CloudstackCcm => "cloudstack-ccm",
        }
    }
}

/// Who writes an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBy {
    /// The user sets it; the controller only reads it.
    User,
    /// The controller records it; users should not edit it.
    Controller,
    /// The controller records it; a user may set it first to choose.
    UserOrController,
}

/// The kind of value an annotation holds; each kind has one parse function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnotationKind {
    /// `true` / `false` (also Go's `1`, `t`, `T`, `TRUE`, `True`, `0`, `f`, ...).
    Bool,
    /// A DNS hostname.
    Hostname,
    /// An IPv4 or IPv6 address.
    IpAddress,
    /// Comma-separated CIDRs (a bare address means a single host).
    CidrList,
    /// `roundrobin`, `leastconn` or `source`.
    Algorithm,
    /// Whole seconds within a range.
    Seconds {
        /// Smallest value allowed.
        min: u32,
        /// Largest value allowed.
        max: u32,
    },
    /// A count within a range.
    Count {
        /// Smallest value allowed.
        min: u32,
        /// Largest value allowed.
        max: u32,
    },
    /// An HTTP path starting with `/`.
    HttpPath,
    /// `LbCookie`, `AppCookie` or `SourceBased` (any case).
    StickinessMethod,
    /// Comma-separated `key=value` pairs.
    KeyValueList,
    /// A CloudStack UUID.
    Uuid,
    /// The name of a Secret in the Service's namespace.
    SecretName,
    /// Comma-separated ports.
    PortList,
}

impl AnnotationKind {
    /// A short description of the accepted values, for the documentation.
    pub fn describe(self) -> String {
        match self {
            AnnotationKind::Bool => "bool (`true`/`false`)".into(),
            AnnotationKind::Hostname => "hostname".into(),
            AnnotationKind::IpAddress => "IP address".into(),
            AnnotationKind::CidrList => "comma-separated CIDRs".into(),
            AnnotationKind::Algorithm => "`roundrobin` \\| `leastconn` \\| `source`".into(),
            AnnotationKind::Seconds { min, max } => format!("seconds ({min}–{max})"),
            AnnotationKind::Count { min, max } => format!("integer ({min}–{max})"),
            AnnotationKind::HttpPath => "HTTP path".into(),
            AnnotationKind::StickinessMethod => {
                "`LbCookie` \\| `AppCookie` \\| `SourceBased`".into()
            }
            AnnotationKind::KeyValueList => "comma-separated `key=value`".into(),
            AnnotationKind::Uuid => "UUID".into(),
            AnnotationKind::SecretName => "Secret name".into(),
            AnnotationKind::PortList => "comma-separated ports".into(),
        }
    }

    /// Checks a value against this kind, whatever the annotation.
    pub fn validate(self, key: &str, value: &str) -> Result<(), AnnotationError> {
        match self {
            AnnotationKind::Bool => parse_bool(key, value).map(drop),
            AnnotationKind::Hostname => parse_hostname(key, value).map(drop),
            AnnotationKind::IpAddress => parse_ip(key, value).map(drop),
            AnnotationKind::CidrList => parse_cidr_list(key, value).map(drop),
            AnnotationKind::Algorithm => parse_algorithm(key, value).map(drop),
            AnnotationKind::Seconds { min, max } | AnnotationKind::Count { min, max } => {
                parse_in_range(key, value, min, max).map(drop)
            }
            AnnotationKind::HttpPath => parse_http_path(key, value).map(drop),
            AnnotationKind::StickinessMethod => parse_stickiness_method(key, value).map(drop),
            AnnotationKind::KeyValueList => parse_key_values(key, value).map(drop),
            AnnotationKind::Uuid => parse_uuid(key, value).map(drop),
            AnnotationKind::SecretName => parse_secret_name(key, value).map(drop),
            AnnotationKind::PortList => parse_port_list(key, value).map(drop),
        }
    }
}

/// One annotation: its key, kind, default and documentation.
#[derive(Debug, Clone, Copy)]
pub struct Annotation {
    /// The full annotation key.
    pub key: &'static str,
    /// The kind of value.
    pub kind: AnnotationKind,
    /// The value assumed when the annotation is absent (empty: none).
    pub default: &'static str,
    /// What it does.
    pub description: &'static str,
    /// An example value.
    pub example: &'static str,
    /// Where the annotation comes from.
    pub origin: Origin,
    /// Who writes it.
    pub set_by: SetBy,
    /// Which networks (LB providers) and CloudStack versions support it.
    pub support: &'static str,
}

/// Typed access to a Service's annotations through the table.
#[derive(Debug, Clone, Copy)]
pub struct Annotations<'a> {
    map: Option<&'a BTreeMap<String, String>>,
}

impl<'a> Annotations<'a> {
    /// Wraps the annotations of an object (absent annotations are fine).
    pub fn new(map: Option<&'a BTreeMap<String, String>>) -> Self {
        Annotations { map }
    }

    /// The raw value of an annotation, if set.
    pub fn raw(&self, annotation: &Annotation) -> Option<&'a str> {
        self.map?.get(annotation.key).map(String::as_str)
    }

    /// Parses an annotation with `parse`, or returns `None` when it is absent.
    pub fn get<T>(
        &self,
        annotation: &Annotation,
        parse: impl FnOnce(&str, &str) -> Result<T, AnnotationError>,
    ) -> Result<Option<T>, AnnotationError> {
        self.raw(annotation)
            .map(|value| parse(annotation.key, value))
            .transpose()
    }

    /// A bool annotation, `false` when absent.
    pub fn flag(&self, annotation: &Annotation) -> Result<bool, AnnotationError> {
        Ok(self.get(annotation, parse_bool)?.unwrap_or(false))
    }

    /// A ranged number annotation, or its documented default when absent.
    pub fn number(&self, annotation: &Annotation) -> Result<u32, AnnotationError> {
        let (min, max) = match annotation.kind {
            AnnotationKind::Seconds { min, max } | AnnotationKind::Count { min, max } => (min, max),
            _ => (0, u32::MAX),
        };
        let value = self.raw(annotation).unwrap_or(annotation.default);
        parse_in_range(annotation.key, value, min, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_file_matches_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/annotations.md");
        let rendered = render_markdown();
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(path, &rendered).expect("write docs/annotations.md");
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == rendered,
            "docs/annotations.md differs from the annotation table; run UPDATE_DOCS=1 cargo test -p cloudstack-ccm annotations"
        );
    }

    #[test]
    fn every_example_and_default_is_valid_for_its_kind() {
        for a in ALL {
            assert!(
                a.key.starts_with("service.beta.kubernetes.io/"),
                "{}",
                a.key
            );
            a.kind
                .validate(a.key, a.example)
                .unwrap_or_else(|e| panic!("{e}"));
            if !a.default.is_empty() && !a.default.starts_with("from ") {
                a.kind
                    .validate(a.key, a.default)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        let mut keys: Vec<_> = ALL.iter().map(|a| a.key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), ALL.len(), "duplicate keys in the table");
    }

    #[test]
    fn bad_values_are_refused_naming_key_and_value() {
        let k = "k";
        let cases: Vec<(AnnotationKind, &str)> = vec![
            (AnnotationKind::Bool, "yes"),
            (AnnotationKind::Bool, ""),
            (AnnotationKind::Hostname, "-bad.example"),
            (AnnotationKind::Hostname, "a b"),
            (AnnotationKind::IpAddress, "300.1.1.1"),
            (AnnotationKind::CidrList, "10.0.0.0/8,banana"),
            (AnnotationKind::CidrList, "10.0.0.0/33"),
            (AnnotationKind::CidrList, "10.0.0.0/"),
            (AnnotationKind::Algorithm, "random"),
            (AnnotationKind::Seconds { min: 2, max: 60 }, "1"),
            (AnnotationKind::Seconds { min: 2, max: 60 }, "61"),
            (AnnotationKind::Seconds { min: 2, max: 60 }, "-5"),
            (AnnotationKind::Count { min: 1, max: 10 }, "ten"),
            (AnnotationKind::HttpPath, "healthz"),
            (AnnotationKind::HttpPath, "/a b"),
            (AnnotationKind::StickinessMethod, "cookie"),
            (AnnotationKind::KeyValueList, "nocache="),
            (AnnotationKind::KeyValueList, "a=1,a=2"),
            (AnnotationKind::KeyValueList, "a=b#c"),
            (AnnotationKind::Uuid, "not-a-uuid"),
        ];
        for (kind, value) in cases {
            let err = kind.validate(k, value).expect_err(value);
            assert_eq!(err.key, k);
            assert_eq!(err.value, value);
            assert!(err.to_string().contains(&format!("{value:?}")), "{err}");
        }
    }

    #[test]
    fn good_values_parse() {
        assert!(parse_bool("k", "True").unwrap());
        assert!(!parse_bool("k", "0").unwrap());
        assert_eq!(
            parse_cidr_list("k", " 10.0.0.0/8 , ,192.168.1.1").unwrap(),
            vec![
                Cidr::parse("10.0.0.0/8").unwrap(),
                Cidr::parse("192.168.1.1/32").unwrap()
            ]
        );
        assert_eq!(
            parse_algorithm("k", "LeastConn").unwrap(),
            Algorithm::LeastConn
        );
        assert_eq!(
            parse_stickiness_method("k", "sourcebased").unwrap(),
            StickinessMethod::SourceBased
        );
        let kv = parse_key_values("k", "tablesize=200k, Expire=30m").unwrap();
        assert_eq!(kv.get("expire").map(String::as_str), Some("30m"));
        assert_eq!(
            parse_uuid("k", "EB9C270D-DD66-443B-9524-ADA1EFF4442A").unwrap(),
            "eb9c270d-dd66-443b-9524-ada1eff4442a"
        );
    }
}
