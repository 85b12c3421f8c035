//! Transport, signatures, envelopes, paging, throttling over real HTTP.

use crate::common;

use cloudstack::{ListVirtualMachines, ListZones, Params};
use cloudstack_sim::{Scenario, Throttle};
use common::{api_error, client, client_with_keys, keys, raw_get, start};
use serde_json::json;

#[tokio::test]
async fn signed_client_lists_zones_with_json_content_type() {
    let sim = start(Scenario::small()).await;
    let zones = client(&sim, "alice")
        .list_zones(&ListZones::default())
        .await
        .unwrap();
    assert_eq!(zones.len(), 1);
    assert_eq!(zones[0].name.as_deref(), Some("zone1"));
    let (api_key, secret) = keys(&sim, "alice");
    let raw = raw_get(
        &sim,
        &[
            ("apikey", &api_key),
            ("command", "listZones"),
            ("response", "json"),
        ],
        &secret,
        None,
    )
    .await;
    assert_eq!(raw.status, 200);
    assert_eq!(raw.content_type, "application/json; charset=UTF-8");
    assert_eq!(raw.json()["listzonesresponse"]["count"], 1);
}

#[tokio::test]
async fn bad_signature_is_401_keyed_by_the_command() {
    let sim = start(Scenario::small()).await;
    let (api_key, _) = keys(&sim, "alice");
    let err = client_with_keys(&sim, &api_key, "wrong-secret")
        .list_zones(&ListZones::default())
        .await
        .unwrap_err();
    let (status, code, cs, text) = api_error(err);
    assert_eq!((status, code, cs), (401, 401, None));
    assert_eq!(
        text,
        "unable to verify user credentials and/or request signature"
    );
    let raw = raw_get(
        &sim,
        &[
            ("apikey", &api_key),
            ("command", "listZones"),
            ("response", "json"),
        ],
        "x",
        None,
    )
    .await;
    assert_eq!(
        raw.json(),
        json!({"listzonesresponse": {"uuidList": [], "errorcode": 401, "errortext": "unable to verify user credentials and/or request signature"}})
    );
    let unknown_key = client_with_keys(&sim, "nobody", "x")
        .list_zones(&ListZones::default())
        .await
        .unwrap_err();
    assert_eq!(api_error(unknown_key).0, 401);
    assert_eq!(sim.call_log().iter().filter(|c| c.status == 401).count(), 3);
}

#[tokio::test]
async fn expired_request_is_rejected_and_version_decides_expires_formats() {
    let sim = start(Scenario::small()).await;
    let (api_key, secret) = keys(&sim, "alice");
    let base = [
        ("apikey", api_key.as_str()),
        ("command", "listZones"),
        ("response", "json"),
        ("signatureversion", "3"),
    ];
    let with = |expires: &'static str| {
        let mut p = base.to_vec();
        p.push(("expires", expires));
        p
    };
    assert_eq!(
        raw_get(&sim, &with("2001-01-01T00:00:00+0000"), &secret, None)
            .await
            .status,
        401
    );
    assert_eq!(
        raw_get(&sim, &with("2099-01-01T00:00:00+0000"), &secret, None)
            .await
            .status,
        200
    );
    assert_eq!(
        raw_get(&sim, &with("2099-01-01T00:00:00Z"), &secret, None)
            .await
            .status,
        200
    );
    assert_eq!(
        raw_get(&sim, &base, &secret, None).await.status,
        401,
        "signatureversion=3 without expires"
    );

    let mut old = Scenario::small();
    old.version = cloudstack_sim::Version::parse("4.18").unwrap();
    let old_sim = start(old).await;
    let (api_key, secret) = keys(&old_sim, "alice");
    let p = [
        ("apikey", api_key.as_str()),
        ("command", "listZones"),
        ("response", "json"),
        ("signatureversion", "3"),
        ("expires", "2099-01-01T00:00:00Z"),
    ];
    assert_eq!(
        raw_get(&old_sim, &p, &secret, None).await.status,
        401,
        "4.18 only takes +0000 offsets"
    );
}

/// `ApiServer.verifyRequest` rejects a key-signed request for a command that is not in
/// `s_apiNameCmdClassMap` before it checks the signature: 401 keyed `errorresponse`
/// (`getSerializedApiError`), whether the signature is good or bad, and a request without
/// any command likewise. The 432 "Unknown API command" of `handleRequest` is never reached.
#[tokio::test]
async fn unknown_or_missing_command_is_401_before_anything_else() {
    let sim = start(Scenario::small()).await;
    let err = client(&sim, "alice")
        .call("listFrobnicators", Params::new())
        .await
        .unwrap_err();
    let (status, code, cs, text) = api_error(err);
    assert_eq!((status, code, cs), (401, 401, None));
    assert_eq!(
        text,
        "unable to verify user credentials and/or request signature"
    );
    let (api_key, secret) = keys(&sim, "alice");
    for (params, signature) in [
        (
            vec![
                ("apikey", api_key.as_str()),
                ("command", "listFrobnicators"),
                ("response", "json"),
            ],
            None,
        ),
        (
            vec![
                ("apikey", api_key.as_str()),
                ("command", "listFrobnicators"),
                ("response", "json"),
            ],
            Some("AAAAAAAAAAAAAAAAAAAAAAAAAAA="),
        ),
        (
            vec![("apikey", api_key.as_str()), ("response", "json")],
            None,
        ),
    ] {
        let raw = raw_get(&sim, &params, &secret, signature).await;
        assert_eq!(raw.status, 401, "{params:?}: {}", raw.text);
        assert_eq!(
            raw.json()["errorresponse"]["errorcode"],
            401,
            "{}",
            raw.text
        );
    }
}

