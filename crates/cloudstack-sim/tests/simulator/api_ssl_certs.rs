//! SSL certificates through the client crate: upload, list, delete (synchronous) and
//! assign/remove (jobs with their checks inside), each success and error path as
//! `CertServiceImpl` and `LoadBalancingRulesManagerImpl` answer it, and the `SslTermination`
//! capability the Virtual Router advertises from 4.22.

use crate::common;

use cloudstack::{
    AssignCertToLoadBalancer, DeleteLoadBalancerRule, DeleteSslCert, ListNetworks, ListSslCerts,
    RemoveCertFromLoadBalancer, Secret, UploadSslCert,
};
use cloudstack_sim::{Scenario, SimServer, Version};
use common::{api_error, client, id_of, job_error, start};

const LEAF_A: &str = include_str!("../fixtures/ssl/leaf-a-cert.pem");
const KEY_A: &str = include_str!("../fixtures/ssl/leaf-a-key.pem");
const LEAF_B: &str = include_str!("../fixtures/ssl/leaf-b-cert.pem");
const KEY_B: &str = include_str!("../fixtures/ssl/leaf-b-key.pem");
const CA: &str = include_str!("../fixtures/ssl/ca-cert.pem");
const EXPIRED: &str = include_str!("../fixtures/ssl/expired-cert.pem");
const EXPIRED_KEY: &str = include_str!("../fixtures/ssl/expired-key.pem");
const EC_KEY: &str = include_str!("../fixtures/ssl/ec-key.pem");

/// `openssl x509 -in leaf-a-cert.pem -noout -fingerprint -sha256`.
const LEAF_A_FINGERPRINT: &str = "3E:13:1F:83:04:B3:68:D9:7D:24:59:46:F4:1D:2A:9B:6F:D4:4A:8B:98:8F:03:8A:08:81:4C:88:77:A0:10:12";

fn upload(name: &str, cert: &str, key: &str) -> UploadSslCert {
    UploadSslCert {
        certificate: cert.into(),
        privatekey: Secret::new(key),
        name: name.into(),
        ..Default::default()
    }
}

async fn sim_at(version: &str) -> SimServer {
    let mut scenario = Scenario::small();
    scenario.version = Version::parse(version).unwrap();
    start(scenario).await
}

#[tokio::test]
async fn upload_returns_the_certificate_with_its_fingerprint_and_no_key() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let mut request = upload("shop", LEAF_A, KEY_A);
    request.certchain = Some(CA.into());
    // the server has no CRL for the chain: only an upload without the check passes
    request.enabledrevocationcheck = Some(false);
    assert!(
        !format!("{request:?}").contains("PRIVATE KEY"),
        "the request's Debug hides the key"
    );
    let cert = alice.upload_ssl_cert(&request).await.expect("upload");
    assert_eq!(cert.fingerprint.as_deref(), Some(LEAF_A_FINGERPRINT));
    assert_eq!(cert.name.as_deref(), Some("shop"));
    assert_eq!(cert.certificate.as_deref(), Some(LEAF_A));
    assert_eq!(cert.certchain.as_deref(), Some(CA));
    assert_eq!(cert.account.as_deref(), Some("alice"));
    assert!(cert.loadbalancerrulelist.is_empty());
    let listed = alice
        .list_ssl_certs(&ListSslCerts::default())
        .await
        .unwrap();
    assert_eq!(listed, vec![cert.clone()]);
    let (api_key, secret) = common::keys(&sim, "alice");
    let raw = common::raw_get(
        &sim,
        &[
            ("apikey", &api_key),
            ("command", "listSslCerts"),
            ("response", "json"),
        ],
        &secret,
        None,
    )
    .await;
    // CertServiceImpl.listSslCerts before 4.24: no certid, lbruleid, projectid or accountid
    // is refused, and ListSslCertsCmd.execute makes it a 530 (the text hidden from a user).
    assert_eq!(raw.status, 530, "{}", raw.text);
    let account_id = sim
        .with_state(|state| {
            state
                .accounts
                .iter()
                .find(|a| a.name == "alice")
                .map(|a| a.id.clone())
        })
        .expect("alice has an id");
    let raw = common::raw_get(
        &sim,
        &[
            ("apikey", &api_key),
            ("command", "listSslCerts"),
            ("accountid", &account_id),
            ("response", "json"),
        ],
        &secret,
        None,
    )
    .await;
    assert_eq!(raw.status, 200, "{}", raw.text);
    assert!(raw.text.contains("BEGIN CERTIFICATE") && !raw.text.contains("PRIVATE KEY"));
    // CertServiceImpl.createCertResponse: `SslCertResponse` has a domain, no domain path
    assert!(
        raw.text.contains("\"domainid\"") && !raw.text.contains("domainpath"),
        "{}",
        raw.text
    );
    // a PKCS#8 key is as good as a PKCS#1 one
    alice
        .upload_ssl_cert(&upload("renewed", LEAF_B, KEY_B))
        .await
        .expect("PKCS#8 key");
    assert!(
        client(&sim, "bob")
            .list_ssl_certs(&ListSslCerts::default())
            .await
            .unwrap()
            .is_empty(),
        "another account sees none of them"
    );
}

