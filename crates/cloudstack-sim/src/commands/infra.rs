//! Read-only infrastructure commands: zones, networks (with service capabilities),
//! projects, capabilities and API discovery.

use super::access::owner_fields;
use super::{COMMANDS, Command, Ctx, embedded_tags, like, resolve, tags_match};
use crate::error::ApiError;
use crate::response::{Page, list_body};
use crate::scenario::LbProvider;
use crate::state::{Network, Service, State};
use serde_json::{Map, Value, json};

/// listZones.
pub fn list_zones(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let p = ctx.params;
    let id = resolve(p, "id", |i| ctx.state.zone(i).is_some())?;
    let ids = p.list("ids");
    let items = ctx
        .state
        .zones
        .iter()
        .filter(|z| id.is_none_or(|i| i == z.id))
        .filter(|z| ids.as_ref().is_none_or(|l| l.contains(&z.id)))
        .filter(|z| p.text("name").is_none_or(|n| n == z.name))
        .filter(|z| p.text("keyword").is_none_or(|k| like(&z.name, k)))
        .map(|z| {
            json!({
                "id": z.id, "name": z.name, "networktype": "Advanced", "allocationstate": "Enabled",
                "securitygroupsenabled": false, "localstorageenabled": false, "dns1": "8.8.8.8",
                "internaldns1": "10.0.0.2", "guestcidraddress": "10.1.0.0/16", "type": "Core",
                "tags": [],
            })
        })
        .collect();
    Ok(list_body("zone", items, page))
}

fn capability(name: &str, value: &str) -> Value {
    json!({"name": name, "value": value, "canchooseservicecapability": false})
}

const STICKINESS_METHODS: &str = r#"[{"methodname":"LbCookie","paramlist":[{"paramname":"cookie-name","required":false,"isflag":false,"description":" "},{"paramname":"mode","required":false,"isflag":false,"description":" "},{"paramname":"nocache","required":false,"isflag":true,"description":" "},{"paramname":"indirect","required":false,"isflag":true,"description":" "},{"paramname":"postonly","required":false,"isflag":true,"description":" "},{"paramname":"domain","required":false,"isflag":false,"description":" "}],"description":"This is loadbalancer cookie based stickiness method."},{"methodname":"AppCookie","paramlist":[{"paramname":"cookie-name","required":false,"isflag":false,"description":" "},{"paramname":"length","required":false,"isflag":false,"description":" "},{"paramname":"holdtime","required":false,"isflag":false,"description":" "},{"paramname":"request-learn","required":false,"isflag":true,"description":" "},{"paramname":"prefix","required":false,"isflag":true,"description":" "},{"paramname":"mode","required":false,"isflag":false,"description":" "}],"description":"This is App session based sticky method. Define session stickiness on an existing application cookie. It can be used only for a specific http traffic"},{"methodname":"SourceBased","paramlist":[{"paramname":"tablesize","required":false,"isflag":false,"description":" "},{"paramname":"expire","required":false,"isflag":false,"description":" "}],"description":"This is source based Stickiness method, it can be used for any type of protocol."}]"#;

/// Stickiness methods each provider supports: the HAProxy list (`VirtualRouterElement
/// .getHAProxyStickinessCapability`), which `NsxElement` and `NetrisElement` advertise too
/// (they never apply a policy: `createLBStickinessPolicy` succeeds and has no effect).
pub fn stickiness_methods(provider: LbProvider) -> &'static [&'static str] {
    match provider {
        LbProvider::VirtualRouter
        | LbProvider::Nsx
        | LbProvider::Netris
        | LbProvider::InternalLbVm => &["LbCookie", "AppCookie", "SourceBased"],
        LbProvider::Netscaler => &["LbCookie", "AppCookie", "SourceBased"],
    }
}

/// Whether the network's LB provider has the `SslTermination` capability
/// (`LoadBalancingRulesManagerImpl.getLBCapability`): NetScaler since 4.3, the Virtual
/// Router from 4.22 (apache/cloudstack#11468 added it to `VirtualRouterElement
/// .setCapabilities`; `SupportedProtocols` stayed `tcp, udp, tcp-proxy`); never NSX or
/// Netris (`NsxElement`/`NetrisElement.initCapabilities`).
pub fn ssl_termination(state: &State, network: &Network) -> bool {
    match network.lb_provider {
        LbProvider::VirtualRouter => state.version.at_least(4, 22),
        LbProvider::Netscaler => true,
        // `InternalLoadBalancerElement.setCapabilities` has no SslTermination either.
        LbProvider::Nsx | LbProvider::Netris | LbProvider::InternalLbVm => false,
    }
}

