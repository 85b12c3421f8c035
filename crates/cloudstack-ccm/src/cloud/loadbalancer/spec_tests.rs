//! Unit tests of `LbSpec::from_service`: every valid shape and every bad input.

use serde_json::{Value, json};

use super::*;

const UID: &str = "6a1f0b2c-3d4e-4f50-8a9b-0c1d2e3f4a5b";
const LB: &str = "a6a1f0b2c3d4e4f508a9b0c1d2e3f4a5";

fn service(annotations: Value, spec: Value) -> Service {
    let mut base = json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": UID, "annotations": annotations},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]
        }
    });
    if let (Some(target), Some(extra)) = (base["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(base).expect("valid Service JSON")
}

fn options() -> SpecOptions {
    SpecOptions {
        cluster_name: "prod".into(),
        load_balancer_class: None,
    }
}

fn build(annotations: Value, spec: Value) -> Result<LbSpec, SpecError> {
    LbSpec::from_service(&service(annotations, spec), &options())
}

fn cidr(text: &str) -> Cidr {
    Cidr::parse(text).expect("test CIDR")
}

#[test]
fn defaults_for_a_plain_service() {
    let spec = build(json!({}), json!({})).unwrap();
    assert_eq!(spec.lb_name, LB);
    assert_eq!(
        spec.legacy_lb_names,
        vec!["K8s_svc_prod_shop_web".to_string()]
    );
    assert_eq!(
        spec.rules,
        vec![RuleSpec {
            name: format!("{LB}-tcp-80"),
            protocol: LbProtocol::Tcp,
            public_port: 80,
            node_port: 30080
        }]
    );
    assert_eq!(spec.algorithm, Algorithm::RoundRobin);
    assert_eq!(spec.source_ranges, vec![Cidr::ANY_V4]);
    assert_eq!(spec.rule_cidrs, None);
    assert_eq!(spec.requested_ip, None);
    assert!(!spec.keep_ip && !spec.proxy_protocol && !spec.ip_associated_by_controller);
    assert_eq!(spec.health_check, None);
    assert_eq!(spec.stickiness, None);
}

#[test]
fn protocols_map_to_rules() {
    let ports = json!({"ports": [
        {"port": 80, "nodePort": 30080},
        {"port": 53, "nodePort": 30053, "protocol": "UDP"},
        {"port": 443, "nodePort": 30443, "protocol": "TCP"}
    ]});
    let plain = build(json!({}), ports.clone()).unwrap();
    let protocols: Vec<_> = plain
        .rules
        .iter()
        .map(|r| (r.protocol, r.name.clone()))
        .collect();
    assert_eq!(
        protocols,
        vec![
            (LbProtocol::Tcp, format!("{LB}-tcp-80")),
            (LbProtocol::Udp, format!("{LB}-udp-53")),
            (LbProtocol::Tcp, format!("{LB}-tcp-443")),
        ]
    );
    let proxy = build(json!({(ann::PROXY_PROTOCOL.key): "true"}), ports).unwrap();
    let protocols: Vec<_> = proxy.rules.iter().map(|r| r.protocol).collect();
    assert_eq!(
        protocols,
        vec![LbProtocol::TcpProxy, LbProtocol::Udp, LbProtocol::TcpProxy]
    );
    assert_eq!(proxy.rules[0].name, format!("{LB}-tcp-proxy-80"));
}

#[test]
fn algorithm_from_affinity_and_annotation() {
    let cases = [
        (
            json!({}),
            json!({"sessionAffinity": "None"}),
            Algorithm::RoundRobin,
        ),
        (
            json!({}),
            json!({"sessionAffinity": "ClientIP"}),
            Algorithm::Source,
        ),
        (
            json!({(ann::ALGORITHM.key): "leastconn"}),
            json!({"sessionAffinity": "ClientIP"}),
            Algorithm::LeastConn,
        ),
    ];
    for (annotations, spec, want) in cases {
        assert_eq!(build(annotations, spec).unwrap().algorithm, want);
    }
}

#[test]
fn source_ranges_precedence() {
    let std_key = ann::K8S_SOURCE_RANGES.key;
    let from_spec = build(
        json!({(std_key): "192.0.2.0/24"}),
        json!({"loadBalancerSourceRanges": ["10.0.0.0/8", "172.16.0.0/12"]}),
    )
    .unwrap();
    assert_eq!(
        from_spec.source_ranges,
        vec![cidr("10.0.0.0/8"), cidr("172.16.0.0/12")]
    );
    let from_annotation = build(
        json!({(std_key): "192.0.2.0/24, 198.51.100.0/24"}),
        json!({}),
    )
    .unwrap();
    assert_eq!(
        from_annotation.source_ranges,
        vec![cidr("192.0.2.0/24"), cidr("198.51.100.0/24")]
    );
    let rule_cidrs = build(json!({(ann::SOURCE_CIDRS.key): "10.0.0.0/8"}), json!({})).unwrap();
    assert_eq!(rule_cidrs.rule_cidrs, Some(vec![cidr("10.0.0.0/8")]));
    assert_eq!(rule_cidrs.source_ranges, vec![Cidr::ANY_V4]);
}

#[test]
fn requested_ip_and_recorded_state() {
    let spec = build(
        json!({
            (ann::ADDRESS.key): "203.0.113.7",
            (ann::KEEP_IP.key): "true",
            (ann::IP_ID.key): "0A1B2C3D-0000-4000-8000-000000000001",
            (ann::IP_ASSOCIATED_BY_CONTROLLER.key): "true",
            (ann::HOSTNAME.key): "LB.example.com"
        }),
        json!({"loadBalancerIP": "203.0.113.9"}),
    )
    .unwrap();
    assert_eq!(spec.requested_ip, Some("203.0.113.7".parse().unwrap()));
    assert!(spec.keep_ip && spec.ip_associated_by_controller);
    assert_eq!(
        spec.recorded_ip_id.as_deref(),
        Some("0a1b2c3d-0000-4000-8000-000000000001")
    );
    assert_eq!(spec.hostname.as_deref(), Some("lb.example.com"));
    let fallback = build(json!({}), json!({"loadBalancerIP": "203.0.113.9"})).unwrap();
    assert_eq!(fallback.requested_ip, Some("203.0.113.9".parse().unwrap()));
}

#[test]
fn health_check_from_local_traffic_and_annotations() {
    let local = build(
        json!({}),
        json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000}),
    )
    .unwrap();
    let hc = local.health_check.unwrap();
    assert_eq!(
        (hc.path.as_str(), hc.node_port, hc.explicit),
        ("/healthz", Some(32000), false)
    );
    assert_eq!(
        (
            hc.interval_secs,
            hc.timeout_secs,
            hc.healthy_threshold,
            hc.unhealthy_threshold
        ),
        (5, 2, 2, 3)
    );
    let explicit = build(
        json!({
            (ann::HEALTH_CHECK_PATH.key): "/ready",
            (ann::HEALTH_CHECK_INTERVAL.key): "10",
            (ann::HEALTH_CHECK_TIMEOUT.key): "4",
            (ann::HEALTH_CHECK_HEALTHY_THRESHOLD.key): "3",
            (ann::HEALTH_CHECK_UNHEALTHY_THRESHOLD.key): "5"
        }),
        json!({}),
    )
    .unwrap();
    let hc = explicit.health_check.unwrap();
    assert_eq!(
        (
            hc.path.as_str(),
            hc.interval_secs,
            hc.timeout_secs,
            hc.explicit
        ),
        ("/ready", 10, 4, true)
    );
    assert_eq!(
        (hc.healthy_threshold, hc.unhealthy_threshold, hc.node_port),
        (3, 5, None)
    );
}

