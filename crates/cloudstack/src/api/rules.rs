//! Firewall rules and network ACLs.

use crate::requests::{
    CreateFirewallRule, CreateNetworkAcl, DeleteFirewallRule, DeleteNetworkAcl, ListFirewallRules,
    ListNetworkAclLists, ListNetworkAcls, ListRoutingFirewallRules,
};
use crate::types::{FirewallRule, NetworkAcl, NetworkAclList};
use crate::{AsyncStart, Client, Error};

impl Client {
    /// `listFirewallRules`, all pages.
    pub async fn list_firewall_rules(
        &self,
        request: &ListFirewallRules,
    ) -> Result<Vec<FirewallRule>, Error> {
        self.list_request(request, "firewallrule").await
    }

    /// `createFirewallRule`: returns the rule once the job finished.
    pub async fn create_firewall_rule(
        &self,
        request: &CreateFirewallRule,
    ) -> Result<FirewallRule, Error> {
        self.create_request(request, "firewallrule").await
    }

    /// `createFirewallRule` without waiting.
    pub async fn create_firewall_rule_begin(
        &self,
        request: &CreateFirewallRule,
    ) -> Result<AsyncStart, Error> {
        self.begin_request(request).await
    }

    /// `deleteFirewallRule`.
    pub async fn delete_firewall_rule(&self, request: &DeleteFirewallRule) -> Result<(), Error> {
        self.run_request(request).await
    }

    /// `listRoutingFirewallRules`, all pages (the rules of ROUTED networks; the reply's items
    /// are firewall rules with `destcidrlist`).
    pub async fn list_routing_firewall_rules(
        &self,
        request: &ListRoutingFirewallRules,
    ) -> Result<Vec<FirewallRule>, Error> {
        self.list_request(request, "firewallrule").await
    }

    /// `listNetworkACLLists`, all pages.
    pub async fn list_network_acl_lists(
        &self,
        request: &ListNetworkAclLists,
    ) -> Result<Vec<NetworkAclList>, Error> {
        self.list_request(request, "networkacllist").await
    }

    /// `listNetworkACLs`, all pages.
    pub async fn list_network_acls(
        &self,
        request: &ListNetworkAcls,
    ) -> Result<Vec<NetworkAcl>, Error> {
        self.list_request(request, "networkacl").await
    }

    /// `createNetworkACL`: returns the item once the job finished.
    pub async fn create_network_acl(
        &self,
        request: &CreateNetworkAcl,
    ) -> Result<NetworkAcl, Error> {
        self.create_request(request, "networkacl").await
    }

    /// `createNetworkACL` without waiting.
    pub async fn create_network_acl_begin(
        &self,
        request: &CreateNetworkAcl,
    ) -> Result<AsyncStart, Error> {
        self.begin_request(request).await
    }

    /// `deleteNetworkACL`.
    pub async fn delete_network_acl(&self, request: &DeleteNetworkAcl) -> Result<(), Error> {
        self.run_request(request).await
    }
}
