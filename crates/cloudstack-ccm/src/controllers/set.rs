//! Which controllers run, from `--controllers` (Kubernetes semantics: `*` enables every
//! controller that is on by default, `name` enables one, `-name` disables one and wins).

use std::fmt;

/// A controller this binary can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControllerName {
    /// `cloud-node`: initialise new nodes, refresh addresses.
    CloudNode,
    /// `cloud-node-lifecycle`: delete nodes whose VM is gone, taint shut-down ones.
    CloudNodeLifecycle,
    /// `service`: LoadBalancer Services.
    Service,
    /// `route`: VPC static routes for Node pod CIDRs.
    Route,
}

impl ControllerName {
    /// Every controller, in start order.
    pub const ALL: [ControllerName; 4] = [
        ControllerName::CloudNode,
        ControllerName::CloudNodeLifecycle,
        ControllerName::Service,
        ControllerName::Route,
    ];

    /// The name used in `--controllers`.
    pub fn as_str(self) -> &'static str {
        match self {
            ControllerName::CloudNode => "cloud-node",
            ControllerName::CloudNodeLifecycle => "cloud-node-lifecycle",
            ControllerName::Service => "service",
            ControllerName::Route => "route",
        }
    }

    /// Accepts the short names and the newer Kubernetes names (`cloud-node-controller`,
    /// `cloud-node-lifecycle-controller`, `service-lb-controller`, `node-route-controller`).
    fn from_flag(name: &str) -> Option<Self> {
        match name {
            "cloud-node" | "cloud-node-controller" => Some(ControllerName::CloudNode),
            "cloud-node-lifecycle" | "cloud-node-lifecycle-controller" => {
                Some(ControllerName::CloudNodeLifecycle)
            }
            "service" | "service-lb-controller" => Some(ControllerName::Service),
            "route" | "node-route-controller" => Some(ControllerName::Route),
            _ => None,
        }
    }
}

impl fmt::Display for ControllerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Names accepted in `--controllers` for controllers this binary does not have.
const IGNORED: &[&str] = &[];

/// An invalid `--controllers` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--controllers: unknown controller {name:?} (known: *, cloud-node, cloud-node-lifecycle, service, route; prefix with '-' to disable)"
)]
pub struct ControllerSetError {
    /// The unknown name as written.
    pub name: String,
}

/// The enabled controllers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerSet {
    enabled: [bool; ControllerName::ALL.len()],
}

impl ControllerSet {
    /// Every controller.
    pub fn all() -> Self {
        ControllerSet {
            enabled: [true; ControllerName::ALL.len()],
        }
    }

    /// Parses `--controllers` items. Also returns warnings for accepted names that do nothing
    /// here (none at present).
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<(Self, Vec<String>), ControllerSetError> {
        let mut star = false;
        let mut on = [false; ControllerName::ALL.len()];
        let mut off = [false; ControllerName::ALL.len()];
        let mut warnings = Vec::new();
        for item in items {
            let item = item.as_ref().trim();
            if item.is_empty() {
                continue;
            }
            if item == "*" {
                star = true;
                continue;
            }
            let (disable, name) = match item.strip_prefix('-') {
                Some(name) => (true, name),
                None => (false, item),
            };
            if IGNORED.contains(&name) {
                if !disable {
                    warnings.push(format!(
                        "--controllers: {name} does not apply to CloudStack and is ignored"
                    ));
                }
                continue;
            }
            let controller = ControllerName::from_flag(name).ok_or_else(|| ControllerSetError {
                name: item.to_owned(),
            })?;
            let index = Self::index(controller);
            if disable {
                off[index] = true;
            } else {
                on[index] = true;
            }
        }
        let enabled = std::array::from_fn(|i| !off[i] && (on[i] || star));
        Ok((ControllerSet { enabled }, warnings))
    }

    fn index(name: ControllerName) -> usize {
        ControllerName::ALL
            .iter()
            .position(|n| *n == name)
            .expect("ALL lists every name")
    }

    /// Whether `name` is enabled.
    pub(crate) fn is_enabled(&self, name: ControllerName) -> bool {
        self.enabled[Self::index(name)]
    }

    /// The enabled controllers, in start order.
    pub fn enabled(&self) -> Vec<ControllerName> {
        ControllerName::ALL
            .into_iter()
            .filter(|n| self.is_enabled(*n))
            .collect()
    }
}

impl fmt::Display for ControllerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .enabled()
            .into_iter()
            .map(ControllerName::as_str)
            .collect();
        if names.is_empty() {
            f.write_str("(none)")
        } else {
            f.write_str(&names.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ControllerName as N, ControllerSet};

    #[test]
    fn parse_table() {
        let cases: &[(&[&str], &[N])] = &[
            (
                &["*"],
                &[N::CloudNode, N::CloudNodeLifecycle, N::Service, N::Route],
            ),
            (
                &["*", "-service"],
                &[N::CloudNode, N::CloudNodeLifecycle, N::Route],
            ),
            (
                &["-service", "*"],
                &[N::CloudNode, N::CloudNodeLifecycle, N::Route],
            ),
            (&["cloud-node"], &[N::CloudNode]),
            (&["service", "-service"], &[]),
            (
                &["cloud-node-controller", "service-lb-controller"],
                &[N::CloudNode, N::Service],
            ),
            (
                &["*", "-route"],
                &[N::CloudNode, N::CloudNodeLifecycle, N::Service],
            ),
            (&["node-route-controller"], &[N::Route]),
            (&[], &[]),
        ];
        for (items, want) in cases {
            let (set, _) = ControllerSet::parse(items).unwrap();
            assert_eq!(set.enabled(), *want, "{items:?}");
        }
        assert_eq!(
            ControllerSet::parse(&["*"]).unwrap().0,
            ControllerSet::all()
        );
    }

    #[test]
    fn unknown_names_fail_and_route_is_a_controller() {
        let err = ControllerSet::parse(&["*", "-nodeipam"]).unwrap_err();
        assert!(err.to_string().contains("\"-nodeipam\""), "{err}");
        let (set, warnings) = ControllerSet::parse(&["route"]).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(set.enabled(), [N::Route]);
    }

    #[test]
    fn display_lists_enabled() {
        assert_eq!(
            ControllerSet::parse(&["*", "-service"])
                .unwrap()
                .0
                .to_string(),
            "cloud-node,cloud-node-lifecycle,route"
        );
        assert_eq!(
            ControllerSet::parse::<&str>(&[]).unwrap().0.to_string(),
            "(none)"
        );
    }
}
