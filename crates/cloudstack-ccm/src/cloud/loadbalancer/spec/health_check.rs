//! The health check read from the annotations.

use super::*;

/// The health check asked for by annotation (`…-health-check-path`); bad numbers fall
/// back to their defaults, a bad path to no check.
pub(super) fn health_check(
    annotations: &Annotations<'_>,
    read: &mut Lenient,
) -> Option<HealthCheck> {
    let path = read.or(
        annotations.get(&ann::HEALTH_CHECK_PATH, ann::parse_http_path),
        None,
        "no health check",
    )?;
    let mut number = |annotation: &ann::Annotation| {
        let default = annotation.default.parse().unwrap_or_default();
        read.or(annotations.number(annotation), default, annotation.default)
    };
    let mut interval_secs = number(&ann::HEALTH_CHECK_INTERVAL);
    let mut timeout_secs = number(&ann::HEALTH_CHECK_TIMEOUT);
    let healthy_threshold = number(&ann::HEALTH_CHECK_HEALTHY_THRESHOLD);
    let unhealthy_threshold = number(&ann::HEALTH_CHECK_UNHEALTHY_THRESHOLD);
    if timeout_secs >= interval_secs {
        let defaults = (
            ann::HEALTH_CHECK_INTERVAL
                .default
                .parse()
                .unwrap_or_default(),
            ann::HEALTH_CHECK_TIMEOUT
                .default
                .parse()
                .unwrap_or_default(),
        );
        read.warnings.push(format!(
            "{}; using the defaults (interval {}s, timeout {}s)",
            SpecError::HealthCheckTimeout {
                timeout_key: ann::HEALTH_CHECK_TIMEOUT.key,
                timeout: timeout_secs,
                interval: interval_secs,
            },
            defaults.0,
            defaults.1
        ));
        (interval_secs, timeout_secs) = defaults;
    }
    Some(HealthCheck {
        path,
        interval_secs,
        timeout_secs,
        healthy_threshold,
        unhealthy_threshold,
    })
}
