//! Who may see what: `/healthz` open to everyone, `/metrics` only to a token the API
//! server vouches for (TokenReview) and whose role grants `get` on it
//! (SubjectAccessReview), reviews cached, 503 when the API server cannot answer, and the
//! connection cap and header timeout kept under TLS.

use std::sync::Arc;
use std::time::Duration;

use cloudstack_ccm::controllers::shutdown_channel;
use cloudstack_ccm::leader::LeaderStatus;
use cloudstack_ccm::metrics::Metrics;
use cloudstack_ccm::server::{self, Readiness, Security, ServerLimits, ServerState};
use fake_apiserver::{Fault, Verb};
use tokio::io::AsyncReadExt;

use super::{delegating_api, https_get, reviews, serving_args, start_secure};

#[tokio::test]
async fn metrics_need_a_token_the_api_server_vouches_for_and_a_grant() {
    let (api, client) = delegating_api().await;
    let (addr, metrics) = start_secure(&client, &[]).await;
    metrics.reconcile("node", "ok");

    for path in ["/healthz", "/livez"] {
        assert_eq!(https_get(addr, path, None).await.status, 200, "{path}");
    }
    assert_eq!(
        reviews(&api),
        (0, 0),
        "always-allowed paths ask nothing of the API server"
    );

    // Anonymous, as the framework handles it: authorised as system:anonymous, refused.
    let anonymous = https_get(addr, "/metrics", None).await;
    assert_eq!(anonymous.status, 403, "{}", anonymous.body);
    assert!(
        anonymous
            .body
            .contains(r#"forbidden: User \"system:anonymous\" cannot get path \"/metrics\""#),
        "{}",
        anonymous.body
    );

    let forged = "not-a-token-anyone-issued";
    let refused = https_get(addr, "/metrics", Some(forged)).await;
    assert_eq!(refused.status, 401);
    assert!(refused.body.contains("Unauthorized"), "{}", refused.body);
    assert!(!refused.body.contains(forged), "the token is not echoed");

    let nobody = api.service_account_token("monitoring", "nobody").unwrap();
    let denied = https_get(addr, "/metrics", Some(&nobody)).await;
    assert_eq!(denied.status, 403);
    assert!(
        denied
            .body
            .contains("system:serviceaccount:monitoring:nobody")
            && !denied.body.contains(&nobody),
        "{}",
        denied.body
    );

    let prometheus = api
        .service_account_token("monitoring", "prometheus")
        .unwrap();
    let scraped = https_get(addr, "/metrics", Some(&prometheus)).await;
    assert_eq!(scraped.status, 200, "{}", scraped.body);
    assert!(
        scraped
            .body
            .contains("cloudstack_ccm_reconciles_total{controller=\"node\",result=\"ok\"} 1"),
        "{}",
        scraped.body
    );

    // Within the cache's time, scrapes cost the API server nothing more.
    let before = reviews(&api);
    for _ in 0..5 {
        assert_eq!(
            https_get(addr, "/metrics", Some(&prometheus)).await.status,
            200
        );
    }
    assert_eq!(reviews(&api), before, "cached reviews");
    println!(
        "(TokenReviews, SubjectAccessReviews) for the first /metrics request of 4 callers: {before:?}; for 5 more scrapes: none"
    );
}

#[tokio::test]
async fn reviews_are_cached_for_their_ttls_and_asked_again_after() {
    let (api, client) = delegating_api().await;
    let defaults = serving_args(&[]);
    // Long enough that a scrape every 15 s (or 30 s) is answered from the cache.
    assert_eq!(
        defaults.authentication_token_webhook_cache_ttl,
        Duration::from_secs(120)
    );
    assert_eq!(
        defaults.authorization_webhook_cache_authorized_ttl,
        Duration::from_secs(300)
    );
    assert_eq!(
        defaults.authorization_webhook_cache_unauthorized_ttl,
        Duration::from_secs(30)
    );
    let (addr, _) = start_secure(
        &client,
        &[
            "--authentication-token-webhook-cache-ttl=400ms",
            "--authorization-webhook-cache-authorized-ttl=400ms",
            "--authorization-webhook-cache-unauthorized-ttl=400ms",
        ],
    )
    .await;
    let prometheus = api
        .service_account_token("monitoring", "prometheus")
        .unwrap();
    let nobody = api.service_account_token("monitoring", "nobody").unwrap();
    for token in [&prometheus, &nobody] {
        https_get(addr, "/metrics", Some(token)).await;
        https_get(addr, "/metrics", Some(token)).await;
    }
    assert_eq!(reviews(&api), (2, 2), "one review of each kind per caller");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        https_get(addr, "/metrics", Some(&prometheus)).await.status,
        200
    );
    assert_eq!(https_get(addr, "/metrics", Some(&nobody)).await.status, 403);
    assert_eq!(
        reviews(&api),
        (4, 4),
        "asked again once the answers expired"
    );
}

