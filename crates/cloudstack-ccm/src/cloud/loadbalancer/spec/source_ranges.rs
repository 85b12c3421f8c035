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