#[test]
fn stickiness_from_annotations() {
    let spec = build(
        json!({(ann::STICKINESS_METHOD.key): "sourcebased", (ann::STICKINESS_PARAMS.key): "tablesize=200k,expire=30m"}),
        json!({}),
    )
    .unwrap();
    let st = spec.stickiness.unwrap();
    assert_eq!(st.method, StickinessMethod::SourceBased);
    assert_eq!(st.params.len(), 2);
}

#[test]
fn bad_input_names_the_field_or_annotation() {
    let two_ports = |a: Value, b: Value| json!({"ports": [a, b]});
    let cases: Vec<(&str, Value, Value, &str)> = vec![
        (
            "bad bool",
            json!({(ann::PROXY_PROTOCOL.key): "yes"}),
            json!({}),
            "cloudstack-load-balancer-proxy-protocol: invalid value \"yes\"",
        ),
        (
            "bad keep-ip",
            json!({(ann::KEEP_IP.key): "maybe"}),
            json!({}),
            "cloudstack-load-balancer-keep-ip",
        ),
        (
            "bad cidr annotation",
            json!({(ann::SOURCE_CIDRS.key): "10.0.0.0/8,nope"}),
            json!({}),
            "\"nope\" is not a CIDR",
        ),
        (
            "bad std ranges",
            json!({(ann::K8S_SOURCE_RANGES.key): "1.2.3.4/40"}),
            json!({}),
            "load-balancer-source-ranges",
        ),
        (
            "bad spec range",
            json!({}),
            json!({"loadBalancerSourceRanges": ["10.0.0.0/8", "10.0.0.1"]}),
            "spec.loadBalancerSourceRanges[1]",
        ),
        (
            "bad algorithm",
            json!({(ann::ALGORITHM.key): "random"}),
            json!({}),
            "cloudstack-load-balancer-algorithm: invalid value \"random\"",
        ),
        (
            "bad affinity",
            json!({}),
            json!({"sessionAffinity": "Cookie"}),
            "spec.sessionAffinity",
        ),
        (
            "hc interval not a number",
            json!({(ann::HEALTH_CHECK_PATH.key): "/h", (ann::HEALTH_CHECK_INTERVAL.key): "often"}),
            json!({}),
            "health-check-interval: invalid value \"often\"",
        ),
        (
            "hc timeout too big",
            json!({(ann::HEALTH_CHECK_PATH.key): "/h", (ann::HEALTH_CHECK_TIMEOUT.key): "99"}),
            json!({}),
            "health-check-timeout",
        ),
        (
            "hc timeout above interval",
            json!({(ann::HEALTH_CHECK_PATH.key): "/h", (ann::HEALTH_CHECK_INTERVAL.key): "3", (ann::HEALTH_CHECK_TIMEOUT.key): "5"}),
            json!({}),
            "must be less than the interval",
        ),
        (
            "hc threshold zero",
            json!({(ann::HEALTH_CHECK_PATH.key): "/h", (ann::HEALTH_CHECK_UNHEALTHY_THRESHOLD.key): "0"}),
            json!({}),
            "unhealthy-threshold",
        ),
        (
            "hc bad path",
            json!({(ann::HEALTH_CHECK_PATH.key): "healthz"}),
            json!({}),
            "health-check-path",
        ),
        (
            "bad stickiness",
            json!({(ann::STICKINESS_METHOD.key): "cookie"}),
            json!({}),
            "stickiness-method-name",
        ),
        (
            "bad stickiness params",
            json!({(ann::STICKINESS_METHOD.key): "LbCookie", (ann::STICKINESS_PARAMS.key): "nocache="}),
            json!({}),
            "stickiness-method-param",
        ),
        (
            "bad address",
            json!({(ann::ADDRESS.key): "1.2.3"}),
            json!({}),
            "cloudstack-load-balancer-address",
        ),
        (
            "bad loadBalancerIP",
            json!({}),
            json!({"loadBalancerIP": "x.y"}),
            "spec.loadBalancerIP",
        ),
        (
            "bad hostname",
            json!({(ann::HOSTNAME.key): "under_score.example"}),
            json!({}),
            "cloudstack-load-balancer-hostname",
        ),
        (
            "bad ip id",
            json!({(ann::IP_ID.key): "42"}),
            json!({}),
            "cloudstack-load-balancer-id",
        ),
        (
            "sctp",
            json!({}),
            two_ports(
                json!({"port": 80, "nodePort": 30080}),
                json!({"port": 90, "nodePort": 30090, "protocol": "SCTP"}),
            ),
            "spec.ports[1].protocol: protocol SCTP",
        ),
        (
            "duplicate port",
            json!({}),
            two_ports(
                json!({"port": 53, "nodePort": 30053}),
                json!({"port": 53, "nodePort": 30054, "protocol": "UDP"}),
            ),
            "spec.ports[1].port: public port 53 is already used by spec.ports[0].port",
        ),
        ("no ports", json!({}), json!({"ports": []}), "spec.ports"),
        (
            "missing nodePort",
            json!({}),
            two_ports(json!({"port": 80, "nodePort": 30080}), json!({"port": 81})),
            "spec.ports[1].nodePort is missing",
        ),
        (
            "port zero",
            json!({}),
            json!({"ports": [{"port": 0, "nodePort": 30080}]}),
            "spec.ports[0].port: 0 is not a valid port",
        ),
        (
            "port too big",
            json!({}),
            json!({"ports": [{"port": 70000, "nodePort": 30080}]}),
            "spec.ports[0].port",
        ),
    ];
    for (what, annotations, spec, want) in cases {
        let err = build(annotations, spec).expect_err(what);
        assert!(err.to_string().contains(want), "{what}: {err}");
    }
}

