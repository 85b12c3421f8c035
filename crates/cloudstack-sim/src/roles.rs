//! Roles as CloudStack has them: who may call which command.
//!
//! `DynamicRoleBasedAPIAccessChecker.checkAccess` decides for every signed request, in
//! `ApiServer.verifyRequest` (`checkCommandAvailable`) — before the signature is verified:
//! * the built-in Root Admin role (id 1) may call everything;
//! * any other role's `role_permissions` rows are tried in their `sort_order`: the first
//!   whose rule matches the command decides — `ALLOW` allows, anything else refuses
//!   (`checkApiPermissionByRole`). `Rule.matches` compares case-insensitively, `*` standing
//!   for `\w*`; `Rule.validate` accepts only letters, digits and `*`;
//! * no rule matching, the command is allowed only when its `@APICommand(authorized = …)`
//!   lists the role's type ([`crate::commands::Command::authorized`]).
//!
//! A refusal is the 432 `The API [<cmd>] does not exist or is not available for the
//! account …` (`UnavailableCommandException`, see [`crate::commands::access::refusal`]).
//!
//! An account without a `custom_role` has the default role of its type: a root admin may
//! call everything; the default **User** role (its rows seeded by
//! `create-default-role-api-mappings.sql`) may call every command the simulator has except
//! those annotated admin-only ([`crate::commands::Command::admin_only`]:
//! `listManagementServersMetrics`).

use serde::{Deserialize, Serialize};

/// Role of an account (its type), and the type of a custom role ([`RoleSpec`]).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A normal user account.
    #[default]
    User,
    /// A root administrator (sees everything, never throttled).
    Admin,
}

/// Name of the role CloudStack Kubernetes Service gives a project cluster's account
/// (`KubernetesClusterManagerImpl.createProjectKubernetesAccountRole`).
pub const CKS_PROJECT_ROLE: &str = "Project Kubernetes Service Role";

/// The APIs [`CKS_PROJECT_ROLE`] allows, in CloudStack's order
/// (`KubernetesClusterManagerImpl.PROJECT_KUBERNETES_ACCOUNT_ROLE_ALLOWED_APIS`); every other
/// command is refused by its final `*` DENY rule.
pub const CKS_PROJECT_ROLE_APIS: [&str; 31] = [
    "queryAsyncJobResult",
    "listVirtualMachines",
    "listVolumes",
    "createVolume",
    "deleteVolume",
    "attachVolume",
    "detachVolume",
    "resizeVolume",
    "listNetworks",
    "createSnapshot",
    "listSnapshots",
    "deleteSnapshot",
    "listPublicIpAddresses",
    "associateIpAddress",
    "disassociateIpAddress",
    "listLoadBalancerRules",
    "createLoadBalancerRule",
    "updateLoadBalancerRule",
    "deleteLoadBalancerRule",
    "assignToLoadBalancerRule",
    "removeFromLoadBalancerRule",
    "listLoadBalancerRuleInstances",
    "listFirewallRules",
    "createFirewallRule",
    "updateFirewallRule",
    "deleteFirewallRule",
    "listNetworkACLs",
    "createNetworkACL",
    "deleteNetworkACL",
    "listKubernetesClusters",
    "scaleKubernetesCluster",
];

/// The permission of a role rule (`RolePermission.Permission`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// The matching command is allowed.
    #[serde(alias = "ALLOW", alias = "Allow")]
    Allow,
    /// The matching command is refused.
    #[serde(alias = "DENY", alias = "Deny")]
    Deny,
}

/// One rule of a role (a `role_permissions` row).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// An API name, `*` standing for any run of word characters (`listLoadBalancer*`, `*`).
    pub rule: String,
    /// `allow` or `deny`.
    pub permission: Permission,
}

impl RuleSpec {
    /// An ALLOW rule.
    pub fn allow(rule: impl Into<String>) -> Self {
        Self {
            rule: rule.into(),
            permission: Permission::Allow,
        }
    }

    /// A DENY rule.
    pub fn deny(rule: impl Into<String>) -> Self {
        Self {
            rule: rule.into(),
            permission: Permission::Deny,
        }
    }
}

/// A custom role (`[[role]]` of a scenario): a name, the role type (user or admin) and its
/// rules in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleSpec {
    /// Role name, as accounts' `custom_role` names it.
    pub name: String,
    /// Role type: `user` or `admin` (a custom admin-type role is no root admin: its rules
    /// decide).
    #[serde(rename = "type", default)]
    pub role_type: Role,
    /// The rules, tried in order.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
}

impl RoleSpec {
    /// CloudStack Kubernetes Service's project role: type User, one ALLOW rule per
    /// [`CKS_PROJECT_ROLE_APIS`] entry, then `*` DENY
    /// (`KubernetesClusterManagerImpl.createProjectKubernetesAccountRole`).
    pub fn cks_project() -> Self {
        let mut rules: Vec<RuleSpec> = CKS_PROJECT_ROLE_APIS
            .iter()
            .map(|api| RuleSpec::allow(*api))
            .collect();
        rules.push(RuleSpec::deny("*"));
        Self {
            name: CKS_PROJECT_ROLE.into(),
            role_type: Role::User,
            rules,
        }
    }

