//! VPC static routes: createStaticRoute, listStaticRoutes, deleteStaticRoute.
//!
//! Follows CloudStack's `CreateStaticRouteCmd`, `ListStaticRoutesCmd`, `DeleteStaticRouteCmd`
//! and `VpcManagerImpl.createStaticRoute` / `detectRoutesConflict` / `revokeStaticRoute`:
//! a route sends a CIDR outside the VPC to a private gateway or, since 4.22 (the `vpcid` +
//! `nexthop` parameters), to a next-hop address inside the VPC CIDR or a private gateway's
//! network. A private gateway that is not `Ready` takes no route (431 "Gateway is not in the
//! Ready state: …", in every version). Routes of one VPC never overlap (537). Jobs queue on
//! the VPC (`vpcSyncObject`).

use super::access::owner_fields;
use super::tags_match;
use super::{
    Ctx, create_reply, embedded_tags, job_reply, lookup, lookup_required, resolve, success,
};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::list_body;
use crate::scenario::GatewayState;
use crate::state::{State, StaticRoute, new_id, now_text};
use serde_json::{Map, Value, json};
use std::net::Ipv4Addr;

/// The first version whose `createStaticRoute` takes `vpcid` + `nexthop` (before it,
/// `gatewayid` is a required parameter and the others are unknown, hence ignored).
pub const NEXT_HOP_SINCE: (u32, u32) = (4, 22);

/// CloudStack's `NetUtils.getLinkLocalCIDR()`.
const LINK_LOCAL: &str = "169.254.0.0/16";

/// An IPv4 network: base address and prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ipv4Cidr {
    base: u32,
    prefix: u32,
}

impl Ipv4Cidr {
    /// `a.b.c.d/n` with `n` in 0..=32 (`NetUtils.isValidIp4Cidr`); host bits are ignored.
    fn parse(text: &str) -> Option<Self> {
        let (address, prefix) = text.split_once('/')?;
        let address: Ipv4Addr = address.parse().ok()?;
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let prefix: u32 = prefix.parse().ok().filter(|p| *p <= 32)?;
        Some(Self {
            base: u32::from(address) & Self::mask(prefix),
            prefix,
        })
    }

    /// A network from an address and a dotted netmask.
    fn from_netmask(address: &str, netmask: &str) -> Option<Self> {
        let mask = u32::from(netmask.parse::<Ipv4Addr>().ok()?);
        Self::parse(&format!("{address}/{}", mask.count_ones()))
    }

    fn mask(prefix: u32) -> u32 {
        if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - prefix)
        }
    }

    /// `NetUtils.isNetworksOverlap`: one network contains the other.
    fn overlaps(&self, other: &Self) -> bool {
        let prefix = self.prefix.min(other.prefix);
        self.base & Self::mask(prefix) == other.base & Self::mask(prefix)
    }

    /// `NetUtils.isIpWithInCidrRange`.
    fn contains(&self, address: &str) -> bool {
        address
            .parse::<Ipv4Addr>()
            .is_ok_and(|a| u32::from(a) & Self::mask(self.prefix) == self.base)
    }
}

fn overlap(a: &str, b: &str) -> bool {
    matches!((Ipv4Cidr::parse(a), Ipv4Cidr::parse(b)), (Some(a), Some(b)) if a.overlaps(&b))
}

/// `StaticRouteVO.toString()`: `StaticRoute[<uuid>|<cidr>|<gateway>]`.
fn describe(route: &StaticRoute) -> String {
    format!(
        "StaticRoute[{}|{}|{}]",
        route.id,
        route.cidr,
        route.gateway_id.as_deref().unwrap_or("null")
    )
}

/// The `staticroute` object (`ApiResponseHelper.createStaticRouteResponse`).
pub fn render_route(state: &State, route: &StaticRoute) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(route.id));
    out.insert("state".into(), json!(route.state));
    out.insert("vpcid".into(), json!(route.vpc_id));
    out.insert("cidr".into(), json!(route.cidr));
    if let Some(gateway) = route
        .gateway_id
        .as_deref()
        .and_then(|g| state.private_gateway(g))
    {
        out.insert("gatewayid".into(), json!(gateway.id));
    }
    if let Some(next_hop) = &route.next_hop {
        out.insert("nexthop".into(), json!(next_hop));
    }
    owner_fields(state, &route.owner, &mut out);
    out.insert(
        "tags".into(),
        embedded_tags(state, "StaticRoute", &route.id),
    );
    Value::Object(out)
}