#[tokio::test]
async fn the_api_server_away_makes_metrics_answer_503_never_allow() {
    let (api, client) = delegating_api().await;
    let (addr, _) = start_secure(&client, &[]).await;
    let prometheus = api
        .service_account_token("monitoring", "prometheus")
        .unwrap();

    api.set_faults(vec![
        Fault::error(500).on(Verb::Create, "tokenreviews.authentication.k8s.io"),
    ]);
    let answer = https_get(addr, "/metrics", Some(&prometheus)).await;
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert!(!answer.body.contains(&prometheus));
    assert_eq!(
        https_get(addr, "/healthz", None).await.status,
        200,
        "probes do not depend on the API server"
    );

    // Authenticated, but the access review fails: 503 as well.
    api.set_faults(vec![
        Fault::error(500).on(Verb::Create, "subjectaccessreviews.authorization.k8s.io"),
    ]);
    assert_eq!(
        https_get(addr, "/metrics", Some(&prometheus)).await.status,
        503
    );
    // Errors are not cached: the API server back, the scrape succeeds.
    api.clear_faults();
    assert_eq!(
        https_get(addr, "/metrics", Some(&prometheus)).await.status,
        200
    );

    // The API server gone altogether: a new caller gets 503, within the review timeout.
    let other = api.service_account_token("monitoring", "nobody").unwrap();
    drop(api);
    let started = std::time::Instant::now();
    let answer = https_get(addr, "/metrics", Some(&other)).await;
    assert_eq!(answer.status, 503, "{}", answer.body);
    println!("503 after {:?} with the API server gone", started.elapsed());
}

#[tokio::test]
async fn a_client_that_never_completes_the_tls_handshake_is_closed_after_the_header_timeout() {
    let (_api, client) = delegating_api().await;
    let security = Security::from_args(&serving_args(&[]), "127.0.0.1".parse().unwrap(), &client)
        .await
        .unwrap();
    let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = ServerState {
        metrics: Arc::new(Metrics::new()),
        readiness: Readiness::new(LeaderStatus::new()),
    };
    let limits = ServerLimits {
        max_connections: 2,
        header_read_timeout: Duration::from_millis(300),
    };
    let (_trigger, shutdown) = shutdown_channel();
    tokio::spawn(server::serve_secured(
        listener,
        state,
        limits,
        security,
        async move { shutdown.wait().await },
    ));
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _held = tokio::net::TcpStream::connect(addr).await.unwrap();
    // Beyond the cap: closed at once.
    let mut third = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 16];
    let closed = tokio::time::timeout(Duration::from_millis(200), third.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0) | Err(_))), "the cap holds");
    // The silent one: closed after the timeout, not before.
    let started = std::time::Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0) | Err(_))), "closed");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    // Then a probe gets through.
    assert_eq!(https_get(addr, "/healthz", None).await.status, 200);
}
