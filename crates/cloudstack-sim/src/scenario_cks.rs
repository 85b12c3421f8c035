//! A built-in scenario with the keys CloudStack Kubernetes Service gives a project-owned
//! cluster: an account of the custom role "Project Kubernetes Service Role" (31 APIs, then
//! `*` DENY), a member of the project, and project-owned networks and nodes.

use crate::roles::{CKS_PROJECT_ROLE, RoleSpec};
use crate::scenario::{AccountSpec, AclListSpec, LbProvider, NetworkSpec, Role, Scenario, VpcSpec};
use crate::scenario_small::{SMALL_PROJECT, SMALL_ZONE};

/// The project cluster's account in [`Scenario::cks_project`]: `kubeadmin-<first segment
/// of the project's uuid>` (`KubernetesClusterManagerImpl.getProjectKubernetesAccount`),
/// keys `<name>-api-key` / `<name>-secret-key`.
pub const CKS_ACCOUNT: &str = "kubeadmin-5e1f0c2a";
/// Isolated Virtual Router network of project `proj1` in [`Scenario::cks_project`].
pub const CKS_NETWORK: &str = "proj-net";
/// Name prefix of the project's three Running VMs (`pnode-1..3`) on [`CKS_NETWORK`].
pub const CKS_NODE_PREFIX: &str = "pnode-";
/// VPC of project `proj1` in [`Scenario::cks_project`].
pub const CKS_VPC: &str = "proj-vpc";
/// Tier of [`CKS_VPC`].
pub const CKS_TIER: &str = "proj-tier";
/// ACL list of [`CKS_TIER`].
pub const CKS_ACL: &str = "proj-tier-acl";

impl Scenario {
    /// [`Scenario::small`] plus, owned by project `proj1` (id
    /// [`crate::SMALL_PROJECT_ID`]): the isolated Virtual Router network `proj-net`
    /// (10.2.1.0/24) with Running VMs `pnode-1..3` (10.2.1.10–12, default NIC there), the
    /// VPC `proj-vpc` (10.230.0.0/16) with tier `proj-tier` (10.230.1.0/24) and its ACL list
    /// `proj-tier-acl`; the role [`RoleSpec::cks_project`]; and the account
    /// [`CKS_ACCOUNT`] of that role, a member of `proj1`.
    pub fn cks_project() -> Self {
        let mut scenario = Scenario::small();
        let project = Some(SMALL_PROJECT.to_owned());
        scenario.vpcs.push(VpcSpec {
            id: None,
            name: CKS_VPC.into(),
            zone: SMALL_ZONE.into(),
            cidr: "10.230.0.0/16".into(),
            account: None,
            project: project.clone(),
        });
        scenario.acl_lists.push(AclListSpec {
            id: None,
            name: CKS_ACL.into(),
            vpc: CKS_VPC.into(),
            description: Some("ingress rules of proj-tier".into()),
        });
        let network = |name: &str, cidr: &str, vpc: Option<&str>, acl: Option<&str>| NetworkSpec {
            name: name.into(),
            zone: SMALL_ZONE.into(),
            cidr: cidr.into(),
            vpc: vpc.map(str::to_owned),
            acl: acl.map(str::to_owned),
            lb_provider: LbProvider::VirtualRouter,
            project: project.clone(),
            ..NetworkSpec::default()
        };
        scenario.networks.extend([
            network(CKS_NETWORK, "10.2.1.0/24", None, None),
            network(CKS_TIER, "10.230.1.0/24", Some(CKS_VPC), Some(CKS_ACL)),
        ]);
        scenario.add_vms(CKS_NETWORK, CKS_NODE_PREFIX, 3);
        scenario.roles.push(RoleSpec::cks_project());
        let mut account = AccountSpec::new(CKS_ACCOUNT, Role::User, &[SMALL_PROJECT]);
        account.custom_role = Some(CKS_PROJECT_ROLE.into());
        scenario.accounts.push(account);
        scenario
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario_small::SMALL_PROJECT_ID;
    use crate::state::{Owner, State};

    #[test]
    fn the_account_is_named_after_the_project_uuid_and_has_the_role() {
        let first = SMALL_PROJECT_ID.split('-').next().unwrap();
        assert_eq!(CKS_ACCOUNT, format!("kubeadmin-{first}"));
        let state = State::from_scenario(&Scenario::cks_project()).unwrap();
        let account = state.account(CKS_ACCOUNT).unwrap();
        assert_eq!(account.custom_role, Some(RoleSpec::cks_project()));
        let project = state.project(SMALL_PROJECT_ID).unwrap();
        assert!(project.members.iter().any(|m| m == CKS_ACCOUNT));
        let owned = Owner::Project(SMALL_PROJECT_ID.into());
        let nodes: Vec<_> = state
            .vms
            .iter()
            .filter(|v| v.name.starts_with(CKS_NODE_PREFIX))
            .collect();
        assert_eq!(nodes.len(), 3);
        assert!(
            nodes
                .iter()
                .all(|v| v.owner == owned && v.state == "Running")
        );
        for name in [CKS_NETWORK, CKS_TIER] {
            let n = state.networks.iter().find(|n| n.name == name).unwrap();
            assert_eq!(n.owner, owned, "{name}");
        }
    }

    #[test]
    fn an_unknown_or_mistyped_role_fails_the_scenario() {
        let mut scenario = Scenario::cks_project();
        scenario.accounts.last_mut().unwrap().custom_role = Some("nope".into());
        let error = State::from_scenario(&scenario).unwrap_err().to_string();
        assert!(
            error.contains("custom_role") && error.contains("nope"),
            "{error}"
        );
        let mut scenario = Scenario::cks_project();
        scenario.accounts.last_mut().unwrap().role = Role::Admin;
        assert!(State::from_scenario(&scenario).is_err());
        let mut scenario = Scenario::cks_project();
        scenario.roles[0].rules[0].rule = "list.*".into();
        let error = State::from_scenario(&scenario).unwrap_err().to_string();
        assert!(error.contains("Only API names and wildcards"), "{error}");
    }
}
