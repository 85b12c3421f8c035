//! (what the Nodes need, the routes CloudStack has) → [`RoutePlan`]. Pure.
//!
//! * A Node's route that exists with the right next hop is kept (the Node is satisfied).
//! * One of ours for the Node's CIDR with another next hop is deleted and created again
//!   (a route's next hop cannot be changed in place, and a second route for the same CIDR
//!   would conflict).
//! * A route of ours that no Node needs is deleted, unless its Node is [kept](RouteInputs::keep_nodes)
//!   (it exists but its route cannot be worked out right now) or its CIDR lies outside
//!   `--cluster-cidr`.
//! * A route without our tag is never touched; a Node whose CIDR overlaps one gets no route
//!   and a warning (CloudStack would refuse the overlap).

use std::collections::BTreeSet;
use std::fmt;

use crate::cloud::cidr::Cidr;

use super::{DesiredRoute, ObservedRoute, within_cluster_cidrs};

/// What the plan is made from.
#[derive(Debug, Clone, Default)]
pub struct RouteInputs {
    /// The routes the Nodes need.
    pub desired: Vec<DesiredRoute>,
    /// Every route CloudStack lists.
    pub observed: Vec<ObservedRoute>,
    /// Nodes that exist but whose route cannot be worked out now: their routes stay.
    pub keep_nodes: BTreeSet<String>,
    /// `--cluster-cidr` (empty: every tagged route is ours to manage).
    pub cluster_cidrs: Vec<Cidr>,
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteStep {
    /// `createStaticRoute` + tags.
    Create(DesiredRoute),
    /// `deleteStaticRoute`.
    Delete {
        /// Route id.
        id: String,
        /// VPC id.
        vpc_id: String,
        /// Destination CIDR.
        cidr: String,
        /// Next hop.
        next_hop: Option<String>,
        /// Why.
        reason: String,
    },
}

impl RouteStep {
    /// The VPC whose router the step changes.
    pub fn vpc_id(&self) -> &str {
        match self {
            RouteStep::Create(route) => &route.vpc_id,
            RouteStep::Delete { vpc_id, .. } => vpc_id,
        }
    }
}

impl fmt::Display for RouteStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteStep::Create(route) => write!(
                f,
                "create static route {} via {} in VPC {} for Node {}",
                route.cidr, route.next_hop, route.vpc_id, route.node
            ),
            RouteStep::Delete {
                id,
                vpc_id,
                cidr,
                next_hop,
                reason,
            } => write!(
                f,
                "delete static route {id} ({cidr} via {}) in VPC {vpc_id}: {reason}",
                next_hop.as_deref().unwrap_or("a private gateway")
            ),
        }
    }
}

/// The changes to make, per the module's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutePlan {
    /// Deletions first, then creations.
    pub steps: Vec<RouteStep>,
    /// Nodes whose route already exists as it should.
    pub satisfied: BTreeSet<String>,
    /// Nodes that get no route, with why (named in a log line).
    pub warnings: Vec<String>,
}

impl RoutePlan {
    /// Nothing to change.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

impl fmt::Display for RoutePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for step in &self.steps {
            writeln!(f, "{step}")?;
        }
        for warning in &self.warnings {
            writeln!(f, "warning: {warning}")?;
        }
        Ok(())
    }
}

/// Plans the routes of `cluster` (its tag value).
pub fn plan(cluster: &str, inputs: &RouteInputs) -> RoutePlan {
    let mut out = RoutePlan::default();
    let mut deletes = Vec::new();
    let mut creates = Vec::new();
    let mut used: BTreeSet<&str> = BTreeSet::new();
    for want in &inputs.desired {
        let same = inputs.observed.iter().find(|r| {
            r.is_owned_by(cluster)
                && r.vpc_id == want.vpc_id
                && r.destination() == Some(want.cidr)
                && !used.contains(r.id.as_str())
        });
        if let Some(existing) = same {
            used.insert(&existing.id);
            let hop = want.next_hop.to_string();
            if existing.next_hop.as_deref() == Some(hop.as_str()) {
                out.satisfied.insert(want.node.clone());
            } else {
                deletes.push(delete(
                    existing,
                    format!("the next hop of Node {} is now {hop}", want.node),
                ));
                creates.push(RouteStep::Create(want.clone()));
            }
            continue;
        }
        let foreign = inputs.observed.iter().find(|r| {
            !r.is_owned_by(cluster)
                && r.vpc_id == want.vpc_id
                && r.destination().is_some_and(|d| d.overlaps(&want.cidr))
        });
        if let Some(foreign) = foreign {
            out.warnings.push(format!(
                "Node {}: pod CIDR {} overlaps static route {} ({}) that this cluster did not create; no route made",
                want.node, want.cidr, foreign.id, foreign.cidr
            ));
            continue;
        }
        creates.push(RouteStep::Create(want.clone()));
    }
    for route in inputs
        .observed
        .iter()
        .filter(|r| r.is_owned_by(cluster) && !used.contains(r.id.as_str()))
    {
        let node = route.node.as_deref().unwrap_or("(untagged)");
        if inputs.keep_nodes.contains(node) {
            continue;
        }
        if !within_cluster_cidrs(&inputs.cluster_cidrs, route.destination()) {
            continue;
        }
        let needed_elsewhere = inputs.desired.iter().any(|d| d.node == node);
        let reason = if needed_elsewhere {
            format!("Node {node} now needs another route")
        } else {
            format!("Node {node} no longer exists or has no pod CIDR")
        };
        deletes.push(delete(route, reason));
    }
    out.steps = deletes.into_iter().chain(creates).collect();
    out
}

