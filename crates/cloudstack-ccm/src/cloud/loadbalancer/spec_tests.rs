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
    assert!(spec.warnings.is_empty() && !spec.keep_source_ranges && !spec.keep_rule_cidrs);
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
fn health_check_only_from_annotations() {
    // CloudStack's policy has no port: it would probe the node port, never
    // healthCheckNodePort, so externalTrafficPolicy: Local implies nothing.
    let local = build(
        json!({}),
        json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000}),
    )
    .unwrap();
    assert_eq!(local.health_check, None);
    let defaults = build(json!({(ann::HEALTH_CHECK_PATH.key): "/healthz"}), json!({}))
        .unwrap()
        .health_check
        .unwrap();
    assert_eq!(
        (
            defaults.interval_secs,
            defaults.timeout_secs,
            defaults.healthy_threshold,
            defaults.unhealthy_threshold
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
        json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000}),
    )
    .unwrap();
    assert_eq!(
        explicit.health_check,
        Some(HealthCheck {
            path: "/ready".into(),
            interval_secs: 10,
            timeout_secs: 4,
            healthy_threshold: 3,
            unhealthy_threshold: 5,
        })
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
            "bad cidr annotation on a new load balancer",
            json!({(ann::SOURCE_CIDRS.key): "10.0.0.0/8,nope"}),
            json!({}),
            "\"nope\" is not a CIDR",
        ),
        (
            "bad std ranges on a new load balancer",
            json!({(ann::K8S_SOURCE_RANGES.key): "1.2.3.4/40"}),
            json!({}),
            "load-balancer-source-ranges",
        ),
        (
            "bad address on a new load balancer",
            json!({(ann::ADDRESS.key): "1.2.3"}),
            json!({}),
            "cloudstack-load-balancer-address",
        ),
        (
            "bad spec range",
            json!({}),
            json!({"loadBalancerSourceRanges": ["10.0.0.0/8", "10.0.0.1"]}),
            "spec.loadBalancerSourceRanges[1]",
        ),
        (
            "bad affinity",
            json!({}),
            json!({"sessionAffinity": "Cookie"}),
            "spec.sessionAffinity",
        ),
        (
            "bad loadBalancerIP",
            json!({}),
            json!({"loadBalancerIP": "x.y"}),
            "spec.loadBalancerIP",
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

/// A bad annotation value falls back to the field's default with a warning naming the
/// annotation and the value; the rest of the Service still makes a spec.
#[test]
fn bad_annotation_values_fall_back_with_a_warning() {
    let hc = |extra: Value| {
        let mut a = json!({(ann::HEALTH_CHECK_PATH.key): "/h"});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    };
    type Check = fn(&LbSpec) -> bool;
    let cases: Vec<(Value, &str, Check)> = vec![
        (
            json!({(ann::PROXY_PROTOCOL.key): "maybe"}),
            "cloudstack-load-balancer-proxy-protocol: invalid value \"maybe\"",
            |s| !s.proxy_protocol && s.rules[0].protocol == LbProtocol::Tcp,
        ),
        (
            json!({(ann::KEEP_IP.key): "maybe"}),
            "cloudstack-load-balancer-keep-ip: invalid value \"maybe\"",
            |s| s.keep_ip,
        ),
        (
            json!({(ann::ALGORITHM.key): "random"}),
            "cloudstack-load-balancer-algorithm: invalid value \"random\"",
            |s| s.algorithm == Algorithm::RoundRobin,
        ),
        (
            hc(json!({(ann::HEALTH_CHECK_INTERVAL.key): "often"})),
            "health-check-interval: invalid value \"often\"",
            |s| s.health_check.as_ref().unwrap().interval_secs == 5,
        ),
        (
            hc(json!({(ann::HEALTH_CHECK_TIMEOUT.key): "99"})),
            "health-check-timeout",
            |s| s.health_check.as_ref().unwrap().timeout_secs == 2,
        ),
        (
            hc(
                json!({(ann::HEALTH_CHECK_INTERVAL.key): "3", (ann::HEALTH_CHECK_TIMEOUT.key): "5"}),
            ),
            "must be less than the interval",
            |s| {
                let h = s.health_check.as_ref().unwrap();
                (h.interval_secs, h.timeout_secs) == (5, 2)
            },
        ),
        (
            hc(json!({(ann::HEALTH_CHECK_UNHEALTHY_THRESHOLD.key): "0"})),
            "unhealthy-threshold",
            |s| s.health_check.as_ref().unwrap().unhealthy_threshold == 3,
        ),
        (
            json!({(ann::HEALTH_CHECK_PATH.key): "healthz"}),
            "health-check-path",
            |s| s.health_check.is_none(),
        ),
        (
            json!({(ann::STICKINESS_METHOD.key): "cookie"}),
            "stickiness-method-name",
            |s| s.stickiness.is_none(),
        ),
        (
            json!({(ann::STICKINESS_METHOD.key): "LbCookie", (ann::STICKINESS_PARAMS.key): "nocache="}),
            "stickiness-method-param",
            |s| s.stickiness.as_ref().is_some_and(|st| st.params.is_empty()),
        ),
        (
            json!({(ann::HOSTNAME.key): "under_score.example"}),
            "cloudstack-load-balancer-hostname",
            |s| s.hostname.is_none(),
        ),
        (
            json!({(ann::IP_ID.key): "42"}),
            "cloudstack-load-balancer-id",
            |s| s.recorded_ip_id.is_none(),
        ),
        (
            json!({(ann::IP_ASSOCIATED_BY_CONTROLLER.key): "sure"}),
            "ip-associated-by-controller",
            |s| !s.ip_associated_by_controller,
        ),
    ];
    for (annotations, want, check) in cases {
        let spec =
            build(annotations.clone(), json!({})).unwrap_or_else(|e| panic!("{annotations}: {e}"));
        assert_eq!(spec.warnings.len(), 1, "{annotations}: {:?}", spec.warnings);
        assert!(spec.warnings[0].contains(want), "{:?}", spec.warnings);
        assert!(check(&spec), "{annotations}: {spec:?}");
        assert_eq!(spec.rules.len(), 1, "the ports still make rules");
    }
}

/// Where a default would open access or move the address, an applied load balancer (an
/// IP id recorded) keeps what was applied; a new one has nothing to keep and fails.
#[test]
fn unreadable_access_annotations_keep_what_was_applied() {
    let recorded = |key: &str, value: &str| json!({(ann::IP_ID.key): "0a1b2c3d-0000-4000-8000-000000000001", (key): value});
    let ranges = build(
        recorded(ann::K8S_SOURCE_RANGES.key, "10.0.0.0/40"),
        json!({}),
    )
    .unwrap();
    assert!(ranges.keep_source_ranges && !ranges.keep_rule_cidrs);
    assert!(
        ranges.warnings[0].contains("\"10.0.0.0/40\""),
        "{:?}",
        ranges.warnings
    );
    assert!(ranges.warnings[0].contains("keeping the source ranges last applied"));
    let cidrs = build(recorded(ann::SOURCE_CIDRS.key, "everyone"), json!({})).unwrap();
    assert!(cidrs.keep_rule_cidrs && !cidrs.keep_source_ranges);
    assert_eq!(cidrs.rule_cidrs, None);
    let address = build(
        recorded(ann::ADDRESS.key, "1.2.3"),
        json!({"loadBalancerIP": "203.0.113.9"}),
    )
    .unwrap();
    assert_eq!(address.requested_ip, None, "the current IP stays");
    assert!(address.warnings[0].contains("keeping the load balancer's current IP"));
    // Valid spec ranges make the annotation irrelevant.
    let from_spec = build(
        recorded(ann::K8S_SOURCE_RANGES.key, "10.0.0.0/40"),
        json!({"loadBalancerSourceRanges": ["10.0.0.0/8"]}),
    )
    .unwrap();
    assert!(!from_spec.keep_source_ranges && from_spec.warnings.is_empty());
}

#[test]
fn ranges_without_ipv4_are_warned_about() {
    let v6 = build(json!({}), json!({"loadBalancerSourceRanges": ["::/0"]})).unwrap();
    assert_eq!(v6.source_ranges, vec![cidr("::/0")]);
    assert_eq!(v6.warnings.len(), 1, "{:?}", v6.warnings);
    assert!(v6.warnings[0].contains("::/0"), "{:?}", v6.warnings);
    assert!(v6.warnings[0].contains("no IPv4"), "{:?}", v6.warnings);
    let cidrs = build(json!({(ann::SOURCE_CIDRS.key): "2001:db8::/32"}), json!({})).unwrap();
    assert!(cidrs.warnings[0].contains(ann::SOURCE_CIDRS.key));
    let both = build(
        json!({}),
        json!({"loadBalancerSourceRanges": ["::/0", "0.0.0.0/0"]}),
    )
    .unwrap();
    assert!(both.warnings.is_empty());
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

#[test]
fn tls_ports_become_ssl_rules_and_the_others_stay() {
    let spec = build(
        json!({"service.beta.kubernetes.io/cloudstack-load-balancer-tls-secret": "shop-tls",
               "service.beta.kubernetes.io/cloudstack-load-balancer-tls-ports": "443,8443,53"}),
        json!({"ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                         {"port": 443, "nodePort": 30443, "protocol": "TCP"},
                         {"port": 53, "nodePort": 30053, "protocol": "UDP"}]}),
    )
    .unwrap();
    let protocols: Vec<(u16, LbProtocol)> = spec
        .rules
        .iter()
        .map(|r| (r.public_port, r.protocol))
        .collect();
    assert_eq!(
        protocols,
        vec![
            (80, LbProtocol::Tcp),
            (443, LbProtocol::Ssl),
            (53, LbProtocol::Udp)
        ]
    );
    assert!(
        spec.rules[1].name.ends_with("-ssl-443"),
        "{}",
        spec.rules[1].name
    );
    let tls = spec.tls.as_ref().expect("tls");
    assert_eq!(tls.spec.ports, vec![443, 8443, 53]);
    assert!(tls.material.is_none(), "the controller fills it in");
    assert!(
        spec.warnings.iter().any(|w| w.contains("no port 8443")),
        "{:?}",
        spec.warnings
    );
    assert!(
        spec.warnings.iter().any(|w| w.contains("port 53 is UDP")),
        "{:?}",
        spec.warnings
    );
    let bad = build(
        json!({"service.beta.kubernetes.io/cloudstack-load-balancer-tls-ports": "443,x",
               "service.beta.kubernetes.io/cloudstack-load-balancer-tls-secret": "shop-tls"}),
        json!({}),
    )
    .unwrap_err();
    assert!(
        matches!(bad, SpecError::Annotation(ref a) if a.value == "443,x"),
        "{bad}"
    );
}

#[test]
fn ipv6_only_is_refused_and_required_dual_stack_gets_its_ipv4_load_balancer_with_a_warning() {
    let ports = json!([{"protocol": "TCP", "port": 80, "nodePort": 30080}]);
    let err = build(
        json!({}),
        json!({"type": "LoadBalancer", "ports": ports, "ipFamilies": ["IPv6"], "ipFamilyPolicy": "SingleStack"}),
    )
    .unwrap_err();
    assert!(
        matches!(err, SpecError::Ipv6Only { .. })
            && err
                .to_string()
                .starts_with("spec.ipFamilies: [IPv6]: CloudStack load balancers are IPv4 only"),
        "{err}"
    );
    let dual = build(
        json!({}),
        json!({"type": "LoadBalancer", "ports": ports, "ipFamilies": ["IPv6", "IPv4"], "ipFamilyPolicy": "RequireDualStack"}),
    )
    .expect("served over IPv4");
    assert_eq!(dual.rules.len(), 1);
    assert!(
        dual.warnings.iter().any(|w| w.contains("RequireDualStack")),
        "{:?}",
        dual.warnings
    );
    let preferred = build(
        json!({}),
        json!({"type": "LoadBalancer", "ports": ports, "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "PreferDualStack"}),
    )
    .expect("served over IPv4");
    assert!(preferred.warnings.is_empty(), "{:?}", preferred.warnings);
}
