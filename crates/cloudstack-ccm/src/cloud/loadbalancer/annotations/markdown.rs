//! `docs/annotations.md`, rendered from the table.

use super::*;

/// Renders `docs/annotations.md` from the table (a test keeps the file equal to it).
pub(crate) fn render_markdown() -> String {
    use std::fmt::Write as _;
    let mut md = String::new();
    md.push_str("# Service annotations\n\n");
    md.push_str(
        "<!-- Generated from crates/cloudstack-ccm/src/cloud/loadbalancer/annotations.rs; \
         run `UPDATE_DOCS=1 cargo test -p cloudstack-ccm annotations` to refresh. -->\n\n",
    );
    md.push_str(
        "Annotations on `type: LoadBalancer` Services. The keys of the Go CCM \
         (`apache/cloudstack-kubernetes-provider`) and of the leaseweb fork keep their meaning, \
         so Services move to this controller unchanged. An invalid value gives a Warning Event \
         (`LoadBalancerWarning`) naming the annotation and the value, and that field falls back \
         to its default (`keep-ip` to `true`, so an IP is never released by mistake) while the \
         rest of the Service is still reconciled. Where the default would open access or take \
         another address (`load-balancer-source-ranges`, `source-cidrs`, `address`), the value \
         last applied stays; a new load balancer with such a value is not created \
         (`SyncLoadBalancerFailed`).\n\n",
    );
    md.push_str("| Annotation | Value | Default | Set by | From |\n|---|---|---|---|---|\n");
    for a in ALL {
        let default = if a.default.is_empty() {
            "—".to_string()
        } else {
            format!("`{}`", a.default)
        };
        let set_by = match a.set_by {
            SetBy::User => "user",
            SetBy::Controller => "controller",
            SetBy::UserOrController => "controller (or user, first)",
        };
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} | {} |",
            a.key,
            a.kind.describe(),
            default,
            set_by,
            a.origin.label()
        );
    }
    for a in ALL {
        let _ = write!(
            md,
            "\n## `{}`\n\n{}\n\n- Value: {}\n- Example: `{}`\n- Supported: {}\n",
            a.key,
            a.description,
            a.kind.describe(),
            a.example,
            a.support
        );
        if a.set_by == SetBy::Controller {
            md.push_str("- Written by the controller; do not edit it by hand.\n");
        }
    }
    md
}
