//! A cert-manager-shaped `tls.crt` (leaf, intermediate, root) end to end: the controller
//! uploads the leaf as the certificate and the rest as the chain, the leaf's issuer first
//! and with the revocation check off (CloudStack reads only the chain's first certificate,
//! and with the check on refuses every chain: it has no CRL), and the simulator — which
//! checks the chain as `CertServiceImpl.validateChain` does — accepts it.

use crate::common;

use super::support::*;
use super::tls::{NODES, RESYNC, certificates, fixture, wait_bound, web};
use cloudstack_sim::Scenario;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// `openssl x509 -in chain-leaf-cert.pem -noout -fingerprint -sha256`.
const CHAIN_LEAF: &str = "A8:AA:56:E9:64:28:84:7C:F2:2B:91:01:D9:35:A0:A6:58:8D:B5:88:15:68:4B:79:CC:F8:8F:BB:EC:93:DA:F1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_intermediate_root_bundle_is_uploaded_with_its_chain() {
    if common::skip_in_remote_mode("reads the simulator's certificate store") {
        return;
    }
    let [leaf, intermediate, root] = bundle_parts();
    uploads_with_the_issuer_first(format!("{leaf}{intermediate}{root}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_with_the_root_before_the_intermediate_is_sent_in_order() {
    if common::skip_in_remote_mode("reads the simulator's certificate store") {
        return;
    }
    let [leaf, intermediate, root] = bundle_parts();
    uploads_with_the_issuer_first(format!("{leaf}{root}{intermediate}")).await;
}

/// The leaf, the intermediate that signed it, the root that signed the intermediate.
fn bundle_parts() -> [String; 3] {
    ["chain-leaf", "chain-intermediate", "chain-root"].map(|n| fixture(&format!("{n}-cert.pem")))
}

/// A Service on a Secret whose `tls.crt` is `bundle` gets the leaf uploaded with the chain
/// intermediate then root, bound to its 443 rule, and no call fails.
async fn uploads_with_the_issuer_first(bundle: String) {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    let [_, intermediate, root] = bundle_parts();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("chained-tls".into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(
            [
                ("tls.crt".to_string(), ByteString(bundle.into_bytes())),
                (
                    "tls.key".to_string(),
                    ByteString(fixture("chain-leaf-key.pem").into_bytes()),
                ),
            ]
            .into(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(t.h.kube.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .expect("creating the Secret");
    let since = sim_now_ms();
    t.create(&web("chained-tls")).await;
    let (id, _) = wait_bound(&t, CHAIN_LEAF).await;
    let chain = t.h.sim.with_state(|state| {
        state
            .ssl_certs
            .iter()
            .find(|c| c.id == id)
            .and_then(|c| c.chain.clone())
    });
    assert_eq!(chain, Some(format!("{intermediate}{root}")));
    assert!(
        failing_calls(&t.h, since).is_empty(),
        "{:?}",
        failing_calls(&t.h, since)
    );
    assert_eq!(certificates(&t).len(), 1);
    t.stop().await;
}
