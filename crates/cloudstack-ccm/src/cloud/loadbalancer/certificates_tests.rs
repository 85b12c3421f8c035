//! Tests of the certificate checks and names, with the simulator crate's test certificates.

use super::*;

use crate::cloud::loadbalancer::ssl_fixtures::{
    CA, EC_KEY, EXPIRED, EXPIRED_KEY, KEY_A, KEY_B, LEAF_A, LEAF_B,
};

/// `openssl x509 -in leaf-a-cert.pem -noout -fingerprint -sha256`.
const LEAF_A_FINGERPRINT: &str = "3E:13:1F:83:04:B3:68:D9:7D:24:59:46:F4:1D:2A:9B:6F:D4:4A:8B:98:8F:03:8A:08:81:4C:88:77:A0:10:12";

fn material(crt: &str, key: &str) -> PemMaterial {
    PemMaterial::from_tls_secret(crt, key.to_owned()).expect("a certificate")
}

#[test]
fn a_matching_current_certificate_passes_with_its_fingerprint() {
    let inspected = material(LEAF_A, KEY_A)
        .inspect(jiff::Timestamp::now())
        .expect("valid");
    assert_eq!(inspected.fingerprint, LEAF_A_FINGERPRINT);
    assert_eq!(inspected.not_after.strftime("%Y").to_string(), "2126");
    material(LEAF_B, KEY_B)
        .inspect(jiff::Timestamp::now())
        .expect("a PKCS#8 key");
}

#[test]
fn tls_crt_splits_into_certificate_and_chain() {
    let both = format!("{LEAF_A}{CA}");
    let m = material(&both, KEY_A);
    assert_eq!(m.certificate, LEAF_A);
    assert_eq!(m.chain.as_deref(), Some(CA));
    assert_eq!(material(LEAF_A, KEY_A).chain, None);
    assert_eq!(
        PemMaterial::from_tls_secret("no pem here", KEY_A.to_owned()),
        Err(CertificateProblem::NoCertificate)
    );
}

const CHAIN_LEAF: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/chain-leaf-cert.pem");
const CHAIN_KEY: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/chain-leaf-key.pem");
const INTERMEDIATE: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/chain-intermediate-cert.pem");
const ROOT: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/chain-root-cert.pem");

#[test]
fn the_leafs_issuer_goes_first_in_the_chain_as_cloudstack_reads_only_the_first() {
    let now = jiff::Timestamp::now();
    let expected = format!("{INTERMEDIATE}{ROOT}");
    for bundle in [
        format!("{CHAIN_LEAF}{INTERMEDIATE}{ROOT}"),
        format!("{CHAIN_LEAF}{ROOT}{INTERMEDIATE}"),
    ] {
        let m = material(&bundle, CHAIN_KEY);
        assert_eq!(m.certificate, CHAIN_LEAF);
        assert_eq!(m.chain.as_deref(), Some(expected.as_str()));
        m.inspect(now).expect("a chain led by the issuer");
    }
}

#[test]
fn a_chain_without_the_leafs_issuer_is_named() {
    let now = jiff::Timestamp::now();
    for chain in [ROOT, CA] {
        assert_eq!(
            material(&format!("{CHAIN_LEAF}{chain}"), CHAIN_KEY).inspect(now),
            Err(CertificateProblem::ChainWithoutIssuer)
        );
    }
}

#[test]
fn bad_material_is_named_without_the_key() {
    let now = jiff::Timestamp::now();
    let cases = [
        (material(LEAF_A, KEY_B), CertificateProblem::KeyMismatch),
        (material(LEAF_A, EC_KEY), CertificateProblem::KeyMismatch),
        (material(LEAF_A, "garbage"), CertificateProblem::NoKey),
        (
            material(EXPIRED, EXPIRED_KEY),
            CertificateProblem::Expired("2021-01-01T00:00:00Z".parse().unwrap()),
        ),
    ];
    for (m, problem) in cases {
        let err = m.inspect(now).expect_err("refused");
        assert_eq!(err, problem);
        let text = err.to_string();
        assert!(
            !text.contains("PRIVATE KEY") && !text.contains("MII"),
            "{text}"
        );
    }
    let early = "2000-01-01T00:00:00Z".parse().unwrap();
    assert!(matches!(
        material(LEAF_A, KEY_A).inspect(early),
        Err(CertificateProblem::NotYetValid(_))
    ));
}

#[test]
fn debug_shows_the_fingerprint_and_never_the_key() {
    let m = material(LEAF_A, KEY_A);
    let shown = format!("{m:?}");
    assert!(shown.contains(LEAF_A_FINGERPRINT), "{shown}");
    let body = KEY_A.lines().nth(1).expect("a base64 line");
    assert!(
        !shown.contains(body) && !shown.contains("PRIVATE KEY"),
        "{shown}"
    );
}

#[test]
fn names_carry_cluster_uid_and_fingerprint_and_parse_back() {
    let uid = "5f0c2a8e-1b7d-4c3e-9a6f-0d1e2f3a4b5c";
    let name = certificate_name("prod", uid, LEAF_A_FINGERPRINT);
    assert_eq!(name, format!("cloudstack-ccm.prod.{uid}.3e131f8304b368d9"));
    assert_eq!(parse_certificate_name("prod", &name), Some(uid));
    assert_eq!(parse_certificate_name("staging", &name), None);
    assert_eq!(parse_certificate_name("prod", "shop-cert"), None);
    assert_eq!(
        parse_certificate_name("prod", &format!("cloudstack-ccm.prod.{uid}.short")),
        None
    );
}