#[tokio::test]
async fn upload_refusals_are_530_with_the_validation_message() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let cases = [
        (
            upload("x", EXPIRED, EXPIRED_KEY),
            "Parsing certificate/key failed: NotAfter: Fri Jan 01 00:00:00 UTC 2021",
        ),
        (upload("x", LEAF_A, KEY_B), "Bad public-private key"),
        (
            upload("x", LEAF_A, EC_KEY),
            "Public and private key have different algorithms",
        ),
        (upload("x", LEAF_A, "not a key"), "Cannot parse private key"),
    ];
    for (request, text) in cases {
        let (status, code, cs, errortext) =
            api_error(alice.upload_ssl_cert(&request).await.unwrap_err());
        assert_eq!((status, code, cs), (530, 530, Some(9999)), "{errortext}");
        assert_eq!(errortext, text);
    }
    // CertServiceImpl.parseCertificate: no PEM block is a null PemObject that
    // `Preconditions.checkNotNull` refuses with a message-less NullPointerException —
    // UploadSslCertCmd answers 530 with no error text.
    let (_, code, cs, text) = api_error(
        alice
            .upload_ssl_cert(&upload("x", "garbage", KEY_A))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, cs, text.as_str()),
        (530, Some(9999), "(no errortext)"),
        "the client names a reply without errortext"
    );
    // a PEM block whose base64 does not decode: BouncyCastle's DecoderException text
    let bad_base64 = "-----BEGIN CERTIFICATE-----\nnot*base64!\n-----END CERTIFICATE-----\n";
    let (_, code, _, text) = api_error(
        alice
            .upload_ssl_cert(&upload("x", bad_base64, KEY_A))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, text.as_str()),
        (
            530,
            "unable to decode base64 string: invalid characters encountered in base64 data"
        )
    );
    let mut no_name = upload("", LEAF_A, KEY_A);
    no_name.name.clear();
    let (_, code, _, text) = api_error(alice.upload_ssl_cert(&no_name).await.unwrap_err());
    assert_eq!(
        (code, text.as_str()),
        (
            431,
            "Unable to execute API command uploadsslcert due to missing parameter name"
        )
    );
    let long = upload("x", &"A".repeat(16385), KEY_A);
    let (_, code, _, text) = api_error(alice.upload_ssl_cert(&long).await.unwrap_err());
    assert_eq!(code, 431);
    assert!(
        text.ends_with("Value greater than max allowed length 16384 for param: cert"),
        "{text}"
    );
    assert!(
        alice
            .list_ssl_certs(&ListSslCerts::default())
            .await
            .unwrap()
            .is_empty(),
        "nothing refused is stored"
    );
}