    /// `Rule.validate`: a rule is a non-empty run of letters, digits and `*` ("Only API
    /// names and wildcards are allowed, invalid rule provided: …").
    pub fn validate(&self) -> Result<(), String> {
        match self.rules.iter().find(|r| !valid_rule(&r.rule)) {
            Some(bad) => Err(format!(
                "Only API names and wildcards are allowed, invalid rule provided: {}",
                bad.rule
            )),
            None => Ok(()),
        }
    }

    /// `checkApiPermissionByRole`: the first rule matching `command` decides (ALLOW →
    /// allowed, anything else → refused); no rule matching → allowed only when the
    /// command's `@APICommand(authorized = …)` lists this role's type.
    pub fn allows(&self, command: &str, authorized: &[Role]) -> bool {
        match self.rules.iter().find(|r| rule_matches(&r.rule, command)) {
            Some(rule) => rule.permission == Permission::Allow,
            None => authorized.contains(&self.role_type),
        }
    }
}

fn valid_rule(rule: &str) -> bool {
    !rule.is_empty() && rule.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'*')
}

/// `Rule.matches`: the whole command name, case-insensitively, against the rule where `*`
/// stands for `\w*` (any run, possibly empty, of letters, digits and `_`).
pub fn rule_matches(rule: &str, command: &str) -> bool {
    fn go(rule: &[u8], name: &[u8]) -> bool {
        match rule.split_first() {
            None => name.is_empty(),
            Some((b'*', rest)) => {
                // `\w*` is greedy with backtracking: try every run of word characters.
                let word_run = name
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                    .count();
                (0..=word_run).rev().any(|n| go(rest, &name[n..]))
            }
            Some((c, rest)) => name
                .split_first()
                .is_some_and(|(first, tail)| first.eq_ignore_ascii_case(c) && go(rest, tail)),
        }
    }
    !command.is_empty() && go(rule.as_bytes(), command.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(role_type: Role, rules: Vec<RuleSpec>) -> RoleSpec {
        RoleSpec {
            name: "r".into(),
            role_type,
            rules,
        }
    }

    #[test]
    fn a_star_stands_for_word_characters_and_case_does_not_matter() {
        assert!(rule_matches("*", "listZones"));
        assert!(rule_matches("list*", "listZones"));
        assert!(rule_matches("LIST*", "listzones"));
        assert!(rule_matches("*Zones", "listZones"));
        assert!(rule_matches("l*Z*s", "listZones"));
        assert!(rule_matches("listZones*", "listZones"), "* may be empty");
        assert!(rule_matches("listzones", "LISTZONES"));
        assert!(!rule_matches("listZone", "listZones"), "the whole name");
        assert!(!rule_matches("create*", "listZones"));
        assert!(!rule_matches("*", ""), "an empty command never matches");
        assert!(rule_matches("f***", "foo"));
    }

    #[test]
    fn rules_accept_only_names_and_wildcards() {
        assert!(
            role(Role::User, vec![RuleSpec::allow("list*")])
                .validate()
                .is_ok()
        );
        for bad in ["", "list.*", "^listZones$", "list Zones", "a,b"] {
            let error = role(Role::User, vec![RuleSpec::allow(bad)])
                .validate()
                .unwrap_err();
            assert!(
                error.starts_with("Only API names and wildcards are allowed"),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let r = role(
            Role::User,
            vec![
                RuleSpec::deny("listZones"),
                RuleSpec::allow("list*"),
                RuleSpec::deny("*"),
            ],
        );
        assert!(!r.allows("listZones", &[]));
        assert!(r.allows("listNetworks", &[]));
        assert!(!r.allows("createTags", &[]));
        let allow_first = role(
            Role::User,
            vec![RuleSpec::allow("listZones"), RuleSpec::deny("list*")],
        );
        assert!(allow_first.allows("listZones", &[]));
    }

    #[test]
    fn without_a_matching_rule_the_annotation_decides() {
        let all = [Role::User, Role::Admin];
        let user = role(Role::User, vec![RuleSpec::allow("listZones")]);
        assert!(!user.allows("listNetworks", &[]), "no rule, no annotation");
        assert!(user.allows("listApis", &all), "authorized for all types");
        let admin = role(Role::Admin, vec![]);
        assert!(admin.allows("listManagementServersMetrics", &[Role::Admin]));
        assert!(!user.allows("listManagementServersMetrics", &[Role::Admin]));
        // A DENY rule wins over the annotation.
        let denied = role(Role::User, vec![RuleSpec::deny("*")]);
        assert!(!denied.allows("listApis", &all));
    }

    #[test]
    fn the_cks_role_allows_its_31_apis_and_nothing_else() {
        let cks = RoleSpec::cks_project();
        assert_eq!(cks.name, CKS_PROJECT_ROLE);
        assert_eq!(cks.rules.len(), 32);
        assert_eq!(cks.rules.last(), Some(&RuleSpec::deny("*")));
        for api in CKS_PROJECT_ROLE_APIS {
            assert!(cks.allows(api, &[]), "{api}");
        }
        for refused in ["listCapabilities", "listApis", "createTags", "listSslCerts"] {
            assert!(
                !cks.allows(refused, &[Role::User, Role::Admin]),
                "{refused}"
            );
        }
    }
}
