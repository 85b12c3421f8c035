//! The certificate chain of `uploadSslCert`, as `CertServiceImpl.validate` checks it: a
//! chain whose first certificate signed the certificate is accepted (with
//! `enabledrevocationcheck=false`: the server has no CRL to check against, so with the
//! default it refuses every chain), whatever follows it; a chain that did not sign the
//! certificate, in the wrong order, or unreadable is refused with 530 and the server's text.

use crate::common;

use cloudstack::{ListSslCerts, Secret, UploadSslCert};
use cloudstack_sim::{Scenario, Version};
use common::{api_error, client, start};

const LEAF: &str = include_str!("../fixtures/ssl/chain-leaf-cert.pem");
const LEAF_KEY: &str = include_str!("../fixtures/ssl/chain-leaf-key.pem");
const INTERMEDIATE: &str = include_str!("../fixtures/ssl/chain-intermediate-cert.pem");
const ROOT: &str = include_str!("../fixtures/ssl/chain-root-cert.pem");
const OTHER_CA: &str = include_str!("../fixtures/ssl/ca-cert.pem");
const SELF_SIGNED: &str = include_str!("../fixtures/ssl/self-signed-cert.pem");
const SELF_SIGNED_KEY: &str = include_str!("../fixtures/ssl/self-signed-key.pem");

/// An upload of the chained leaf with `chain`, revocation checking off unless `revocation`.
fn upload(chain: &str, revocation: Option<bool>) -> UploadSslCert {
    UploadSslCert {
        certificate: LEAF.into(),
        privatekey: Secret::new(LEAF_KEY),
        name: "chained".into(),
        certchain: Some(chain.into()),
        enabledrevocationcheck: revocation,
        ..Default::default()
    }
}

#[tokio::test]
async fn a_leaf_with_its_intermediate_first_is_accepted_with_or_without_the_root() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    for chain in [INTERMEDIATE.to_owned(), format!("{INTERMEDIATE}{ROOT}")] {
        let cert = alice
            .upload_ssl_cert(&upload(&chain, Some(false)))
            .await
            .expect("a chain that signs the leaf");
        assert_eq!(cert.certchain.as_deref(), Some(chain.as_str()));
    }
    let listed = alice
        .list_ssl_certs(&ListSslCerts::default())
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
}

#[tokio::test]
async fn a_chain_that_did_not_sign_the_leaf_is_an_invalid_chain() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let cases = [
        ("another CA", OTHER_CA.to_owned()),
        ("the root alone", ROOT.to_owned()),
        ("root before intermediate", format!("{ROOT}{INTERMEDIATE}")),
    ];
    for (what, chain) in cases {
        let (status, code, cs, text) = api_error(
            alice
                .upload_ssl_cert(&upload(&chain, Some(false)))
                .await
                .unwrap_err(),
        );
        assert_eq!((status, code, cs), (530, 530, Some(9999)), "{what}: {text}");
        assert_eq!(text, "Invalid certificate chain", "{what}");
    }
    let listed = alice
        .list_ssl_certs(&ListSslCerts::default())
        .await
        .unwrap();
    assert!(listed.is_empty(), "nothing stored: {listed:?}");
}

#[tokio::test]
async fn garbage_in_the_chain_is_refused_with_the_java_exception_text() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let cases = [
        (
            "not PEM".to_owned(),
            r#"Cannot invoke "org.bouncycastle.util.io.pem.PemObject.getContent()" because "pemObject" is null"#,
        ),
        (
            "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n".to_owned(),
            "Unable to decode certificate chain",
        ),
        (
            INTERMEDIATE.replace("-----END CERTIFICATE-----", ""),
            "Parsing certificate/key failed: -----END CERTIFICATE not found",
        ),
    ];
    for (chain, expected) in cases {
        let (status, code, _, text) = api_error(
            alice
                .upload_ssl_cert(&upload(&chain, Some(false)))
                .await
                .unwrap_err(),
        );
        assert_eq!((status, code), (530, 530), "{text}");
        assert_eq!(text, expected);
    }
}

#[tokio::test]
async fn the_default_revocation_check_refuses_a_chain_from_4_15_only() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    for revocation in [None, Some(true)] {
        let (status, _, _, text) = api_error(
            alice
                .upload_ssl_cert(&upload(INTERMEDIATE, revocation))
                .await
                .unwrap_err(),
        );
        assert_eq!((status, text.as_str()), (530, "Invalid certificate chain"));
    }
    let mut scenario = Scenario::small();
    scenario.version = Version::parse("4.14.0").unwrap();
    let old = start(scenario).await;
    client(&old, "alice")
        .upload_ssl_cert(&upload(INTERMEDIATE, None))
        .await
        .expect("no revocation check before 4.15");
}

#[tokio::test]
async fn a_self_signed_certificate_passes_with_any_readable_chain() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let mut request = upload(OTHER_CA, Some(false));
    request.certificate = SELF_SIGNED.into();
    request.privatekey = Secret::new(SELF_SIGNED_KEY);
    alice
        .upload_ssl_cert(&request)
        .await
        .expect("the certificate is an anchor of its own path");
}