#[test]
fn missing_uid_is_an_error() {
    let mut svc = service(json!({}), json!({}));
    svc.metadata.uid = None;
    let err = LbSpec::from_service(&svc, &options()).unwrap_err();
    assert_eq!(err.to_string(), "metadata.uid is missing");
}

#[test]
fn which_services_want_a_load_balancer() {
    let ours = SpecOptions {
        cluster_name: "c".into(),
        load_balancer_class: Some("cloudstack.apache.org/lb".into()),
    };
    let cases = [
        (json!({}), true, true),
        (json!({"type": "ClusterIP"}), false, false),
        (json!({"type": "NodePort"}), false, false),
        (
            json!({"loadBalancerClass": "cloudstack.apache.org/lb"}),
            false,
            true,
        ),
        (
            json!({"loadBalancerClass": "other.example/lb"}),
            false,
            false,
        ),
    ];
    for (spec, default_wants, ours_wants) in cases {
        let svc = service(json!({}), spec.clone());
        assert_eq!(
            wants_load_balancer(&svc, &options()),
            default_wants,
            "{spec}"
        );
        assert_eq!(wants_load_balancer(&svc, &ours), ours_wants, "{spec}");
    }
}

#[test]
fn rule_names_of_the_service_are_recognised_exactly() {
    let spec = build(json!({}), json!({})).unwrap();
    for name in [
        format!("{LB}-tcp-80"),
        format!("{LB}-tcp-proxy-8443"),
        "K8s_svc_prod_shop_web-udp-53".into(),
    ] {
        assert!(spec.owns_rule_name(&name), "{name}");
    }
    for name in [
        format!("{LB}x-tcp-80"),
        format!("{LB}-sctp-80"),
        format!("{LB}-tcp-080"),
        "K8s_svc_prod_shop_web2-tcp-80".into(),
    ] {
        assert!(!spec.owns_rule_name(&name), "{name}");
    }
}

#[test]
fn deletion_spec_survives_bad_input() {
    let broken = service(
        json!({
            (ann::ALGORITHM.key): "random",
            (ann::KEEP_IP.key): "maybe",
            (ann::IP_ID.key): "0a1b2c3d-0000-4000-8000-000000000001",
            (ann::IP_ASSOCIATED_BY_CONTROLLER.key): "true"
        }),
        json!({"ports": [{"port": 80, "protocol": "SCTP"}]}),
    );
    assert!(LbSpec::from_service(&broken, &options()).is_err());
    let spec = LbSpec::for_deletion(&broken, &options()).unwrap();
    assert_eq!(spec.lb_name, LB);
    assert!(spec.keep_ip, "an unreadable keep-ip keeps the IP");
    assert!(spec.ip_associated_by_controller);
    assert_eq!(
        spec.recorded_ip_id.as_deref(),
        Some("0a1b2c3d-0000-4000-8000-000000000001")
    );
    assert!(spec.rules.is_empty());
    let clean = LbSpec::for_deletion(&service(json!({}), json!({})), &options()).unwrap();
    assert!(!clean.keep_ip);
}