/// Whether the LB provider has the `HealthCheckPolicy` capability
/// (`LoadBalancingRulesManagerImpl.validateHealthCheck`): only the NetScaler; neither the
/// Virtual Router nor NSX nor Netris (their `initCapabilities` list none).
pub fn health_check_policy(provider: LbProvider) -> bool {
    provider == LbProvider::Netscaler
}

/// The Lb service's capabilities by provider (`getCapabilities` of `VirtualRouterElement`,
/// `NetscalerElement`, `NsxElement`, `NetrisElement`, and
/// `InternalLoadBalancerElement.setCapabilities`: the HAProxy algorithms and stickiness
/// methods, `tcp, udp`, scheme Internal only, no HealthCheckPolicy).
fn lb_capabilities(state: &State, network: &Network) -> Vec<Value> {
    let mut caps = vec![capability("SupportedLBIsolation", "dedicated")];
    match network.lb_provider {
        LbProvider::VirtualRouter => caps.extend([
            capability("SupportedLbAlgorithms", "roundrobin,leastconn,source"),
            capability("LbSchemes", "Public"),
            capability("SupportedStickinessMethods", STICKINESS_METHODS),
            capability("SupportedProtocols", "tcp, udp, tcp-proxy"),
        ]),
        LbProvider::Netscaler => caps.extend([
            capability("SupportedLbAlgorithms", "roundrobin,leastconn,source"),
            capability("LbSchemes", "Public"),
            capability("SupportedStickinessMethods", STICKINESS_METHODS),
            capability("SupportedProtocols", "tcp,udp,tcp-proxy"),
        ]),
        LbProvider::InternalLbVm => caps.extend([
            capability("SupportedLbAlgorithms", "roundrobin,leastconn,source"),
            capability("LbSchemes", "Internal"),
            capability("SupportedStickinessMethods", STICKINESS_METHODS),
            capability("SupportedProtocols", "tcp, udp"),
        ]),
        LbProvider::Nsx | LbProvider::Netris => caps.extend([
            capability("SupportedLbAlgorithms", "roundrobin,leastconn"),
            capability("LbSchemes", "Internal,Public"),
            capability("SupportedStickinessMethods", STICKINESS_METHODS),
            capability("SupportedProtocols", "tcp, udp"),
        ]),
    }
    if network.lb_provider == LbProvider::Netris {
        // `NetrisElement.getNetrisAutoScaleCounters`, serialised by Gson.
        caps.push(capability(
            "AutoScaleCounters",
            r#"[{"methodname":"CPU","paramlist":[]},{"methodname":"MEMORY","paramlist":[]}]"#,
        ));
        caps.push(capability("VmAutoScaling", "true"));
    }
    if health_check_policy(network.lb_provider) {
        caps.push(capability("HealthCheckPolicy", "true"));
    }
    if ssl_termination(state, network) {
        caps.push(capability("SslTermination", "true"));
    }
    caps
}

/// The capabilities of a service other than Lb, by provider.
fn service_capabilities(service: Service, provider: &str) -> Vec<Value> {
    let external = matches!(provider, "Nsx" | "Netris");
    match service {
        Service::SourceNat => vec![
            capability("SupportedSourceNatTypes", "peraccount"),
            capability("RedundantRouter", "true"),
        ],
        Service::PortForwarding if !external => {
            vec![capability("SupportedProtocols", "tcp,udp")]
        }
        Service::NetworkAcl if !external => vec![capability("SupportedProtocols", "tcp,udp,icmp")],
        Service::Firewall => vec![
            capability("SupportedProtocols", "tcp,udp,icmp"),
            capability("SupportedTrafficDirection", "ingress, egress"),
            capability("MultipleIps", "true"),
            capability("TrafficStatistics", "per public ip"),
            capability(
                "SupportedEgressProtocols",
                if external {
                    "tcp,udp,icmp,all"
                } else {
                    "tcp,udp,icmp, all"
                },
            ),
        ],
        _ => vec![],
    }
}

/// The capability value `name` of the network's `service`, as `getNetworkServiceCapabilities`
/// gives it; `None` when the network lacks the service or the provider lacks the capability.
pub fn service_capability(network: &Network, service: Service, name: &str) -> Option<String> {
    let provider = network.provider(service)?;
    service_capabilities(service, provider)
        .into_iter()
        .find(|c| c["name"] == name)
        .and_then(|c| c["value"].as_str().map(str::to_owned))
}

/// The `service[]` array of a network, as `listNetworks` shows it ([`Network::services`]:
/// which services, by which provider). Dhcp, Dns, UserData and StaticNat carry no
/// capability list.
pub fn services(state: &State, network: &Network) -> Value {
    let list = network.services().into_iter().map(|(service, provider)| {
        let caps = match service {
            Service::Lb => lb_capabilities(state, network),
            Service::Dhcp | Service::Dns | Service::UserData | Service::StaticNat => {
                return json!({"name": service.name(), "provider": [{"name": provider}]});
            }
            _ => service_capabilities(service, provider),
        };
        json!({"name": service.name(), "capability": caps, "provider": [{"name": provider}]})
    });
    Value::Array(list.collect())
}

