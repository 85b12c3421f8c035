//! Typed request structs, one per command, named after the command in UpperCamelCase.
//! Field names are the CloudStack parameter names; `Option` fields are optional parameters,
//! `Vec<String>` fields are lists (comma-joined), `Vec<(String, String)>` fields are maps
//! (`tags[i].key/value`, `vmidipmap[i].vmid/vmip`, `param[i].name/value`).

use crate::Params;

mod address;
mod certs;
mod lb;
mod network;
mod policy;
mod routes;
mod rules;
mod server;
mod tags;

#[cfg(test)]
mod contract_tests;

pub use address::{AssociateIpAddress, DisassociateIpAddress, ListPublicIpAddresses};
pub use certs::{
    AssignCertToLoadBalancer, DeleteSslCert, ListSslCerts, RemoveCertFromLoadBalancer,
    UploadSslCert,
};
pub use lb::{
    AssignToLoadBalancerRule, CreateLoadBalancer, CreateLoadBalancerRule, DeleteLoadBalancer,
    DeleteLoadBalancerRule, ListLoadBalancerRuleInstances, ListLoadBalancerRules,
    ListLoadBalancers, RemoveFromLoadBalancerRule, UpdateLoadBalancerRule,
};
pub use network::{ListNetworks, ListProjects, ListVirtualMachines, ListZones};
pub use policy::{
    CreateLbHealthCheckPolicy, CreateLbStickinessPolicy, DeleteLbHealthCheckPolicy,
    DeleteLbStickinessPolicy, ListLbHealthCheckPolicies, ListLbStickinessPolicies,
};
pub use routes::{CreateStaticRoute, DeleteStaticRoute, ListStaticRoutes};
pub use rules::{
    CreateFirewallRule, CreateNetworkAcl, CreateRoutingFirewallRule, DeleteFirewallRule,
    DeleteNetworkAcl, DeleteRoutingFirewallRule, ListFirewallRules, ListNetworkAclLists,
    ListNetworkAcls, ListRoutingFirewallRules,
};
pub use server::{ListAccounts, ListApis, ListAsyncJobs, ListCapabilities, QueryAsyncJobResult};
pub use tags::{CreateTags, DeleteTags, ListTags};

/// A typed request: its command name and its parameters.
pub trait Request {
    /// The CloudStack command name (case-sensitive), e.g. `createLoadBalancerRule`.
    const COMMAND: &'static str;
    /// The request's parameters, encoded per API.md §4.
    fn to_params(&self) -> Params;
    /// Every parameter the request can carry: its name, whether every value of the request
    /// sends it, and whether it is a map (`name[i].field=`). Checked against CloudStack's
    /// listing by the contract test.
    fn parameters() -> Vec<ParameterShape>;
}

/// How a request field is sent (see [`Request::parameters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParameterShape {
    /// The CloudStack parameter name.
    pub name: &'static str,
    /// Sent by every value of the request (a plain, not optional, field).
    pub always_sent: bool,
    /// Sent as a map, `name[i].field=value`.
    pub is_map: bool,
}

/// A request field that knows how to encode itself as parameters.
pub trait ParamValue {
    /// Whether every value is sent (`false` for `Option`s and lists, which may send nothing).
    const ALWAYS_SENT: bool = false;
    /// Whether the value is sent as a map (`name[i].field=value`).
    const IS_MAP: bool = false;
    /// Adds this value under `name` to `params` (nothing for `None`/empty lists).
    fn put(&self, name: &str, params: &mut Params);
}

impl ParamValue for String {
    const ALWAYS_SENT: bool = true;

    fn put(&self, name: &str, params: &mut Params) {
        params.insert(name, self.clone());
    }
}

impl ParamValue for u32 {
    const ALWAYS_SENT: bool = true;
    fn put(&self, name: &str, params: &mut Params) {
        params.insert(name, self.to_string());
    }
}

/// Optional scalar parameters: set only when `Some`.
macro_rules! optional_scalar {
    ($($ty:ty),*) => {$(
        impl ParamValue for Option<$ty> {
            fn put(&self, name: &str, params: &mut Params) {
                if let Some(value) = self {
                    params.insert(name, value.to_string());
                }
            }
        }
    )*};
}
optional_scalar!(String, bool, u32, i32, u64);

