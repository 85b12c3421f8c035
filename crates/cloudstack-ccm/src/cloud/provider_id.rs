//! Parse and format Kubernetes `spec.providerID` values for CloudStack VMs.
//!
//! We always write `external-cloudstack://<uuid>` (what the Go
//! `apache/cloudstack-kubernetes-provider` writes). We read that form and also
//! the ones other CloudStack integrations leave on nodes:
//!
//! | Form | Written by |
//! |---|---|
//! | `external-cloudstack://<uuid>` | the Go CCM and this one |
//! | `cloudstack:///<uuid>` | the leaseweb fork |
//! | `cloudstack://<region>/<uuid>` | the leaseweb fork with a region |
//! | `<uuid>` | hand-made nodes, very old integrations |
//!
//! The VM id must be a UUID (hex digits in 8-4-4-4-12 groups, any case); it is
//! returned lower-cased, which is how CloudStack prints ids.

use std::fmt;

/// The provider name, also the scheme of the providerIDs we write.
pub const PROVIDER_NAME: &str = "external-cloudstack";

/// Scheme used by the leaseweb fork.
const LEGACY_SCHEME: &str = "cloudstack";

/// A CloudStack VM id taken from (or destined for) a node's `spec.providerID`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ProviderId {
    vm_id: String,
}

/// Why a providerID could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderIdError {
    /// The value was empty.
    #[error("providerID is empty")]
    Empty,
    /// The value has a scheme other than `external-cloudstack://` or `cloudstack://`.
    #[error(
        "providerID {0:?} is not a CloudStack providerID (expected external-cloudstack://<uuid>, \
         cloudstack:///<uuid>, cloudstack://<region>/<uuid> or <uuid>)"
    )]
    UnknownForm(String),
    /// The scheme is right but the VM id is not a UUID.
    #[error("providerID {provider_id:?}: VM id {vm_id:?} is not a UUID")]
    InvalidVmId {
        /// The whole providerID as given.
        provider_id: String,
        /// The part that should have been a UUID.
        vm_id: String,
    },
}

impl ProviderId {
    /// Builds a providerID for a VM id; the id must be a UUID.
    pub(crate) fn from_vm_id(vm_id: &str) -> Result<Self, ProviderIdError> {
        if is_uuid(vm_id) {
            Ok(Self {
                vm_id: vm_id.to_ascii_lowercase(),
            })
        } else {
            Err(ProviderIdError::InvalidVmId {
                provider_id: vm_id.to_string(),
                vm_id: vm_id.to_string(),
            })
        }
    }

    /// Parses any accepted form (see the module documentation).
    pub fn parse(provider_id: &str) -> Result<Self, ProviderIdError> {
        let trimmed = provider_id.trim();
        if trimmed.is_empty() {
            return Err(ProviderIdError::Empty);
        }
        let vm_id = if let Some(rest) = trimmed.strip_prefix(&format!("{PROVIDER_NAME}://")) {
            rest
        } else if let Some(rest) = trimmed.strip_prefix(&format!("{LEGACY_SCHEME}://")) {
            // `cloudstack:///<uuid>` or `cloudstack://<region>/<uuid>`.
            match rest.split_once('/') {
                Some((region, id)) if !region.contains(':') => id,
                _ => return Err(ProviderIdError::UnknownForm(provider_id.to_string())),
            }
        } else if trimmed.contains("://") {
            return Err(ProviderIdError::UnknownForm(provider_id.to_string()));
        } else {
            trimmed
        };
        if is_uuid(vm_id) {
            Ok(Self {
                vm_id: vm_id.to_ascii_lowercase(),
            })
        } else {
            Err(ProviderIdError::InvalidVmId {
                provider_id: provider_id.to_string(),
                vm_id: vm_id.to_string(),
            })
        }
    }

    /// The CloudStack VM id (lower-case UUID).
    pub fn vm_id(&self) -> &str {
        &self.vm_id
    }
}

impl fmt::Display for ProviderId {
    /// Formats as `external-cloudstack://<uuid>`, the form we write on nodes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PROVIDER_NAME}://{}", self.vm_id)
    }
}

/// True for `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with hex digits of any case.
fn is_uuid(value: &str) -> bool {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let parts: Vec<&str> = value.split('-').collect();
    parts.len() == GROUPS.len()
        && parts
            .iter()
            .zip(GROUPS)
            .all(|(part, len)| part.len() == len && part.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "8a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b";

    #[test]
    fn accepted_forms() {
        let cases = [
            format!("external-cloudstack://{ID}"),
            format!("cloudstack:///{ID}"),
            format!("cloudstack://eu-west/{ID}"),
            ID.to_string(),
            ID.to_ascii_uppercase(),
            format!("  external-cloudstack://{ID}  "),
            format!("external-cloudstack://{}", ID.to_ascii_uppercase()),
        ];
        for case in cases {
            let parsed = ProviderId::parse(&case).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(parsed.vm_id(), ID, "{case}");
        }
    }

    /// Checks that an error is of the expected kind.
    type ErrorCheck = fn(&ProviderIdError) -> bool;

    #[test]
    fn rejected_forms() {
        let cases: [(&str, ErrorCheck); 10] = [
            ("", |e| *e == ProviderIdError::Empty),
            ("   ", |e| *e == ProviderIdError::Empty),
            ("aws:///i-0123", |e| {
                matches!(e, ProviderIdError::UnknownForm(_))
            }),
            ("gce://project/zone/name", |e| {
                matches!(e, ProviderIdError::UnknownForm(_))
            }),
            ("cloudstack://8a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b", |e| {
                matches!(e, ProviderIdError::UnknownForm(_))
            }),
            ("external-cloudstack://", |e| {
                matches!(e, ProviderIdError::InvalidVmId { .. })
            }),
            ("external-cloudstack://not-a-uuid", |e| {
                matches!(e, ProviderIdError::InvalidVmId { .. })
            }),
            (
                "external-cloudstack:///8a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b",
                |e| matches!(e, ProviderIdError::InvalidVmId { .. }),
            ),
            (
                "cloudstack://r/8a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b/x",
                |e| matches!(e, ProviderIdError::InvalidVmId { .. }),
            ),
            ("8a0b4f3e1c2d4e5f9a8b7c6d5e4f3a2b", |e| {
                matches!(e, ProviderIdError::InvalidVmId { .. })
            }),
        ];
        for (case, expected) in cases {
            let err = ProviderId::parse(case).expect_err(case);
            assert!(expected(&err), "{case:?} gave {err:?}");
        }
    }

    #[test]
    fn formats_as_external_cloudstack() {
        let id = ProviderId::parse(&format!("cloudstack:///{ID}")).unwrap();
        assert_eq!(id.to_string(), format!("external-cloudstack://{ID}"));
        assert_eq!(ProviderId::from_vm_id(ID).unwrap(), id);
        assert!(ProviderId::from_vm_id("vm-1").is_err());
    }

    #[test]
    fn error_names_the_value() {
        let err = ProviderId::parse("external-cloudstack://vm-1").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("external-cloudstack://vm-1"), "{text}");
        assert!(text.contains("\"vm-1\""), "{text}");
    }
}