/// The next hop of a ROUTED network's `ip4routes`: its router's public address — the
/// address flagged source NAT of the network, or of its VPC for a tier
/// (`ApiResponseHelper.createVpcResponse` lists `listByAssociatedVpc(vpc, true)`; the
/// network response is read as doing the same with the network's).
fn route_gateway(state: &State, n: &Network) -> Option<String> {
    state
        .ips
        .iter()
        .find(|ip| {
            ip.source_nat
                && match &n.vpc_id {
                    Some(vpc) => ip.vpc_id.as_ref() == Some(vpc),
                    None => ip.network_id.as_deref() == Some(n.id.as_str()),
                }
        })
        .map(|ip| ip.address.clone())
}

/// The `network` object.
pub fn render_network(state: &State, n: &Network) -> Value {
    let zone = state
        .zone(&n.zone_id)
        .map(|z| z.name.clone())
        .unwrap_or_default();
    let (base, prefix) = n.cidr.split_once('/').unwrap_or((&n.cidr, "24"));
    let prefix: u32 = prefix.parse().unwrap_or(24);
    let base: u32 = base
        .parse::<std::net::Ipv4Addr>()
        .map(u32::from)
        .unwrap_or_default();
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix.min(32))
    };
    let mut out = Map::new();
    for (k, v) in [
        ("id", json!(n.id)),
        ("name", json!(n.name)),
        ("displaytext", json!(n.name)),
        ("type", json!(n.guest_type.as_str())),
        ("traffictype", json!("Guest")),
        ("broadcastdomaintype", json!("Vlan")),
        ("state", json!("Implemented")),
        ("cidr", json!(n.cidr)),
        (
            "gateway",
            json!(std::net::Ipv4Addr::from(base + 1).to_string()),
        ),
        ("netmask", json!(std::net::Ipv4Addr::from(mask).to_string())),
        ("zoneid", json!(n.zone_id)),
        ("zonename", json!(zone)),
        ("networkofferingname", json!(n.offering_name())),
        ("ispersistent", json!(false)),
        ("restartrequired", json!(false)),
        ("acltype", json!("Account")),
        ("issystem", json!(false)),
        ("service", services(state, n)),
        ("tags", embedded_tags(state, "Network", &n.id)),
    ] {
        out.insert(k.into(), v);
    }
    // NetworkResponse.ipv4Routing/ipv4Routes (4.20+): static routing of the guest subnet
    // to the router's public address.
    if n.is_routed() {
        out.insert("ip4routing".into(), json!("Static"));
        let routes: Vec<Value> = route_gateway(state, n)
            .map(|gateway| json!({"subnet": n.cidr, "gateway": gateway}))
            .into_iter()
            .collect();
        out.insert("ip4routes".into(), Value::Array(routes));
    }
    if let Some(vpc) = n.vpc_id.as_ref().and_then(|v| state.vpc(v)) {
        out.insert("vpcid".into(), json!(vpc.id));
        out.insert("vpcname".into(), json!(vpc.name));
    }
    if let Some(acl) = n.acl_id.as_ref().and_then(|a| state.acl_list(a)) {
        out.insert("aclid".into(), json!(acl.id));
        out.insert("aclname".into(), json!(acl.name));
    }
    owner_fields(state, &n.owner, &mut out);
    Value::Object(out)
}

/// listNetworks.
pub fn list_networks(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?.skipping_projects();
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| state.network(i).is_some())?;
    let zone = resolve(p, "zoneid", |i| state.zone(i).is_some())?;
    let vpc = resolve(p, "vpcid", |i| state.vpc(i).is_some())?;
    let mut items = Vec::new();
    for n in &state.networks {
        let keep = id.is_none_or(|i| i == n.id)
            && scope.matches(&n.owner)
            && zone.is_none_or(|z| z == n.zone_id)
            && vpc.is_none_or(|v| n.vpc_id.as_deref() == Some(v))
            && p.text("name").is_none_or(|x| x == n.name)
            && p.text("type")
                .is_none_or(|t| t.eq_ignore_ascii_case(n.guest_type.as_str()))
            && p.bool("forvpc").is_none_or(|f| f == n.is_tier())
            && p.text("keyword").is_none_or(|k| like(&n.name, k))
            && tags_match(state, p, "Network", &n.id)?;
        if keep {
            items.push(render_network(state, n));
        }
    }
    Ok(list_body("network", items, page))
}

