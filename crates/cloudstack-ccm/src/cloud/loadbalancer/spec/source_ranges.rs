//! Who may reach the load balancer: the Service's source ranges.

use super::*;

/// `spec.loadBalancerSourceRanges`, else the standard annotation, else `0.0.0.0/0`.
pub(super) fn source_ranges(
    spec: &k8s_openapi::api::core::v1::ServiceSpec,
    annotations: &Annotations<'_>,
    read: &mut Lenient,
    applied: bool,
) -> Result<Kept<Vec<Cidr>>, SpecError> {
    let from_spec = spec
        .load_balancer_source_ranges
        .as_deref()
        .unwrap_or_default();
    let mut ranges = Vec::new();
    for (i, text) in from_spec.iter().enumerate() {
        let cidr = Cidr::parse(text)
            .filter(|_| text.contains('/'))
            .ok_or_else(|| SpecError::InvalidSourceRange {
                field: format!("spec.loadBalancerSourceRanges[{i}]"),
                value: text.clone(),
            })?;
        if !ranges.contains(&cidr) {
            ranges.push(cidr);
        }
    }
    if ranges.is_empty() {
        match read.keep_applied(
            annotations.get(&ann::K8S_SOURCE_RANGES, ann::parse_cidr_list),
            applied,
            "the source ranges last applied",
        )? {
            Kept::Read(from_annotation) => ranges = from_annotation.unwrap_or_default(),
            Kept::Applied => return Ok(Kept::Applied),
        }
    }
    if ranges.is_empty() {
        ranges.push(Cidr::ANY_V4);
    }
    Ok(Kept::Read(ranges))
}

/// Who may reach a Service another controller serves (the routing firewall companion),
/// read as for a load balancer of ours: `spec.loadBalancerSourceRanges`, else the standard
/// annotation, else `0.0.0.0/0`; IPv4 ranges only (the rules' addresses are IPv4).
pub(crate) fn companion_source_ranges(service: &Service) -> Result<Vec<Cidr>, SpecError> {
    let spec = service.spec.clone().unwrap_or_default();
    let annotations = Annotations::new(service.metadata.annotations.as_ref());
    let ranges = match source_ranges(&spec, &annotations, &mut Lenient::default(), false)? {
        Kept::Read(ranges) => ranges,
        // Only with a load balancer applied, which the companion never has.
        Kept::Applied => Vec::new(),
    };
    let mut ipv4: Vec<Cidr> = ranges.into_iter().filter(|c| c.addr.is_ipv4()).collect();
    if ipv4.is_empty() {
        ipv4.push(Cidr::ANY_V4);
    }
    Ok(ipv4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(spec_ranges: serde_json::Value, annotation: Option<&str>) -> Service {
        let mut annotations = serde_json::Map::new();
        if let Some(value) = annotation {
            annotations.insert(ann::K8S_SOURCE_RANGES.key.into(), value.into());
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "uid": "u1", "annotations": annotations},
            "spec": {"type": "LoadBalancer", "loadBalancerClass": "metallb.io/metallb",
                     "loadBalancerSourceRanges": spec_ranges}
        }))
        .expect("Service")
    }

    #[test]
    fn the_companion_reads_source_ranges_as_a_load_balancer_does() {
        let ranges = |s: &Service| -> Vec<String> {
            companion_source_ranges(s)
                .expect("ranges")
                .iter()
                .map(Cidr::to_string)
                .collect()
        };
        // The spec's, once each, IPv4 only.
        let spec = service(
            serde_json::json!(["192.0.2.0/24", "192.0.2.0/24", "2001:db8::/32"]),
            None,
        );
        assert_eq!(ranges(&spec), ["192.0.2.0/24"]);
        // The standard annotation when the spec has none.
        let annotated = service(serde_json::json!([]), Some("198.51.100.0/24"));
        assert_eq!(ranges(&annotated), ["198.51.100.0/24"]);
        // Everything without either.
        assert_eq!(ranges(&service(serde_json::json!([]), None)), ["0.0.0.0/0"]);
        // A bare address is no range in the spec.
        let bare = service(serde_json::json!(["192.0.2.1"]), None);
        let err = companion_source_ranges(&bare).expect_err("refused");
        assert!(
            err.to_string().contains("spec.loadBalancerSourceRanges[0]"),
            "{err}"
        );
    }
}
