//! LB health-check and stickiness policies.

use crate::requests::{
    CreateLbHealthCheckPolicy, CreateLbStickinessPolicy, DeleteLbHealthCheckPolicy,
    DeleteLbStickinessPolicy, ListLbHealthCheckPolicies, ListLbStickinessPolicies,
};
use crate::types::{HealthCheckPolicies, StickinessPolicies};
use crate::{AsyncStart, Client, Error};

impl Client {
    /// `createLBHealthCheckPolicy`: returns the rule's policies once the job finished.
    pub async fn create_lb_health_check_policy(
        &self,
        request: &CreateLbHealthCheckPolicy,
    ) -> Result<HealthCheckPolicies, Error> {
        self.create_request(request, "healthcheckpolicies").await
    }

    /// `createLBHealthCheckPolicy` without waiting.
    pub async fn create_lb_health_check_policy_begin(
        &self,
        request: &CreateLbHealthCheckPolicy,
    ) -> Result<AsyncStart, Error> {
        self.begin_request(request).await
    }

    /// `listLBHealthCheckPolicies`, all pages.
    pub async fn list_lb_health_check_policies(
        &self,
        request: &ListLbHealthCheckPolicies,
    ) -> Result<Vec<HealthCheckPolicies>, Error> {
        self.list_request(request, "healthcheckpolicies").await
    }

    /// `deleteLBHealthCheckPolicy`.
    pub async fn delete_lb_health_check_policy(
        &self,
        request: &DeleteLbHealthCheckPolicy,
    ) -> Result<(), Error> {
        self.run_request(request).await
    }

    /// `createLBStickinessPolicy`: returns the rule's policies once the job finished.
    pub async fn create_lb_stickiness_policy(
        &self,
        request: &CreateLbStickinessPolicy,
    ) -> Result<StickinessPolicies, Error> {
        self.create_request(request, "stickinesspolicies").await
    }

    /// `createLBStickinessPolicy` without waiting.
    pub async fn create_lb_stickiness_policy_begin(
        &self,
        request: &CreateLbStickinessPolicy,
    ) -> Result<AsyncStart, Error> {
        self.begin_request(request).await
    }

    /// `listLBStickinessPolicies`, all pages.
    pub async fn list_lb_stickiness_policies(
        &self,
        request: &ListLbStickinessPolicies,
    ) -> Result<Vec<StickinessPolicies>, Error> {
        self.list_request(request, "stickinesspolicies").await
    }

    /// `deleteLBStickinessPolicy`.
    pub async fn delete_lb_stickiness_policy(
        &self,
        request: &DeleteLbStickinessPolicy,
    ) -> Result<(), Error> {
        self.run_request(request).await
    }
}
