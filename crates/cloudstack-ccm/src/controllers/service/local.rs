//! `externalTrafficPolicy`: which members a Service's rules get. `Cluster` (the default):
//! every eligible Node, and no endpoint is read. `Local`: per rule, the eligible Nodes
//! holding a ready endpoint for its port; a rule with none keeps its members (with a
//! Warning), so vanished endpoints never empty a load balancer.

use k8s_openapi::api::core::v1::Service;

use super::endpoint_watch::{EndpointWatch, EndpointsNotRead};
use super::endpoints::is_local;
use crate::cloud::loadbalancer::members::MemberSelection;

/// What the member selection of a Service is: every eligible Node for `Cluster`, the
/// Nodes with endpoints for `Local` (read from the shared endpoint watch).
pub(crate) async fn member_selection(
    service: &Service,
    endpoints: &EndpointWatch,
) -> Result<MemberSelection, EndpointsNotRead> {
    if !is_local(service) {
        endpoints.forget(service);
        return Ok(MemberSelection::AllEligible);
    }
    Ok(MemberSelection::NodesWithEndpoints(
        endpoints.nodes_by_rule(service).await?,
    ))
}
