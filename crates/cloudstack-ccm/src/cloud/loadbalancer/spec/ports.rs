//! The load-balancer rules of a Service's ports, with their node ports.

use super::*;

/// Builds one rule per Service port.
pub(super) fn port_rules(
    spec: &k8s_openapi::api::core::v1::ServiceSpec,
    lb_name: &str,
    proxy_protocol: bool,
) -> Result<Vec<RuleSpec>, SpecError> {
    let ports = spec.ports.as_deref().unwrap_or_default();
    if ports.is_empty() {
        return Err(SpecError::NoPorts);
    }
    let mut seen: BTreeMap<u16, String> = BTreeMap::new();
    let mut rules = Vec::with_capacity(ports.len());
    for (i, port) in ports.iter().enumerate() {
        let field = format!("spec.ports[{i}]");
        let protocol = match port.protocol.as_deref().unwrap_or("TCP") {
            "TCP" if proxy_protocol => LbProtocol::TcpProxy,
            "TCP" => LbProtocol::Tcp,
            "UDP" => LbProtocol::Udp,
            other => {
                return Err(SpecError::UnsupportedProtocol {
                    field: format!("{field}.protocol"),
                    protocol: other.to_string(),
                });
            }
        };
        let public_port = valid_port(port.port, || format!("{field}.port"))?;
        let node_port = match port.node_port {
            None | Some(0) => {
                return Err(SpecError::MissingNodePort {
                    field: format!("{field}.nodePort"),
                });
            }
            Some(n) => valid_port(n, || format!("{field}.nodePort"))?,
        };
        if let Some(first) = seen.get(&public_port) {
            return Err(SpecError::DuplicatePort {
                field: format!("{field}.port"),
                port: public_port,
                first: first.clone(),
            });
        }
        seen.insert(public_port, format!("{field}.port"));
        rules.push(RuleSpec {
            name: rule_name(lb_name, protocol, public_port),
            protocol,
            public_port,
            node_port,
        });
    }
    Ok(rules)
}

fn valid_port(value: i32, field: impl Fn() -> String) -> Result<u16, SpecError> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| SpecError::InvalidPort {
            field: field(),
            value,
        })
}