/// listStaticRoutes (`VpcManagerImpl.listStaticRoutes`): by id, VPC, gateway, state, tags.
/// The `id`, `vpcid` and `gatewayid` filters are resolved before the command runs
/// (`ParamProcessWorker`): one that names nothing — a deleted route included, its row is
/// deleted (`StaticRouteVO` has no `removed` column) — is a 431. Scoped by
/// `buildACLSearchParameters` like every list: a project's routes only with `projectid`,
/// even by `id`.
pub fn list_static_routes(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| state.static_route(i).is_some())?;
    let vpc = resolve(p, "vpcid", |i| state.vpc(i).is_some())?;
    let gateway = resolve(p, "gatewayid", |i| state.private_gateway(i).is_some())?;
    let mut items = Vec::new();
    for route in &state.static_routes {
        let keep = scope.matches(&route.owner)
            && id.is_none_or(|i| i == route.id)
            && vpc.is_none_or(|v| v == route.vpc_id)
            && gateway.is_none_or(|g| route.gateway_id.as_deref() == Some(g))
            && p.text("state")
                .is_none_or(|s| s.eq_ignore_ascii_case(&route.state))
            && tags_match(state, p, "StaticRoute", &route.id)?;
        if keep {
            items.push(render_route(state, route));
        }
    }
    Ok(list_body("staticroute", items, page))
}

