//! Load-balancer rules and their members.

use crate::requests::{
    AssignToLoadBalancerRule, CreateLoadBalancer, CreateLoadBalancerRule, DeleteLoadBalancer,
    DeleteLoadBalancerRule, ListLoadBalancerRules, ListLoadBalancers, RemoveFromLoadBalancerRule,
    Request, UpdateLoadBalancerRule,
};
use crate::types::{InternalLoadBalancer, LoadBalancerRule};
use crate::{AsyncStart, Client, Error};

impl Client {
    /// `listLoadBalancerRules`, all pages.
    pub async fn list_load_balancer_rules(
        &self,
        request: &ListLoadBalancerRules,
    ) -> Result<Vec<LoadBalancerRule>, Error> {
        self.list_request(request, "loadbalancerrule").await
    }

    /// `createLoadBalancerRule`: returns the rule once the job finished.
    pub async fn create_load_balancer_rule(
        &self,
        request: &CreateLoadBalancerRule,
    ) -> Result<LoadBalancerRule, Error> {
        self.create_request(request, "loadbalancer").await
    }

    /// `createLoadBalancerRule` without waiting: `id` is the new rule id, known at once.
    pub async fn create_load_balancer_rule_begin(
        &self,
        request: &CreateLoadBalancerRule,
    ) -> Result<AsyncStart, Error> {
        self.begin_request(request).await
    }

    /// Waits for a job started with [`Client::create_load_balancer_rule_begin`].
    pub async fn create_load_balancer_rule_finish(
        &self,
        start: &AsyncStart,
    ) -> Result<LoadBalancerRule, Error> {
        self.wait_job_object(
            CreateLoadBalancerRule::COMMAND,
            &start.jobid,
            "loadbalancer",
        )
        .await
    }

    /// `updateLoadBalancerRule`.
    pub async fn update_load_balancer_rule(
        &self,
        request: &UpdateLoadBalancerRule,
    ) -> Result<(), Error> {
        self.run_request(request).await
    }

    /// `deleteLoadBalancerRule`.
    pub async fn delete_load_balancer_rule(
        &self,
        request: &DeleteLoadBalancerRule,
    ) -> Result<(), Error> {
        self.run_request(request).await
    }

    /// `assignToLoadBalancerRule`.
    pub async fn assign_to_load_balancer_rule(
        &self,
        request: &AssignToLoadBalancerRule,
    ) -> Result<(), Error> {
        self.run_request(request).await
    }

    /// `removeFromLoadBalancerRule`.
    pub async fn remove_from_load_balancer_rule(
        &self,
        request: &RemoveFromLoadBalancerRule,
    ) -> Result<(), Error> {
        self.run_request(request).await
    }

    /// `listLoadBalancers` (internal load-balancer rules), all pages.
    pub async fn list_load_balancers(
        &self,
        request: &ListLoadBalancers,
    ) -> Result<Vec<InternalLoadBalancer>, Error> {
        self.list_request(request, "loadbalancer").await
    }

    /// `createLoadBalancer`: returns the internal rule once the job finished.
    pub async fn create_load_balancer(
        &self,
        request: &CreateLoadBalancer,
    ) -> Result<InternalLoadBalancer, Error> {
        self.create_request(request, "loadbalancer").await
    }

    /// `deleteLoadBalancer`.
    pub async fn delete_load_balancer(&self, request: &DeleteLoadBalancer) -> Result<(), Error> {
        self.run_request(request).await
    }
}