#[tokio::test]
async fn missing_parameter_is_431_with_the_server_text() {
    let sim = start(Scenario::small()).await;
    let err = client(&sim, "alice")
        .call("queryAsyncJobResult", Params::new())
        .await
        .unwrap_err();
    let (status, code, cs, text) = api_error(err);
    assert_eq!((status, code, cs), (431, 431, Some(9999)));
    assert_eq!(
        text,
        "Unable to execute API command queryasyncjobresult due to missing parameter jobid"
    );
}

#[tokio::test]
async fn without_response_json_the_answer_is_xml() {
    let sim = start(Scenario::small()).await;
    let (api_key, secret) = keys(&sim, "alice");
    let raw = raw_get(
        &sim,
        &[("apikey", &api_key), ("command", "listZones")],
        &secret,
        None,
    )
    .await;
    assert_eq!(raw.status, 200);
    assert!(
        raw.content_type.starts_with("text/xml"),
        "{}",
        raw.content_type
    );
    // An authenticated caller's XML carries the version on the root element
    // (`ApiResponseSerializer.toXMLSerializedString`, `expose.cloudstack.version.api.xml.response`
    // true by default).
    assert!(
        raw.text
            .contains("<listzonesresponse cloud-stack-version=\"4.22.0.0\"><count>1</count><zone>"),
        "{}",
        raw.text
    );
}

#[tokio::test]
async fn post_form_with_query_merge_is_verified() {
    let sim = start(Scenario::small()).await;
    let (api_key, secret) = keys(&sim, "alice");
    let params = [
        ("apikey", api_key.as_str()),
        ("command", "listZones"),
        ("response", "json"),
        ("name", "zone 1 ~x"),
    ];
    let signature = cloudstack::sign::signature(&secret, params.iter().copied());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .post(sim.api_url())
        .query(&[("command", "listZones"), ("response", "json")])
        .form(&[
            ("apikey", api_key.as_str()),
            ("name", "zone 1 ~x"),
            ("signature", signature.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"listzonesresponse": {}}),
        "no zone has that name: empty list is {{}}"
    );
}

#[tokio::test]
async fn paging_rules_and_the_500_cap() {
    let mut scenario = Scenario::small();
    scenario.networks[0].cidr = "10.1.0.0/16".into();
    scenario.add_vms(cloudstack_sim::SMALL_NETWORK, "node-", 600);
    let sim = start(scenario).await;
    let alice = client(&sim, "alice");
    let err = alice
        .call(
            "listVirtualMachines",
            Params::new().set("page", 1).set("pagesize", 501),
        )
        .await
        .unwrap_err();
    let (status, code, cs, text) = api_error(err);
    assert_eq!((status, code, cs), (431, 431, Some(4350)));
    assert_eq!(
        text,
        "Page size can't exceed max allowed page size value: 500"
    );
    let err = alice
        .call("listVirtualMachines", Params::new().set("pagesize", 10))
        .await
        .unwrap_err();
    assert_eq!(
        api_error(err).3,
        "\"page\" parameter is required when \"pagesize\" is specified"
    );

    let bare = alice
        .call("listVirtualMachines", Params::new().set("details", "min"))
        .await
        .unwrap();
    assert_eq!(bare["count"], 603);
    assert_eq!(
        bare["virtualmachine"].as_array().unwrap().len(),
        500,
        "implicit page size is 500"
    );
    let past = alice
        .call(
            "listVirtualMachines",
            Params::new().set("page", 3).set("pagesize", 500),
        )
        .await
        .unwrap();
    assert_eq!(
        past,
        json!({"count": 603}),
        "a page past the end has count and no items"
    );
    let all = alice
        .list_virtual_machines(&ListVirtualMachines {
            details: vec!["min".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 603, "the client pages through everything");
    assert_eq!(sim.call_counts()["listVirtualMachines"], 6);
}

#[tokio::test]
async fn throttling_per_account_with_root_admin_exempt() {
    let mut scenario = Scenario::small();
    scenario.settings.throttle = Some(Throttle {
        max: 3,
        interval_secs: 60,
    });
    let sim = start(scenario).await;
    let alice = client(&sim, "alice");
    for _ in 0..3 {
        alice.list_zones(&ListZones::default()).await.unwrap();
    }
    let err = alice.list_zones(&ListZones::default()).await.unwrap_err();
    let (status, code, cs, text) = api_error(err);
    assert_eq!((status, code, cs), (429, 429, Some(9999)));
    assert!(
        text.starts_with(
            "The given user has reached his/her account api limit, please retry after ["
        ),
        "{text}"
    );
    assert!(text.ends_with("] ms."), "{text}");
    client(&sim, "bob")
        .list_zones(&ListZones::default())
        .await
        .expect("bob has his own budget");
    let admin = client(&sim, "admin");
    for _ in 0..5 {
        admin
            .list_zones(&ListZones::default())
            .await
            .expect("root admin is exempt");
    }
    let caps = admin.list_capabilities().await.unwrap();
    assert_eq!(
        (caps.apilimitmax, caps.apilimitinterval),
        (Some(3), Some(60))
    );
}