fn delete(route: &ObservedRoute, reason: String) -> RouteStep {
    RouteStep::Delete {
        id: route.id.clone(),
        vpc_id: route.vpc_id.clone(),
        cidr: route.cidr.clone(),
        next_hop: route.next_hop.clone(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = "k1";

    fn want(node: &str, cidr: &str, hop: &str) -> DesiredRoute {
        DesiredRoute {
            node: node.into(),
            vpc_id: "vpc".into(),
            cidr: Cidr::parse(cidr).unwrap(),
            next_hop: hop.parse().unwrap(),
        }
    }

    fn have(id: &str, cidr: &str, hop: &str, cluster: Option<&str>, node: &str) -> ObservedRoute {
        ObservedRoute {
            id: id.into(),
            vpc_id: "vpc".into(),
            cidr: cidr.into(),
            next_hop: Some(hop.into()),
            cluster: cluster.map(str::to_owned),
            node: Some(node.into()),
        }
    }

    fn kinds(plan: &RoutePlan) -> Vec<String> {
        plan.steps
            .iter()
            .map(|s| match s {
                RouteStep::Create(r) => format!("create {} {}", r.cidr, r.next_hop),
                RouteStep::Delete { id, .. } => format!("delete {id}"),
            })
            .collect()
    }

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            inputs: RouteInputs,
            steps: &'static [&'static str],
            satisfied: &'static [&'static str],
            warnings: usize,
        }
        let cases = [
            Case {
                name: "new node",
                inputs: RouteInputs {
                    desired: vec![want("n1", "10.244.1.0/24", "10.100.1.10")],
                    ..Default::default()
                },
                steps: &["create 10.244.1.0/24 10.100.1.10"],
                satisfied: &[],
                warnings: 0,
            },
            Case {
                name: "in place",
                inputs: RouteInputs {
                    desired: vec![want("n1", "10.244.1.0/24", "10.100.1.10")],
                    observed: vec![have(
                        "r1",
                        "10.244.1.0/24",
                        "10.100.1.10",
                        Some(CLUSTER),
                        "n1",
                    )],
                    ..Default::default()
                },
                steps: &[],
                satisfied: &["n1"],
                warnings: 0,
            },
            Case {
                name: "address changed: delete then create",
                inputs: RouteInputs {
                    desired: vec![want("n1", "10.244.1.0/24", "10.100.1.20")],
                    observed: vec![have(
                        "r1",
                        "10.244.1.0/24",
                        "10.100.1.10",
                        Some(CLUSTER),
                        "n1",
                    )],
                    ..Default::default()
                },
                steps: &["delete r1", "create 10.244.1.0/24 10.100.1.20"],
                satisfied: &[],
                warnings: 0,
            },
            Case {
                name: "node gone; other cluster's and untagged routes untouched",
                inputs: RouteInputs {
                    observed: vec![
                        have("r1", "10.244.1.0/24", "10.100.1.10", Some(CLUSTER), "n1"),
                        have("r2", "10.244.2.0/24", "10.100.1.11", Some("other"), "n2"),
                        have("r3", "192.168.0.0/16", "10.100.1.12", None, "x"),
                    ],
                    ..Default::default()
                },
                steps: &["delete r1"],
                satisfied: &[],
                warnings: 0,
            },
            Case {
                name: "kept node and routes outside the cluster CIDR stay",
                inputs: RouteInputs {
                    observed: vec![
                        have("r1", "10.244.1.0/24", "10.100.1.10", Some(CLUSTER), "n1"),
                        have("r2", "172.30.0.0/24", "10.100.1.11", Some(CLUSTER), "n2"),
                        have("r3", "10.244.3.0/24", "10.100.1.12", Some(CLUSTER), "n3"),
                    ],
                    keep_nodes: BTreeSet::from(["n1".to_string()]),
                    cluster_cidrs: vec![Cidr::parse("10.244.0.0/16").unwrap()],
                    ..Default::default()
                },
                steps: &["delete r3"],
                satisfied: &[],
                warnings: 0,
            },
            Case {
                name: "overlap with a foreign route: warning, no create",
                inputs: RouteInputs {
                    desired: vec![want("n1", "10.244.1.0/24", "10.100.1.10")],
                    observed: vec![have("r9", "10.244.0.0/16", "10.100.1.99", None, "x")],
                    ..Default::default()
                },
                steps: &[],
                satisfied: &[],
                warnings: 1,
            },
            Case {
                name: "pod CIDR changed: old route deleted before the new one",
                inputs: RouteInputs {
                    desired: vec![want("n1", "10.244.7.0/24", "10.100.1.10")],
                    observed: vec![have(
                        "r1",
                        "10.244.1.0/24",
                        "10.100.1.10",
                        Some(CLUSTER),
                        "n1",
                    )],
                    ..Default::default()
                },
                steps: &["delete r1", "create 10.244.7.0/24 10.100.1.10"],
                satisfied: &[],
                warnings: 0,
            },
        ];
        for case in cases {
            let plan = plan(CLUSTER, &case.inputs);
            assert_eq!(kinds(&plan), case.steps, "{}", case.name);
            let satisfied: Vec<&str> = plan.satisfied.iter().map(String::as_str).collect();
            assert_eq!(satisfied, case.satisfied, "{}", case.name);
            assert_eq!(plan.warnings.len(), case.warnings, "{}", case.name);
        }
    }
}