impl ParamValue for crate::Secret {
    const ALWAYS_SENT: bool = true;
    fn put(&self, name: &str, params: &mut Params) {
        params.insert(name, self.expose().to_owned());
    }
}

impl ParamValue for Option<crate::Secret> {
    fn put(&self, name: &str, params: &mut Params) {
        if let Some(value) = self {
            value.put(name, params);
        }
    }
}

impl ParamValue for Vec<String> {
    fn put(&self, name: &str, params: &mut Params) {
        if !self.is_empty() {
            params.insert(name, self.join(","));
        }
    }
}

impl ParamValue for Vec<(String, String)> {
    const IS_MAP: bool = true;
    /// Encodes `name[i].<k>=…&name[i].<v>=…` with the field names of [`map_fields`]; an empty
    /// value is left out (a `deleteTags` pair with only a key deletes by key).
    fn put(&self, name: &str, params: &mut Params) {
        let (key_field, value_field) = map_fields(name);
        for (index, (key, value)) in self.iter().enumerate() {
            params.insert(&format!("{name}[{index}].{key_field}"), key.clone());
            if !value.is_empty() {
                params.insert(&format!("{name}[{index}].{value_field}"), value.clone());
            }
        }
    }
}

/// The entry field names of a map parameter: `vmidipmap` uses `vmid`/`vmip`, `param` uses
/// `name`/`value`, everything else (`tags`, `details`) `key`/`value`.
pub fn map_fields(name: &str) -> (&'static str, &'static str) {
    match name {
        "vmidipmap" => ("vmid", "vmip"),
        "param" => ("name", "value"),
        _ => ("key", "value"),
    }
}

/// Declares a request struct and its [`Request`] implementation.
macro_rules! request {
    (
        $(#[$meta:meta])*
        $name:ident => $command:literal {
            $($(#[$field_meta:meta])* $field:ident : $ty:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl $crate::requests::Request for $name {
            const COMMAND: &'static str = $command;
            fn to_params(&self) -> $crate::Params {
                #[allow(unused_mut)]
                let mut params = $crate::Params::new();
                $(
                    $crate::requests::ParamValue::put(
                        &self.$field,
                        stringify!($field).trim_start_matches("r#"),
                        &mut params,
                    );
                )*
                params
            }
            fn parameters() -> Vec<$crate::requests::ParameterShape> {
                vec![$(
                    $crate::requests::ParameterShape {
                        name: stringify!($field).trim_start_matches("r#"),
                        always_sent: <$ty as $crate::requests::ParamValue>::ALWAYS_SENT,
                        is_map: <$ty as $crate::requests::ParamValue>::IS_MAP,
                    },
                )*]
            }
        }
    };
}
pub(crate) use request;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_lists_maps_and_options() {
        let request = AssignToLoadBalancerRule {
            id: "lb-1".into(),
            virtualmachineids: vec!["vm-1".into(), "vm-2".into()],
            vmidipmap: vec![("vm-3".into(), "10.1.1.75".into())],
        };
        let params = request.to_params();
        assert_eq!(params.get("id"), Some("lb-1"));
        assert_eq!(params.get("virtualmachineids"), Some("vm-1,vm-2"));
        assert_eq!(params.get("vmidipmap[0].vmid"), Some("vm-3"));
        assert_eq!(params.get("vmidipmap[0].vmip"), Some("10.1.1.75"));

        let rule = CreateFirewallRule {
            ipaddressid: "ip-1".into(),
            protocol: "tcp".into(),
            startport: Some(80),
            r#type: Some("user".into()),
            ..Default::default()
        };
        let params = rule.to_params();
        assert_eq!(params.get("type"), Some("user"));
        assert_eq!(params.get("startport"), Some("80"));
        assert!(!params.contains("endport") && !params.contains("cidrlist"));

        let tags = CreateTags {
            resourceids: vec!["r1".into()],
            resourcetype: "LoadBalancer".into(),
            tags: vec![("cloudstack-ccm/cluster".into(), "k".into())],
            customer: None,
        };
        let params = tags.to_params();
        assert_eq!(params.get("tags[0].key"), Some("cloudstack-ccm/cluster"));
        assert_eq!(params.get("tags[0].value"), Some("k"));
        assert_eq!(CreateTags::COMMAND, "createTags");
    }
}