/// listProjects.
pub fn list_projects(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| state.project(i).is_some())?;
    let items = state
        .projects
        .iter()
        .filter(|x| id.is_none_or(|i| i == x.id))
        .filter(|x| {
            ctx.caller.is_admin() && p.bool("listall") == Some(true)
                || x.members.contains(&ctx.caller.account)
                || ctx.caller.is_admin() && id.is_some()
        })
        .filter(|x| p.text("name").is_none_or(|n| n == x.name))
        .filter(|x| p.text("keyword").is_none_or(|k| like(&x.name, k)))
        .map(|x| {
            json!({
                "id": x.id, "name": x.name, "displaytext": x.name, "state": "Active",
                "domain": "ROOT", "domainid": state.domain_id,
                "owner": x.members.iter().map(|m| json!({"account": m})).collect::<Vec<_>>(),
                "projectaccountname": format!("PrjAcct-{}-1", x.name),
                "vmlimit": "Unlimited", "iplimit": "Unlimited", "networklimit": "Unlimited",
                "tags": embedded_tags(state, "Project", &x.id),
            })
        })
        .collect();
    Ok(list_body("project", items, page))
}

/// listCapabilities.
pub fn list_capabilities(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let admin = ctx.caller.is_admin();
    let mut capability = json!({
        "cloudstackversion": state.version.text,
        "securitygroupsenabled": false,
        "dynamicrolesenabled": true,
        "userpublictemplateenabled": true,
        "supportELB": "false",
        "projectinviterequired": false,
        "allowusercreateprojects": true,
        "customdiskofferingminsize": 1,
        "customdiskofferingmaxsize": 1024,
        "regionsecondaryenabled": false,
        "kvmsnapshotenabled": true,
        // ManagementServerImpl.listCapabilities: the setting, or true for an admin caller.
        "allowuserviewdestroyedvm": admin,
        "allowuserexpungerecovervm": admin,
        "allowuserexpungerecovervolume": admin,
        "allowuserviewalldomainaccounts": false,
        "kubernetesserviceenabled": true,
        "kubernetesclusterexperimentalfeaturesenabled": false,
        "defaultuipagesize": 20,
    });
    // `expose.cloudstack.version.api.list.capabilities` off: no `cloudstackversion`.
    if !state.settings.expose_version_in_capabilities
        && let Value::Object(fields) = &mut capability
    {
        fields.remove("cloudstackversion");
    }
    if let Some(t) = &state.settings.throttle {
        capability["apilimitinterval"] = json!(t.interval_secs);
        capability["apilimitmax"] = json!(t.max);
    }
    Ok(json!({"capability": capability}))
}

/// listApis (`ApiDiscoveryServiceImpl.listApis`): the commands the caller's role allows
/// ([`super::access::may_call`]; a root admin all), on this version, in one list without
/// paging. Each names its `since` where the simulator knows it and its parameters from
/// CloudStack's listing (every type given as `string`). With `name`, that one command —
/// unknown or refused: `ListApisCmd.execute`'s `ServerApiException(INTERNAL_ERROR)`, 530.
pub fn list_apis(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let account = state.account(&ctx.caller.account);
    let allowed = |c: &Command| {
        c.exists_in(&state.version) && account.is_some_and(|a| super::access::may_call(a, c))
    };
    let items: Vec<Value> = match ctx.params.get("name") {
        Some(name) => {
            let command = COMMANDS.iter().find(|c| c.name == name && allowed(c));
            let command = command.ok_or_else(|| {
                ApiError::new(
                    530,
                    Some(9999),
                    "Api Discovery plugin was unable to find an api by that name or process any apis",
                )
            })?;
            vec![render_api(command)]
        }
        None => COMMANDS
            .iter()
            .filter(|c| allowed(c))
            .map(render_api)
            .collect(),
    };
    Ok(list_body("api", items, Page::all()))
}

/// One `api` item of listApis (`ApiDiscoveryResponse`).
fn render_api(c: &Command) -> Value {
    let params: Vec<Value> = crate::listing::command(c.name)
        .map(|listed| {
            listed
                .params
                .iter()
                .map(|p| json!({"name": p, "required": listed.required.contains(p), "type": "string"}))
                .collect()
        })
        .unwrap_or_default();
    let mut item = json!({
        "name": c.name, "description": "", "isasync": c.is_async, "related": "",
        "params": params, "response": [],
    });
    if let Some((major, minor)) = c.since {
        item["since"] = json!(format!("{major}.{minor}.0"));
    }
    item
}

/// listManagementServersMetrics (metrics plugin, 4.17+, root admin only).
pub fn list_management_servers_metrics(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let server = json!({
        "id": "00000000-0000-4000-8000-0000000000ee", "name": "cloudstack-sim", "state": "Up",
        "version": ctx.state.version.text, "serviceip": "127.0.0.1",
    });
    Ok(list_body("managementserver", vec![server], Page::all()))
}
