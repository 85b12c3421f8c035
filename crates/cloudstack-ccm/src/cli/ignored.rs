//! Flags of the Kubernetes cloud controller manager framework (`k8s.io/cloud-provider`,
//! `component-base`, klog) that do not apply to this controller manager.
//!
//! They are removed from the command line before parsing, each with a warning, so a
//! deployment written for the Go CCM starts unchanged.

use std::ffi::OsString;

/// Whether an ignored flag takes a value (`--flag value` or `--flag=value`) or is a
/// boolean (`--flag` or `--flag=value`, never a separate value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlagKind {
    /// A Go boolean flag.
    Bool,
    /// A flag with a value.
    Value,
}

/// Every accepted-and-ignored flag (without the leading `--`).
pub(crate) const IGNORED_FLAGS: &[(&str, FlagKind)] = &[
    ("use-service-account-credentials", FlagKind::Bool),
    ("profiling", FlagKind::Bool),
    ("contention-profiling", FlagKind::Bool),
    ("enable-leader-migration", FlagKind::Bool),
    ("authentication-skip-lookup", FlagKind::Bool),
    ("authentication-tolerate-lookup-failure", FlagKind::Bool),
    ("permit-address-sharing", FlagKind::Bool),
    ("permit-port-sharing", FlagKind::Bool),
    ("logtostderr", FlagKind::Bool),
    ("alsologtostderr", FlagKind::Bool),
    ("add-dir-header", FlagKind::Bool),
    ("skip-headers", FlagKind::Bool),
    ("skip-log-headers", FlagKind::Bool),
    ("one-output", FlagKind::Bool),
    ("log-json-split-stream", FlagKind::Bool),
    ("log-text-split-stream", FlagKind::Bool),
    ("cidr-allocator-type", FlagKind::Value),
    ("node-cidr-mask-size", FlagKind::Value),
    ("node-cidr-mask-size-ipv4", FlagKind::Value),
    ("node-cidr-mask-size-ipv6", FlagKind::Value),
    ("kube-api-qps", FlagKind::Value),
    ("kube-api-burst", FlagKind::Value),
    ("kube-api-content-type", FlagKind::Value),
    ("requestheader-uid-headers", FlagKind::Value),
    ("tls-sni-cert-key", FlagKind::Value),
    ("http2-max-streams-per-connection", FlagKind::Value),
    ("external-cloud-volume-plugin", FlagKind::Value),
    ("min-resync-period", FlagKind::Value),
    ("controller-start-interval", FlagKind::Value),
    ("leader-migration-config", FlagKind::Value),
    ("concurrent-node-syncs", FlagKind::Value),
    ("feature-gates", FlagKind::Value),
    ("log-flush-frequency", FlagKind::Value),
    ("log-json-info-buffer-size", FlagKind::Value),
    ("log-text-info-buffer-size", FlagKind::Value),
    ("vmodule", FlagKind::Value),
    ("log_dir", FlagKind::Value),
    ("log-dir", FlagKind::Value),
    ("log_file", FlagKind::Value),
    ("log-file", FlagKind::Value),
    ("log_file_max_size", FlagKind::Value),
    ("log-file-max-size", FlagKind::Value),
    ("stderrthreshold", FlagKind::Value),
    ("webhooks", FlagKind::Value),
    ("webhook-bind-address", FlagKind::Value),
    ("webhook-secure-port", FlagKind::Value),
    ("webhook-cert-dir", FlagKind::Value),
    ("webhook-tls-cert-file", FlagKind::Value),
    ("webhook-tls-private-key-file", FlagKind::Value),
];

/// Removes the ignored flags (and their values) from `args`, which starts with the
/// program name. Returns the remaining arguments and the names of the removed flags, in
/// order. Scanning stops at `--`.
pub(crate) fn strip_ignored(
    args: impl IntoIterator<Item = OsString>,
) -> (Vec<OsString>, Vec<String>) {
    let mut kept = Vec::new();
    let mut removed = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str() else {
            kept.push(arg);
            continue;
        };
        if text == "--" {
            kept.push(arg);
            kept.extend(args);
            break;
        }
        let Some(flag) = text.strip_prefix("--") else {
            kept.push(arg);
            continue;
        };
        let (name, has_inline_value) = match flag.split_once('=') {
            Some((name, _)) => (name, true),
            None => (flag, false),
        };
        match IGNORED_FLAGS.iter().find(|(ignored, _)| *ignored == name) {
            Some((ignored, kind)) => {
                if *kind == FlagKind::Value && !has_inline_value {
                    args.next();
                }
                removed.push(format!("--{ignored}"));
            }
            None => kept.push(arg),
        }
    }
    (kept, removed)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::strip_ignored;

    fn strip(args: &[&str]) -> (Vec<String>, Vec<String>) {
        let (kept, removed) = strip_ignored(args.iter().map(OsString::from));
        (
            kept.into_iter().map(|a| a.into_string().unwrap()).collect(),
            removed,
        )
    }

    #[test]
    fn removes_flags_and_their_values() {
        let (kept, removed) = strip(&[
            "ccm",
            "--profiling=false",
            "--contention-profiling",
            "--node-cidr-mask-size",
            "24",
            "--kube-api-qps=50",
            "--cluster-name=c1",
            "--use-service-account-credentials",
        ]);
        assert_eq!(kept, ["ccm", "--cluster-name=c1"]);
        assert_eq!(
            removed,
            [
                "--profiling",
                "--contention-profiling",
                "--node-cidr-mask-size",
                "--kube-api-qps",
                "--use-service-account-credentials"
            ]
        );
    }

    #[test]
    fn bool_flag_never_takes_the_next_argument() {
        let (kept, _) = strip(&["ccm", "--profiling", "--leader-elect=false"]);
        assert_eq!(kept, ["ccm", "--leader-elect=false"]);
    }

    #[test]
    fn stops_at_double_dash_and_keeps_unknown_flags() {
        let (kept, removed) = strip(&["ccm", "--nope", "--", "--profiling"]);
        assert_eq!(kept, ["ccm", "--nope", "--", "--profiling"]);
        assert!(removed.is_empty());
    }
}