#[tokio::test]
async fn assign_binds_the_certificate_and_an_assigned_one_cannot_be_deleted() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let rule = common::lb_rule_on(&sim, "net-vr", "ssl", 443).await;
    let cert = alice
        .upload_ssl_cert(&upload("a", LEAF_A, KEY_A))
        .await
        .unwrap();
    let cert_id = cert.id.clone().unwrap();
    alice
        .assign_cert_to_load_balancer(&AssignCertToLoadBalancer {
            lbruleid: rule.clone(),
            certid: cert_id.clone(),
            forced: None,
        })
        .await
        .expect("assign");
    let bound = alice
        .list_ssl_certs(&ListSslCerts {
            lbruleid: Some(rule.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(bound.len(), 1);
    assert_eq!(bound[0].id.as_deref(), Some(cert_id.as_str()));
    assert_eq!(bound[0].loadbalancerrulelist, vec![rule.clone()]);

    let (status, code, _, text) = api_error(
        alice
            .delete_ssl_cert(&DeleteSslCert {
                id: cert_id.clone(),
            })
            .await
            .unwrap_err(),
    );
    assert_eq!((status, code), (530, 530));
    assert_eq!(
        text, "Internal error executing command, please contact your system administrator",
        "a user gets the generic text"
    );
    let (_, _, _, text) = api_error(
        client(&sim, "admin")
            .delete_ssl_cert(&DeleteSslCert {
                id: cert_id.clone(),
            })
            .await
            .unwrap_err(),
    );
    // DeleteSslCertCmd.execute: `new CloudRuntimeException(e)` — the inner message, cs 0
    assert_eq!(text, "Certificate in use by a loadbalancer(s) web-ssl ");

    // a second certificate: refused while one is bound, accepted with forced (4.17)
    let renewed = alice
        .upload_ssl_cert(&upload("b", LEAF_B, KEY_B))
        .await
        .unwrap();
    let renewed_id = renewed.id.clone().unwrap();
    let second = AssignCertToLoadBalancer {
        lbruleid: rule.clone(),
        certid: renewed_id.clone(),
        forced: None,
    };
    let (code, text) = job_error(
        alice
            .assign_cert_to_load_balancer(&second)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, text.as_str()),
        (431, "Another certificate is already bound to the LB")
    );
    alice
        .assign_cert_to_load_balancer(&AssignCertToLoadBalancer {
            forced: Some(true),
            ..second
        })
        .await
        .expect("forced");
    let bound = alice
        .list_ssl_certs(&ListSslCerts {
            lbruleid: Some(rule.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(bound[0].id.as_deref(), Some(renewed_id.as_str()));
    alice
        .delete_ssl_cert(&DeleteSslCert { id: cert_id })
        .await
        .expect("the replaced certificate is free");

    alice
        .remove_cert_from_load_balancer(&RemoveCertFromLoadBalancer {
            lbruleid: rule.clone(),
        })
        .await
        .expect("remove");
    let (code, text) = job_error(
        alice
            .remove_cert_from_load_balancer(&RemoveCertFromLoadBalancer {
                lbruleid: rule.clone(),
            })
            .await
            .unwrap_err(),
    );
    // removeCertFromLoadBalancer (4.22): InvalidParameterValueException, the job's 431
    assert_eq!(code, 431);
    assert_eq!(
        text,
        format!("No certificate is bound to lb with id: {rule}")
    );
    alice
        .delete_ssl_cert(&DeleteSslCert { id: renewed_id })
        .await
        .expect("delete");
    assert!(
        alice
            .list_ssl_certs(&ListSslCerts::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn deleting_the_rule_frees_its_certificate() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let rule = common::lb_rule_on(&sim, "net-vr", "ssl", 443).await;
    let cert = alice
        .upload_ssl_cert(&upload("a", LEAF_A, KEY_A))
        .await
        .unwrap();
    let cert_id = cert.id.unwrap();
    alice
        .assign_cert_to_load_balancer(&AssignCertToLoadBalancer {
            lbruleid: rule.clone(),
            certid: cert_id.clone(),
            forced: None,
        })
        .await
        .unwrap();
    alice
        .delete_load_balancer_rule(&DeleteLoadBalancerRule { id: rule })
        .await
        .unwrap();
    alice
        .delete_ssl_cert(&DeleteSslCert { id: cert_id })
        .await
        .expect("load_balancer_cert_map rows go with the rule");
}

#[tokio::test]
async fn assign_checks_run_in_the_job_in_the_servers_order() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let cert = alice
        .upload_ssl_cert(&upload("a", LEAF_A, KEY_A))
        .await
        .unwrap();
    let cert_id = cert.id.unwrap();
    let tcp_rule = common::lb_rule_on(&sim, "net-vr", "tcp", 443).await;
    let (code, text) = job_error(
        alice
            .assign_cert_to_load_balancer(&AssignCertToLoadBalancer {
                lbruleid: tcp_rule.clone(),
                certid: cert_id.clone(),
                forced: None,
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, text.as_str()),
        (431, "Bad LB protocol: Expected ssl got tcp")
    );

    // bob's certificate on alice's rule: same-account check
    let bob = client(&sim, "bob");
    let bobs = bob
        .upload_ssl_cert(&upload("b", LEAF_B, KEY_B))
        .await
        .unwrap();
    let (code, text) = job_error(
        alice
            .assign_cert_to_load_balancer(&AssignCertToLoadBalancer {
                lbruleid: tcp_rule.clone(),
                certid: bobs.id.clone().unwrap(),
                forced: None,
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, text.as_str()),
        (431, "Access denied for account bob")
    );

    // unknown ids: parameter processing, before any job
    let (_, code, _, text) = api_error(
        alice
            .assign_cert_to_load_balancer(&AssignCertToLoadBalancer {
                lbruleid: tcp_rule,
                certid: "00000000-0000-0000-0000-000000000000".into(),
                forced: None,
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 431);
    assert!(
        text.contains("Invalid parameter certid value=00000000-0000-0000-0000-000000000000"),
        "{text}"
    );
}

#[tokio::test]
async fn before_4_22_the_virtual_router_takes_ssl_rules_but_refuses_certificates() {
    let sim = sim_at("4.21").await;
    let alice = client(&sim, "alice");
    let rule = common::lb_rule_on(&sim, "net-vr", "ssl", 443).await;
    let cert = alice
        .upload_ssl_cert(&upload("a", LEAF_A, KEY_A))
        .await
        .unwrap();
    let (code, text) = job_error(
        alice
            .assign_cert_to_load_balancer(&AssignCertToLoadBalancer {
                lbruleid: rule,
                certid: cert.id.unwrap(),
                forced: None,
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, text.as_str()),
        (431, "Ssl termination not supported by the loadbalancer")
    );
    // NetScaler terminates TLS whatever the version
    let ns_rule = common::lb_rule_on(&sim, "net-ns", "ssl", 443).await;
    let cert = alice
        .upload_ssl_cert(&upload("b", LEAF_A, KEY_A))
        .await
        .unwrap();
    alice
        .assign_cert_to_load_balancer(&AssignCertToLoadBalancer {
            lbruleid: ns_rule,
            certid: cert.id.unwrap(),
            forced: None,
        })
        .await
        .expect("NetScaler");
}

/// The `SslTermination` capability of a network's `Lb` service, as listed.
async fn ssl_termination(sim: &SimServer, network: &str) -> Option<String> {
    let networks = client(sim, "alice")
        .list_networks(&ListNetworks {
            id: Some(id_of(sim, "networks", network)),
            ..Default::default()
        })
        .await
        .unwrap();
    networks[0]
        .service
        .iter()
        .filter(|s| s.name.as_deref() == Some("Lb"))
        .flat_map(|s| s.capability.iter())
        .find(|c| c.name.as_deref() == Some("SslTermination"))
        .and_then(|c| c.value.clone())
}

#[tokio::test]
async fn the_virtual_router_advertises_ssl_termination_from_4_22() {
    let old = sim_at("4.21").await;
    assert_eq!(ssl_termination(&old, "net-vr").await, None);
    assert_eq!(
        ssl_termination(&old, "net-ns").await.as_deref(),
        Some("true")
    );
    let new = sim_at("4.22").await;
    assert_eq!(
        ssl_termination(&new, "net-vr").await.as_deref(),
        Some("true")
    );
    assert_eq!(
        ssl_termination(&new, "tier1").await.as_deref(),
        Some("true")
    );
}

#[tokio::test]
async fn list_takes_one_filter_and_resolves_ids() {
    let sim = sim_at("4.24").await;
    let alice = client(&sim, "alice");
    let rule = common::lb_rule_on(&sim, "net-vr", "ssl", 443).await;
    assert!(
        alice
            .list_ssl_certs(&ListSslCerts {
                lbruleid: Some(rule.clone()),
                ..Default::default()
            })
            .await
            .unwrap()
            .is_empty(),
        "no certificate bound"
    );
    let cert = alice
        .upload_ssl_cert(&upload("a", LEAF_A, KEY_A))
        .await
        .unwrap();
    let (_, code, _, text) = api_error(
        alice
            .list_ssl_certs(&ListSslCerts {
                lbruleid: Some(rule),
                certid: cert.id.clone(),
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, text.as_str()),
        (
            530,
            "Internal error executing command, please contact your system administrator"
        )
    );
    // ListSslCertsCmd.execute wraps the access refusal too: `new CloudRuntimeException(e)`,
    // 530 cs 0 with the generic text — never a 531.
    let refused = api_error(
        client(&sim, "bob")
            .list_ssl_certs(&ListSslCerts {
                certid: cert.id,
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(
        refused,
        (
            530,
            530,
            Some(0),
            "Internal error executing command, please contact your system administrator".into()
        ),
        "another account's certificate"
    );

    // Before 4.24 no filter is refused too; a root admin reads the refusal's message
    // (`new CloudRuntimeException(e)` takes it without the class name).
    let old = sim_at("4.22").await;
    let admin = client(&old, "admin");
    let (_, code, _, text) = api_error(
        admin
            .call("listSslCerts", cloudstack::Params::new())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, text.as_str()),
        (
            530,
            "Invalid parameters either certificate ID or Account ID or Loadbalancer ID or Project ID required"
        )
    );
}

/// Before 4.24 several filters are no error: the first of certid, lbruleid, projectid and
/// accountid answers (`CertServiceImpl.listSslCerts` of 4.22).
#[tokio::test]
async fn before_4_24_the_certificate_id_wins_over_the_other_filters() {
    let sim = sim_at("4.22").await;
    let alice = client(&sim, "alice");
    let rule = common::lb_rule_on(&sim, "net-vr", "ssl", 443).await;
    let cert = alice
        .upload_ssl_cert(&upload("a", LEAF_A, KEY_A))
        .await
        .unwrap();
    let listed = alice
        .list_ssl_certs(&ListSslCerts {
            lbruleid: Some(rule),
            certid: cert.id.clone(),
            ..Default::default()
        })
        .await
        .expect("answered");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, cert.id);
}