/// createStaticRoute (`CreateStaticRouteCmd.create` → `VpcManagerImpl.createStaticRoute`).
pub fn create_static_route(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let with_next_hop = state.version.at_least(NEXT_HOP_SINCE.0, NEXT_HOP_SINCE.1);
    let cidr = p.required("cidr")?.to_owned();
    if !with_next_hop {
        // Before 4.22 `gatewayid` is required and `vpcid`/`nexthop` do not exist.
        p.required_uuid("gatewayid")?;
    }
    let gateway = lookup(p, "gatewayid", |g| state.private_gateway(g))?;
    let next_hop = if with_next_hop {
        p.text("nexthop").map(str::to_owned)
    } else {
        None
    };
    let requested_vpc = if with_next_hop {
        lookup(p, "vpcid", |v| state.vpc(v))?
    } else {
        None
    };
    let vpc = match (gateway, &next_hop) {
        (None, None) => {
            return Err(ApiError::param(
                "one of gatewayId and nextHop must be specified",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(ApiError::param(
                "Only one of gatewayId and nextHop can be specified",
            ));
        }
        (Some(g), None) => {
            if g.state != GatewayState::Ready {
                return Err(ApiError::param(format!(
                    "Gateway is not in the {} state: {}",
                    GatewayState::Ready,
                    g.state
                )));
            }
            if requested_vpc.is_some_and(|v| v.id != g.vpc_id) {
                return Err(ApiError::param("Invalid gateway id is given"));
            }
            state
                .vpc(&g.vpc_id)
                .ok_or_else(|| ApiError::param("Invalid gateway id is given"))?
        }
        (None, Some(_)) => {
            requested_vpc.ok_or_else(|| ApiError::param("vpcId must be specified"))?
        }
    };
    ctx.caller
        .check(state, &vpc.owner, &format!("VPC {}", vpc.id))?;
    let parsed = Ipv4Cidr::parse(&cidr)
        .ok_or_else(|| ApiError::param(format!("Invalid format for cidr {cidr}")))?;
    if overlap(&vpc.cidr, &cidr) {
        return Err(ApiError::param(format!(
            "CIDR should be outside of VPC cidr {}",
            vpc.cidr
        )));
    }
    if overlap(&cidr, LINK_LOCAL) {
        return Err(ApiError::param(format!(
            "CIDR should be outside of link local cidr {LINK_LOCAL}"
        )));
    }
    if let Some(hop) = &next_hop {
        let in_vpc = Ipv4Cidr::parse(&vpc.cidr).is_some_and(|c| c.contains(hop));
        let on_gateway = state
            .private_gateways
            .iter()
            .filter(|g| g.vpc_id == vpc.id)
            .filter_map(|g| Ipv4Cidr::from_netmask(&g.gateway, &g.netmask))
            .any(|c| c.contains(hop));
        if !in_vpc && !on_gateway {
            return Err(ApiError::param(format!(
                "Next hop {hop} is invalid. It must be within VPC CIDR or on the same public or private network"
            )));
        }
    }
    if let Some(existing) = state.static_routes.iter().find(|r| {
        r.vpc_id == vpc.id && Ipv4Cidr::parse(&r.cidr).is_some_and(|c| c.overlaps(&parsed))
    }) {
        return Err(ApiError::conflict(format!(
            "New static route cidr conflicts with existing route {}",
            describe(existing)
        )));
    }
    let route = StaticRoute {
        id: new_id(),
        vpc_id: vpc.id.clone(),
        cidr,
        gateway_id: gateway.map(|g| g.id.clone()),
        next_hop,
        state: "Add".into(),
        owner: vpc.owner.clone(),
        created: now_text(),
    };
    let (route_id, queue) = (route.id.clone(), route.vpc_id.clone());
    ctx.state.static_routes.push(route);
    let job = ctx.start_job(
        Some(queue),
        Some(("StaticRoute", route_id.clone())),
        JobAction::CreateStaticRoute {
            route_id: route_id.clone(),
        },
    );
    Ok(create_reply(&route_id, &job))
}

/// Job: the VPC router has the route (`applyStaticRoute` marks it `Active`).
pub fn finish_create(state: &mut State, route_id: &str) -> Result<Value, ApiError> {
    let route = state
        .static_routes
        .iter_mut()
        .find(|r| r.id == route_id)
        .ok_or_else(|| ApiError::internal("Failed to create static route"))?;
    route.state = "Active".into();
    let route = route.clone();
    Ok(json!({"staticroute": render_route(state, &route)}))
}

/// deleteStaticRoute (`DeleteStaticRouteCmd`; the revoke runs in the job).
pub fn delete_static_route(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let route = lookup_required(ctx.params, "id", |id| state.static_route(id))?;
    ctx.caller
        .check(state, &route.owner, &format!("static route {}", route.id))?;
    let (route_id, queue) = (route.id.clone(), route.vpc_id.clone());
    let job = ctx.start_job(
        Some(queue),
        Some(("StaticRoute", route_id.clone())),
        JobAction::DeleteStaticRoute { route_id },
    );
    Ok(job_reply(&job))
}

/// Job: revoke the route and forget its tags.
pub fn finish_delete(state: &mut State, route_id: &str) -> Result<Value, ApiError> {
    state.static_routes.retain(|r| r.id != route_id);
    state
        .tags
        .retain(|t| !(t.resource_type == "StaticRoute" && t.resource_id == route_id));
    Ok(success())
}

#[cfg(test)]
mod tests {
    use super::Ipv4Cidr;

    #[test]
    fn cidr_parsing_and_overlap_follow_netutils() {
        let pods = Ipv4Cidr::parse("10.244.1.0/24").unwrap();
        assert!(pods.overlaps(&Ipv4Cidr::parse("10.244.0.0/16").unwrap()));
        assert!(!pods.overlaps(&Ipv4Cidr::parse("10.244.2.0/24").unwrap()));
        assert!(Ipv4Cidr::parse("0.0.0.0/0").unwrap().overlaps(&pods));
        for bad in [
            "10.244.1.0",
            "10.244.1.0/33",
            "10.244.1/24",
            "fd00::/64",
            "10.0.0.0/+8",
        ] {
            assert!(Ipv4Cidr::parse(bad).is_none(), "{bad}");
        }
        assert!(
            Ipv4Cidr::parse("10.100.0.0/16")
                .unwrap()
                .contains("10.100.1.7")
        );
        assert!(
            !Ipv4Cidr::parse("10.100.0.0/16")
                .unwrap()
                .contains("10.101.1.7")
        );
        let gw = Ipv4Cidr::from_netmask("172.16.0.1", "255.255.255.0").unwrap();
        assert!(gw.contains("172.16.0.9"));
    }
}
