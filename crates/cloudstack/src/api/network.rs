//! VMs, zones, networks and projects.

use crate::requests::{
    ListLoadBalancerRuleInstances, ListNetworks, ListProjects, ListVirtualMachines, ListZones,
};
use crate::types::{Network, Project, VirtualMachine, Zone};
use crate::{Client, Error};

impl Client {
    /// `listVirtualMachines`, all pages.
    pub async fn list_virtual_machines(
        &self,
        request: &ListVirtualMachines,
    ) -> Result<Vec<VirtualMachine>, Error> {
        self.list_request(request, "virtualmachine").await
    }

    /// `listZones`, all pages.
    pub async fn list_zones(&self, request: &ListZones) -> Result<Vec<Zone>, Error> {
        self.list_request(request, "zone").await
    }

    /// `listNetworks`, all pages.
    pub async fn list_networks(&self, request: &ListNetworks) -> Result<Vec<Network>, Error> {
        self.list_request(request, "network").await
    }

    /// `listProjects`, all pages.
    pub async fn list_projects(&self, request: &ListProjects) -> Result<Vec<Project>, Error> {
        self.list_request(request, "project").await
    }

    /// `listLoadBalancerRuleInstances`: the VMs assigned to a rule (or assignable with
    /// `applied=false`).
    pub async fn list_load_balancer_rule_instances(
        &self,
        request: &ListLoadBalancerRuleInstances,
    ) -> Result<Vec<VirtualMachine>, Error> {
        self.list_request(request, "loadbalancerruleinstance").await
    }
}
