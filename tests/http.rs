//! The webhook and API contract over real HTTP, against a daemon on a real port and a real
//! SQLite file, fed real Alertmanager bodies.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{API_TOKEN, TestDaemon, WEBHOOK_TOKEN, alert_body, fixture};
use kubemedic::daemon::Components;
use kubemedic::domain::{AuditDraft, AuditEvent, Phase, RemediationRequest};
use kubemedic::store::{
    IngestOutcome, Page, RequestFilter, SignalFilter, SignalRecord, Store, StoreError, StoreHealth,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn items(v: &Value) -> &Vec<Value> {
    v["items"].as_array().expect("items array")
}

#[tokio::test]
async fn webhook_requires_the_configured_credentials() {
    let d = TestDaemon::start(|a| {
        a.web.webhook_basic_auth = Some(kubemedic::secret::Secret::new("am:s3cret"));
    })
    .await;
    let body = fixture("alertmanager/captured-from-alertmanager-0.25.json");
    let url = d.url("/api/v1/alerts/alertmanager");
    let post = || d.client.post(&url).body(body.clone());

    let none = post().send().await.unwrap();
    assert_eq!(none.status(), 401);
    assert!(none.headers().contains_key("www-authenticate"));
    assert_eq!(
        post().bearer_auth("wrong").send().await.unwrap().status(),
        401
    );
    assert_eq!(
        post()
            .basic_auth("am", Some("wrong"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    // Nothing was stored by the rejected calls.
    assert_eq!(d.api("/api/v1/signals").await["total"], 0);

    assert_eq!(
        post()
            .bearer_auth(WEBHOOK_TOKEN)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let basic = post()
        .basic_auth("am", Some("s3cret"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 200, "basic auth works as well");

    let metrics = d
        .client
        .get(d.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("kubemedic_signals_rejected_total{reason=\"unauthorized\"} 3"),
        "{metrics}"
    );
    d.stop().await;
}

#[tokio::test]
async fn oversized_body_gets_413_and_nothing_is_stored() {
    let d = TestDaemon::start(|a| a.web.max_body_bytes = Some(2048)).await;
    let big = alert_body(
        "firing",
        "Big",
        &[
            ("namespace", "shop"),
            ("pod", "p"),
            ("blob", &"x".repeat(4096)),
        ],
        "big1",
        "2026-01-01T00:00:00Z",
    );
    let r = d.send_alertmanager(&big).await;
    assert_eq!(r.status(), 413);
    // Also without a Content-Length header (chunked body).
    let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(big.into_bytes()) });
    let r = d
        .client
        .post(d.url("/api/v1/alerts/alertmanager"))
        .bearer_auth(WEBHOOK_TOKEN)
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(d.api("/api/v1/signals").await["total"], 0);
    d.stop().await;
}

#[tokio::test]
async fn broken_bodies_get_400_naming_the_field() {
    let d = TestDaemon::start(|_| {}).await;
    let r = d
        .send_alertmanager(&fixture("alertmanager/kubernaut-invalid-payload.json"))
        .await;
    assert_eq!(r.status(), 400);
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["field"], "alerts[0].labels", "{err}");
    assert!(
        err["error"].as_str().unwrap().contains("invalid JSON"),
        "{err}"
    );

    let bad_time = alert_body("firing", "A", &[("namespace", "shop")], "f1", "yesterday");
    let err: Value = d.send_alertmanager(&bad_time).await.json().await.unwrap();
    assert_eq!(err["field"], "alerts[0].startsAt");

    let mut bad_status: Value = serde_json::from_str(&alert_body(
        "firing",
        "A",
        &[],
        "f1",
        "2026-01-01T00:00:00Z",
    ))
    .unwrap();
    bad_status["alerts"][0]["status"] = "burning".into();
    let r = d.send_alertmanager(&bad_status.to_string()).await;
    assert_eq!(r.status(), 400);
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["field"], "alerts[0].status", "{err}");

    let no_alerts = r#"{"version":"4","status":"firing"}"#;
    let err: Value = d.send_alertmanager(no_alerts).await.json().await.unwrap();
    assert!(err["error"].as_str().unwrap().contains("alerts"), "{err}");

    let v5 = fixture("alertmanager/kubernaut-pod-crash.json")
        .replace("\"version\": \"4\"", "\"version\": \"5\"");
    let err: Value = d.send_alertmanager(&v5).await.json().await.unwrap();
    assert_eq!(err["field"], "version");

    // One bad alert rejects the whole delivery: nothing half-accepted.
    let mut mixed: Value =
        serde_json::from_str(&fixture("alertmanager/kubernaut-multiple-alerts.json")).unwrap();
    mixed["alerts"][2]["startsAt"] = "soon".into();
    let r = d.send_alertmanager(&mixed.to_string()).await;
    assert_eq!(r.status(), 400);
    assert_eq!(d.api("/api/v1/signals").await["total"], 0);
    d.stop().await;
}

#[tokio::test]
async fn a_committed_alert_is_readable_with_its_target() {
    let d = TestDaemon::start(|_| {}).await;
    let r = d
        .send_alertmanager(&fixture(
            "alertmanager/captured-from-alertmanager-0.25.json",
        ))
        .await;
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["outcomes"][0]["outcome"], "opened");
    let request_id = answer["outcomes"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // 2xx means committed: the signal is there immediately.
    let signals = d.api("/api/v1/signals").await;
    assert_eq!(signals["total"], 1);
    let s = &items(&signals)[0];
    assert_eq!(s["fingerprint"], "e26057f936a63f72");
    assert_eq!(s["status"], "firing");
    assert_eq!(s["labels"]["alertname"], "KubePodCrashLooping");
    assert_eq!(s["starts_at"], "2026-11-21T21:22:01.714486Z");
    assert_eq!(s["request_id"], request_id.as_str());

    let req = d.api(&format!("/api/v1/requests/{request_id}")).await;
    assert_eq!(
        req["target"],
        serde_json::json!({"kind": "Pod", "name": "checkout-7d9c8b6f5-x2k4q", "namespace": "shop"})
    );
    assert_eq!(req["occurrence_count"], 1);
    assert_eq!(req["signal"]["mode"], "reactive");
    assert_eq!(req["timeline"][0]["kind"], "received");
    d.stop().await;
}

#[tokio::test]
async fn redelivery_changes_nothing() {
    let d = TestDaemon::start(|_| {}).await;
    let body = fixture("alertmanager/kubernaut-multiple-alerts.json");
    assert_eq!(d.send_alertmanager(&body).await.status(), 200);
    let before = d.api("/api/v1/requests").await;
    // Alertmanager HA pairs send twice; retries send again.
    for _ in 0..3 {
        let again: Value = d.send_alertmanager(&body).await.json().await.unwrap();
        for o in again["outcomes"].as_array().unwrap() {
            assert_eq!(o["outcome"], "redelivery", "{again}");
        }
    }
    assert_eq!(d.api("/api/v1/signals").await["total"], 3);
    let after = d.api("/api/v1/requests").await;
    assert_eq!(items(&after).len(), 3);
    for (a, b) in items(&before).iter().zip(items(&after)) {
        assert_eq!(a["id"], b["id"]);
        assert_eq!(b["occurrence_count"], 1);
    }
    let metrics = d
        .client
        .get(d.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("kubemedic_signals_deduplicated_total{kind=\"redelivery\"} 9"),
        "{metrics}"
    );
    // Received counts every alert delivered, redeliveries included: 4 deliveries of 3.
    assert!(
        metrics.contains("kubemedic_signals_received_total{source=\"alertmanager\"} 12"),
        "{metrics}"
    );
    d.stop().await;
}

#[tokio::test]
async fn repeats_for_one_target_fold_into_one_request() {
    let d = TestDaemon::start_with(|_| {}, common::stalled(), None).await;
    let labels = [("namespace", "shop"), ("deployment", "checkout")];
    let first = alert_body(
        "firing",
        "KubeDeploymentReplicasMismatch",
        &labels,
        "aaa1",
        "2026-01-01T00:00:00Z",
    );
    let second = alert_body(
        "firing",
        "KubeDeploymentReplicasMismatch",
        &labels,
        "aaa1",
        "2026-01-01T00:10:00Z",
    );
    let other_alert = alert_body(
        "firing",
        "KubeDeploymentRolloutStuck",
        &labels,
        "bbb2",
        "2026-01-01T00:11:00Z",
    );
    // A pod of the same deployment: its deployment label joins it to the same request.
    let pod_alert = alert_body(
        "firing",
        "KubePodCrashLooping",
        &[
            ("namespace", "shop"),
            ("deployment", "checkout"),
            ("pod", "checkout-abc"),
        ],
        "ccc3",
        "2026-01-01T00:12:00Z",
    );
    let opened: Value = d.send_alertmanager(&first).await.json().await.unwrap();
    let id = opened["outcomes"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for body in [&second, &other_alert, &pod_alert] {
        let v: Value = d.send_alertmanager(body).await.json().await.unwrap();
        assert_eq!(v["outcomes"][0]["outcome"], "occurrence", "{v}");
        assert_eq!(v["outcomes"][0]["request_id"], id.as_str());
    }
    let list = d.api("/api/v1/requests").await;
    assert_eq!(items(&list).len(), 1);
    let r = &items(&list)[0];
    assert_eq!(r["occurrence_count"], 4);
    assert!(r["last_seen"].as_str().unwrap() >= r["first_seen"].as_str().unwrap());
    assert_eq!(d.api("/api/v1/signals").await["total"], 4);

    // Another namespace is another target.
    let elsewhere = alert_body(
        "firing",
        "KubeDeploymentReplicasMismatch",
        &[("namespace", "billing"), ("deployment", "checkout")],
        "ddd4",
        "2026-01-01T00:13:00Z",
    );
    let v: Value = d.send_alertmanager(&elsewhere).await.json().await.unwrap();
    assert_eq!(v["outcomes"][0]["outcome"], "opened");
    d.stop().await;
}

#[tokio::test]
async fn resolved_alerts_are_recorded_on_their_request() {
    let d = TestDaemon::start(|_| {}).await;
    let labels = [("namespace", "shop"), ("pod", "checkout-1")];
    let firing = alert_body(
        "firing",
        "PodCrash",
        &labels,
        "res1",
        "2026-01-01T00:00:00Z",
    );
    let resolved = alert_body(
        "resolved",
        "PodCrash",
        &labels,
        "res1",
        "2026-01-01T00:00:00Z",
    );
    let v: Value = d.send_alertmanager(&firing).await.json().await.unwrap();
    let id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let v: Value = d.send_alertmanager(&resolved).await.json().await.unwrap();
    assert_eq!(v["outcomes"][0]["outcome"], "resolved");
    assert_eq!(v["outcomes"][0]["request_id"], id.as_str());

    let signals = d.api("/api/v1/signals?status=resolved").await;
    assert_eq!(signals["total"], 1);
    assert_eq!(items(&signals)[0]["ends_at"], "2030-01-01T00:00:00Z");
    let req = d.api(&format!("/api/v1/requests/{id}")).await;
    let kinds: Vec<&str> = req["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"signal_resolved"), "{kinds:?}");

    // A resolved alert never seen firing is still recorded, with no request.
    let v: Value = d
        .send_alertmanager(&fixture("alertmanager/kubernaut-resolved-alert.json"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["outcomes"][0]["outcome"], "resolved");
    assert!(v["outcomes"][0]["request_id"].is_null());
    assert_eq!(d.api("/api/v1/signals?status=resolved").await["total"], 2);
    assert_eq!(items(&d.api("/api/v1/requests").await).len(), 1);
    d.stop().await;
}

#[tokio::test]
async fn predictions_are_proactive_and_native_signals_are_accepted() {
    let d = TestDaemon::start(|_| {}).await;
    let predicted = alert_body(
        "firing",
        "PredictedMemoryExhaustion",
        &[("namespace", "shop"), ("deployment", "checkout")],
        "pred1",
        "2026-01-01T00:00:00Z",
    );
    let v: Value = d.send_alertmanager(&predicted).await.json().await.unwrap();
    let id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    assert_eq!(
        d.api(&format!("/api/v1/requests/{id}")).await["signal_mode"],
        "proactive"
    );

    let native = r#"{"name": "DiskWillFill", "mode": "proactive", "severity": "warning",
        "target": {"kind": "PersistentVolumeClaim", "name": "data-db-0", "namespace": "db"},
        "summary": "PVC full in 3h", "starts_at": "2026-01-01T00:00:00Z", "source": "forecaster"}"#;
    let post = |body: &'static str, token: &'static str| {
        d.client
            .post(d.url("/api/v1/signals"))
            .bearer_auth(token)
            .body(body)
            .send()
    };
    assert_eq!(post(native, "nope").await.unwrap().status(), 401);
    let r = post(native, WEBHOOK_TOKEN).await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["outcomes"][0]["outcome"], "opened");
    let again: Value = post(native, API_TOKEN).await.unwrap().json().await.unwrap();
    assert_eq!(again["outcomes"][0]["outcome"], "redelivery");
    let rid = v["outcomes"][0]["request_id"].as_str().unwrap();
    let req = d.api(&format!("/api/v1/requests/{rid}")).await;
    assert_eq!(req["target"]["kind"], "PersistentVolumeClaim");
    assert_eq!(req["signal"]["annotations"]["summary"], "PVC full in 3h");

    let typo = post(r#"{"name": "X", "targt": {}}"#, WEBHOOK_TOKEN)
        .await
        .unwrap();
    assert_eq!(typo.status(), 400);
    let err: Value = typo.json().await.unwrap();
    assert!(err["error"].as_str().unwrap().contains("targt"), "{err}");
    d.stop().await;
}

#[tokio::test]
async fn api_needs_the_admin_token_and_refuses_all_without_one() {
    let d = TestDaemon::start(|_| {}).await;
    for path in ["/api/v1/requests", "/api/v1/signals"] {
        let r = d.client.get(d.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
        let r = d
            .client
            .get(d.url(path))
            .bearer_auth(WEBHOOK_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            401,
            "the webhook token is not an API token: {path}"
        );
    }
    d.stop().await;

    let open = TestDaemon::start(|a| a.web.api_token = None).await;
    for token in ["", "anything", API_TOKEN] {
        let r = open
            .client
            .get(open.url("/api/v1/requests"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "no API token configured refuses {token:?}");
    }
    open.stop().await;
}

#[tokio::test]
async fn request_list_filters_and_pages() {
    let d = TestDaemon::start(|_| {}).await;
    for i in 0..5 {
        let ns = if i < 3 { "shop" } else { "billing" };
        let body = alert_body(
            "firing",
            "PodCrash",
            &[("namespace", ns), ("pod", &format!("p{i}"))],
            &format!("fp{i}"),
            "2026-01-01T00:00:00Z",
        );
        assert_eq!(d.send_alertmanager(&body).await.status(), 200);
    }
    let all = d.api("/api/v1/requests").await;
    assert_eq!(items(&all).len(), 5);
    assert!(all["next"].is_null());
    let shop = d.api("/api/v1/requests?namespace=shop").await;
    assert_eq!(items(&shop).len(), 3);
    // Pages by key: `next` continues where a page ended, whatever was added meanwhile.
    let page = d.api("/api/v1/requests?limit=2").await;
    assert_eq!(items(&page).len(), 2);
    let next = page["next"].as_str().expect("a next cursor");
    let rest = d
        .api(&format!("/api/v1/requests?limit=2&before={next}"))
        .await;
    assert_eq!(items(&rest)[0]["id"], items(&all)[2]["id"]);
    let p3 = d.api("/api/v1/requests?target=p3&alert=PodCrash").await;
    assert_eq!(items(&p3).len(), 1);
    // Without stages the worker ends every request honestly.
    d.eventually("/api/v1/requests?phase=ManualReviewRequired", 10, |v| {
        v["items"].as_array().map(Vec::len) == Some(5)
    })
    .await;

    for (query, field) in [
        ("phase=Sleeping", "phase"),
        ("limit=-1", "limit"),
        ("limit=abc", "limit"),
        ("colour=red", "colour"),
        ("offset=2", "offset"),
        ("before=nonsense", "before"),
        ("since=yesterday", "since"),
    ] {
        let r = d
            .client
            .get(d.url(&format!("/api/v1/requests?{query}")))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{query}");
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["field"], field, "{query}");
    }
    let r = d
        .client
        .get(d.url(&format!("/api/v1/requests/{}", uuid::Uuid::new_v4())))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    d.stop().await;
}

#[tokio::test]
async fn without_stages_a_request_ends_in_review_with_the_reason_and_a_full_timeline() {
    let d = TestDaemon::start(|_| {}).await;
    let v: Value = d
        .send_alertmanager(&fixture("alertmanager/kubernaut-pod-crash.json"))
        .await
        .json()
        .await
        .unwrap();
    let id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let req = d
        .eventually(&format!("/api/v1/requests/{id}"), 10, |r| {
            r["phase"] == "ManualReviewRequired"
        })
        .await;
    assert_eq!(req["reason"], "enrichment not available");
    let transitions: Vec<String> = req["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "transition")
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        transitions,
        [
            "Received -> Enriching",
            "Enriching -> ManualReviewRequired: enrichment not available"
        ]
    );
    let metrics = d
        .client
        .get(d.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("kubemedic_requests{phase=\"ManualReviewRequired\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("kubemedic_ingest_duration_seconds_count 1"),
        "{metrics}"
    );
    d.stop().await;
}

#[tokio::test]
async fn health_and_readiness() {
    let d = TestDaemon::start(|_| {}).await;
    let r = d.client.get(d.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("x-request-id"));
    let ready: Value = d
        .client
        .get(d.url("/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["status"], "ready");
    assert_eq!(ready["checks"]["store"]["ok"], true);
    assert_eq!(ready["checks"]["migrations"]["ok"], true);
    // A caller's request id is echoed back.
    let r = d
        .client
        .get(d.url("/healthz"))
        .header("x-request-id", "trace-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "trace-123");
    d.stop().await;
}

/// A store whose database has gone away: every call fails as sqlx reports a lost connection.
struct UnreachableStore(Arc<dyn Store>);

fn gone() -> StoreError {
    StoreError::Unavailable(sqlx::Error::PoolTimedOut)
}

#[async_trait]
impl kubemedic::store::Housekeeping for UnreachableStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }
    fn serial_writes(&self) -> bool {
        true
    }
    async fn health(&self) -> Result<StoreHealth, StoreError> {
        Err(gone())
    }
    async fn setting_or_init(
        &self,
        _: &str,
        _: &(dyn Fn() -> String + Sync),
    ) -> Result<String, StoreError> {
        Err(gone())
    }
}

#[async_trait]
impl kubemedic::store::Requests for UnreachableStore {
    async fn ingest(
        &self,
        _: &[kubemedic::domain::NewSignal],
    ) -> Result<Vec<IngestOutcome>, StoreError> {
        Err(gone())
    }
    async fn get_request(&self, _: uuid::Uuid) -> Result<Option<RemediationRequest>, StoreError> {
        Err(gone())
    }
    async fn list_requests(
        &self,
        f: &RequestFilter,
    ) -> Result<kubemedic::store::RequestPage, StoreError> {
        self.0.list_requests(f).await
    }
    async fn list_signals(&self, f: &SignalFilter) -> Result<Page<SignalRecord>, StoreError> {
        self.0.list_signals(f).await
    }
    async fn count_by_phase(&self) -> Result<Vec<(Phase, i64)>, StoreError> {
        Err(gone())
    }
    async fn summary(
        &self,
        _: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<kubemedic::store::Summary, StoreError> {
        Err(gone())
    }
    async fn signal_resolved_since(
        &self,
        _: &str,
        _: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool, StoreError> {
        Err(gone())
    }
}

#[async_trait]
impl kubemedic::store::Claims for UnreachableStore {
    async fn claim_batch(
        &self,
        _: &str,
        _: std::time::Duration,
        _: usize,
    ) -> Result<Vec<RemediationRequest>, StoreError> {
        Ok(vec![])
    }
    async fn renew(
        &self,
        _: uuid::Uuid,
        _: &str,
        _: std::time::Duration,
    ) -> Result<bool, StoreError> {
        Err(gone())
    }
    async fn commit_steps(
        &self,
        _: &str,
        _: &[kubemedic::store::PendingStep],
    ) -> Result<Vec<Option<RemediationRequest>>, StoreError> {
        Err(gone())
    }
    async fn release(&self, _: uuid::Uuid, _: &str) -> Result<(), StoreError> {
        Err(gone())
    }
}

#[async_trait]
impl kubemedic::store::Audit for UnreachableStore {
    async fn audit_trail(&self, _: uuid::Uuid) -> Result<Vec<AuditEvent>, StoreError> {
        Err(gone())
    }
    async fn audit_of_kind(&self, _: &str, _: i64) -> Result<Vec<AuditEvent>, StoreError> {
        Err(gone())
    }
    fn watch_trail(&self) -> kubemedic::store::TrailWatch {
        self.0.watch_trail()
    }
    fn trail_bell(&self) -> kubemedic::store::BellStatus {
        self.0.trail_bell()
    }
    async fn notification_queue_usage(&self) -> Result<Option<f64>, StoreError> {
        Err(gone())
    }
    async fn audit_after(
        &self,
        _: uuid::Uuid,
        _: i64,
        _: i64,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        Err(gone())
    }
    async fn changed_requests(&self, _: i64, _: i64) -> Result<Vec<(i64, uuid::Uuid)>, StoreError> {
        Err(gone())
    }
    async fn audit_head(&self) -> Result<i64, StoreError> {
        Err(gone())
    }
    async fn verify_request_chain(
        &self,
        _: uuid::Uuid,
    ) -> Result<kubemedic::store::ChainReport, StoreError> {
        Err(gone())
    }
    async fn verify_chain(&self) -> Result<kubemedic::store::ChainReport, StoreError> {
        Err(gone())
    }
    async fn append_audit(
        &self,
        _: Option<uuid::Uuid>,
        _: Option<Phase>,
        _: &AuditDraft,
    ) -> Result<(), StoreError> {
        Err(gone())
    }
    async fn rotate_audit_key(&self, _: &str) -> Result<Option<(String, String)>, StoreError> {
        Err(gone())
    }
}

#[async_trait]
impl kubemedic::store::Auth for UnreachableStore {
    // Keys still resolve: the tests reach the unreachable parts as an authenticated caller.
    async fn create_api_key(
        &self,
        k: &kubemedic::domain::ApiKey,
        h: &str,
    ) -> Result<(), StoreError> {
        self.0.create_api_key(k, h).await
    }
    async fn api_key_by_hash(
        &self,
        h: &str,
    ) -> Result<Option<kubemedic::domain::ApiKey>, StoreError> {
        self.0.api_key_by_hash(h).await
    }
    async fn list_api_keys(&self) -> Result<Vec<kubemedic::domain::ApiKey>, StoreError> {
        self.0.list_api_keys().await
    }
    async fn revoke_api_key(
        &self,
        n: &str,
        a: &str,
    ) -> Result<Option<kubemedic::domain::ApiKey>, StoreError> {
        self.0.revoke_api_key(n, a).await
    }
    async fn create_session(
        &self,
        h: &str,
        s: &kubemedic::domain::Session,
    ) -> Result<(), StoreError> {
        self.0.create_session(h, s).await
    }
    async fn session(&self, h: &str) -> Result<Option<kubemedic::domain::Session>, StoreError> {
        self.0.session(h).await
    }
    async fn delete_session(&self, h: &str) -> Result<(), StoreError> {
        self.0.delete_session(h).await
    }
    async fn record_failed_login(
        &self,
        _: &str,
        _: chrono::DateTime<chrono::Utc>,
        _: Duration,
    ) -> Result<(), StoreError> {
        Err(gone())
    }
    async fn failed_logins(
        &self,
        _: &str,
        _: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<chrono::DateTime<chrono::Utc>>, StoreError> {
        Err(gone())
    }
    async fn clear_failed_logins(&self, _: &str) -> Result<(), StoreError> {
        Err(gone())
    }
}

#[async_trait]
impl kubemedic::store::Approvals for UnreachableStore {
    async fn create_approval(
        &self,
        _: &kubemedic::domain::ApprovalRequest,
        _: &[kubemedic::domain::Notification],
    ) -> Result<kubemedic::domain::ApprovalRequest, StoreError> {
        Err(gone())
    }
    async fn get_approval(
        &self,
        _: uuid::Uuid,
    ) -> Result<Option<kubemedic::domain::ApprovalRequest>, StoreError> {
        Err(gone())
    }
    async fn approval_of_request(
        &self,
        _: uuid::Uuid,
    ) -> Result<Option<kubemedic::domain::ApprovalRequest>, StoreError> {
        Err(gone())
    }
    async fn list_approvals(
        &self,
        _: Option<kubemedic::domain::ApprovalStatus>,
        _: i64,
        _: i64,
    ) -> Result<Page<kubemedic::domain::ApprovalRequest>, StoreError> {
        Err(gone())
    }
    async fn decide_approval(
        &self,
        _: uuid::Uuid,
        _: &kubemedic::domain::ApprovalDecision,
    ) -> Result<kubemedic::domain::DecideOutcome, StoreError> {
        Err(gone())
    }
    async fn approval_not_executed(&self, _: uuid::Uuid, _: &str) -> Result<(), StoreError> {
        Err(gone())
    }
    async fn approval_made_worse(&self, _: uuid::Uuid, _: &str) -> Result<(), StoreError> {
        Err(gone())
    }
    async fn consume_nonce(&self, _: &str, _: Option<uuid::Uuid>) -> Result<bool, StoreError> {
        Err(gone())
    }
    async fn claim_notification(
        &self,
        _: Duration,
    ) -> Result<Option<kubemedic::domain::Notification>, StoreError> {
        Err(gone())
    }
    async fn finish_notification(
        &self,
        _: uuid::Uuid,
        _: &kubemedic::store::DeliveryResult,
        _: &AuditDraft,
    ) -> Result<(), StoreError> {
        Err(gone())
    }
    async fn notifications(
        &self,
        _: uuid::Uuid,
    ) -> Result<Vec<kubemedic::domain::Notification>, StoreError> {
        Err(gone())
    }
}

#[async_trait]
impl kubemedic::store::Execution for UnreachableStore {
    async fn acquire_execution_lock(
        &self,
        _: &str,
        _: Option<&str>,
        _: uuid::Uuid,
    ) -> Result<kubemedic::store::ExecutionLock, StoreError> {
        Err(gone())
    }
    async fn execution_locks(
        &self,
        _: Option<&str>,
    ) -> Result<Vec<kubemedic::store::ExecutionLock>, StoreError> {
        Err(gone())
    }
    async fn begin_intent(
        &self,
        _: uuid::Uuid,
        _: i32,
        _: &str,
        _: &serde_json::Value,
    ) -> Result<(kubemedic::store::Intent, bool), StoreError> {
        Err(gone())
    }
    async fn finish_intent(
        &self,
        _: uuid::Uuid,
        _: i32,
        _: kubemedic::store::IntentStatus,
        _: &serde_json::Value,
    ) -> Result<(), StoreError> {
        Err(gone())
    }
    async fn intents(&self, _: uuid::Uuid) -> Result<Vec<kubemedic::store::Intent>, StoreError> {
        Err(gone())
    }
}

#[async_trait]
impl kubemedic::store::History for UnreachableStore {
    async fn record_history(&self, _: &kubemedic::domain::HistoryRecord) -> Result<(), StoreError> {
        Err(gone())
    }
    async fn history(
        &self,
        _: &str,
        _: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<kubemedic::domain::HistoryRecord>, StoreError> {
        Err(gone())
    }
}

#[async_trait]
impl kubemedic::store::Patterns for UnreachableStore {
    async fn record_outcome(
        &self,
        _: &kubemedic::domain::PatternOutcome,
    ) -> Result<bool, StoreError> {
        Err(gone())
    }
    async fn outcomes(
        &self,
        _: &str,
        _: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<kubemedic::domain::PatternOutcome>, StoreError> {
        Err(gone())
    }
}

#[async_trait]
impl kubemedic::store::Chat for UnreachableStore {
    async fn open_conversation(
        &self,
        _: &kubemedic::domain::Conversation,
    ) -> Result<(), StoreError> {
        Err(gone())
    }
    async fn conversation(
        &self,
        _: uuid::Uuid,
    ) -> Result<Option<kubemedic::domain::Conversation>, StoreError> {
        Err(gone())
    }
    async fn conversations(
        &self,
        _: &str,
        _: i64,
    ) -> Result<Vec<kubemedic::domain::Conversation>, StoreError> {
        Err(gone())
    }
    async fn add_turn(
        &self,
        _: &kubemedic::domain::NewTurn,
    ) -> Result<kubemedic::domain::ChatTurn, StoreError> {
        Err(gone())
    }
    async fn turns(
        &self,
        _: uuid::Uuid,
        _: i64,
        _: i64,
    ) -> Result<Vec<kubemedic::domain::ChatTurn>, StoreError> {
        Err(gone())
    }
    async fn finish_turn(&self, _: i64, _: &str) -> Result<(), StoreError> {
        Err(gone())
    }
    async fn memory(&self, _: &str) -> Result<Option<kubemedic::domain::MemoryNote>, StoreError> {
        Err(gone())
    }
    async fn memories(&self) -> Result<Vec<kubemedic::domain::MemoryNote>, StoreError> {
        Err(gone())
    }
    async fn set_memory(&self, _: &str, _: Option<&str>, _: &str) -> Result<(), StoreError> {
        Err(gone())
    }
}

#[tokio::test]
async fn store_failure_answers_503_so_alertmanager_retries() {
    let (_dir, url) = common::sqlite_url();
    let real = common::open_store(&url, Arc::new(kubemedic::clock::SystemClock)).await;
    let broken: Arc<dyn Store> = Arc::new(UnreachableStore(real.clone()));
    let d = TestDaemon::start_with(|_| {}, Components::default(), Some(broken)).await;
    let r = d
        .send_alertmanager(&fixture(
            "alertmanager/captured-from-alertmanager-0.25.json",
        ))
        .await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let ready = d.client.get(d.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    // Nothing half-written.
    assert_eq!(
        real.list_signals(&SignalFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .total,
        0
    );
    d.stop().await;
}

/// Every real Alertmanager body in the fixtures is accepted, each alert opens a request for the
/// target its labels name, and the broken one is refused with the field named.
#[tokio::test]
async fn every_real_alertmanager_body_is_accepted_with_its_target() {
    let d = TestDaemon::start_with(|_| {}, common::stalled(), None).await;
    for (file, want) in [
        (
            "kubernaut-cpu-throttling-alert.json",
            vec![("staging", "Pod", "api-gateway-6d4b79c5f9-abcdef")],
        ),
        (
            "kubernaut-high-memory.json",
            vec![("production", "Pod", "web-app-567abc")],
        ),
        (
            "kubernaut-pod-crash.json",
            vec![("production", "Pod", "api-server-789def")],
        ),
        (
            "captured-from-alertmanager-0.25.json",
            vec![("shop", "Pod", "checkout-7d9c8b6f5-x2k4q")],
        ),
    ] {
        let answer: Value = d
            .send_alertmanager(&fixture(&format!("alertmanager/{file}")))
            .await
            .json()
            .await
            .unwrap();
        let outcomes = answer["outcomes"].as_array().unwrap();
        assert_eq!(outcomes.len(), want.len(), "{file}: {answer}");
        for (o, (ns, kind, name)) in outcomes.iter().zip(&want) {
            assert_eq!(o["outcome"], "opened", "{file}: {answer}");
            let id = o["request_id"].as_str().unwrap();
            let req = d.api(&format!("/api/v1/requests/{id}")).await;
            assert_eq!(
                req["target"],
                serde_json::json!({"kind": kind, "name": name, "namespace": ns}),
                "{file}"
            );
        }
    }
    let broken = d
        .send_alertmanager(&fixture("alertmanager/kubernaut-invalid-payload.json"))
        .await;
    assert_eq!(broken.status(), 400);
    d.stop().await;
}

#[tokio::test]
async fn history_names_the_target_it_needs_and_serves_what_the_store_holds() {
    let d = TestDaemon::start(|_| {}).await;
    let get = |path: &str, token: &str| d.client.get(d.url(path)).bearer_auth(token).send();
    let r = get("/api/v1/history?kind=Deployment&name=checkout", "wrong")
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = get("/api/v1/history?name=checkout", API_TOKEN)
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["field"], "kind");
    let r = get(
        "/api/v1/history?kind=Deployment&name=x&colour=red",
        API_TOKEN,
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 400);

    let target = kubemedic::domain::Target::new("Deployment", "checkout", Some("shop".into()));
    let record: kubemedic::domain::HistoryRecord = serde_json::from_value(serde_json::json!({
        "remediationUid": uuid::Uuid::new_v4().to_string(),
        "target": target,
        "completedAt": chrono::Utc::now() - chrono::Duration::minutes(10),
        "signalName": "KubePodCrashLooping",
        "workflowType": "RollbackDeployment",
        "workflowId": "rollback-deployment-previous-revision",
        "outcome": "completed",
        "effectivenessScore": 0.95,
        "preRemediationSpecHash": "sha256:a",
        "postRemediationSpecHash": "sha256:b",
        "signalResolved": true,
        "assessmentReason": "Full",
    }))
    .unwrap();
    d.store.record_history(&record).await.unwrap();
    let v = d
        .api("/api/v1/history?kind=Deployment&name=checkout&namespace=shop")
        .await;
    assert_eq!(v["total"], 1, "{v:#}");
    assert_eq!(v["items"][0]["workflowType"], "RollbackDeployment");
    assert_eq!(v["context"]["regressionDetected"], false);
    let other = d
        .api("/api/v1/history?kind=Deployment&name=checkout&namespace=other")
        .await;
    assert_eq!(
        other["total"], 0,
        "another namespace's checkout is another target"
    );
    d.stop().await;
}

/// A daemon on embedded SQLite, and one on a fresh PostgreSQL database when the test tier has
/// one, each named by its backend.
async fn on_each_backend() -> Vec<(&'static str, TestDaemon)> {
    let mut out = vec![("sqlite", TestDaemon::start(|_| {}).await)];
    if let Some(url) = common::fresh_postgres().await {
        let d =
            TestDaemon::start(|a| a.store.database_url = Some(kubemedic::secret::Secret::new(url)))
                .await;
        out.push(("postgres", d));
    }
    out
}

/// A label value with a NUL character (`\u0000`) used to make PostgreSQL refuse the whole
/// payload: 503 on every retry, and the valid alerts of the same delivery never stored. Both
/// backends now store the alert with U+FFFD in place of the NUL, beside its valid siblings;
/// valid JSON followed by garbage is refused with 400.
#[tokio::test]
async fn a_nul_in_a_label_does_not_block_its_delivery_on_either_backend() {
    for (on, d) in on_each_backend().await {
        let mut body: Value = serde_json::from_str(&alert_body(
            "firing",
            "KubePodCrashLooping",
            &[("namespace", "shop"), ("pod", "web-1")],
            "fp-valid",
            "2026-01-01T00:00:00Z",
        ))
        .unwrap();
        let mut poisoned = body["alerts"][0].clone();
        poisoned["labels"]["pod"] = serde_json::json!("web-\u{0}2");
        poisoned["annotations"]["summary"] = serde_json::json!("bad\u{0}text");
        poisoned["fingerprint"] = serde_json::json!("fp-nul");
        body["alerts"].as_array_mut().unwrap().push(poisoned);
        let r = d.send_alertmanager(&body.to_string()).await;
        assert_eq!(r.status(), 200, "{on}");
        let answer: Value = r.json().await.unwrap();
        let outcomes = answer["outcomes"].as_array().unwrap();
        assert_eq!(outcomes.len(), 2, "{on}: {answer:#}");
        assert!(
            outcomes.iter().all(|o| o["outcome"] == "opened"),
            "{on}: {answer:#}"
        );
        let stored = d
            .api(&format!(
                "/api/v1/requests/{}",
                outcomes[1]["request_id"].as_str().unwrap()
            ))
            .await;
        assert_eq!(stored["signal"]["labels"]["pod"], "web-\u{FFFD}2", "{on}");
        assert_eq!(
            stored["signal"]["annotations"]["summary"], "bad\u{FFFD}text",
            "{on}"
        );

        let garbage = format!("{}trailing", body);
        let r = d.send_alertmanager(&garbage).await;
        assert_eq!(r.status(), 400, "{on}");
        let err: Value = r.json().await.unwrap();
        assert!(
            err["error"]
                .as_str()
                .unwrap()
                .contains("trailing characters"),
            "{on}: {err}"
        );
        d.stop().await;
    }
}

/// A compressed body is refused for what it is (415 naming the encoding), not as "invalid
/// JSON"; nothing is stored.
#[tokio::test]
async fn a_compressed_body_is_refused_naming_its_encoding() {
    let d = TestDaemon::start(|_| {}).await;
    let body = alert_body(
        "firing",
        "KubePodCrashLooping",
        &[("namespace", "shop")],
        "fp-gz",
        "2026-01-01T00:00:00Z",
    );
    let r = d
        .client
        .post(d.url("/api/v1/alerts/alertmanager"))
        .bearer_auth(WEBHOOK_TOKEN)
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let err: Value = r.json().await.unwrap();
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("`gzip` is not supported"),
        "{err}"
    );
    assert_eq!(d.api("/api/v1/signals").await["total"], 0);
    d.stop().await;
}

/// Issue 13, item 1: credentials in an alert's own text — a probe URL in a label, a connection
/// string in a rule's annotation, a token in the generator URL — are redacted when the alert is
/// accepted, so neither the stored request, its audit timeline nor the signals list shows
/// them; the routing labels are untouched. On both backends.
#[tokio::test]
async fn credentials_in_an_alerts_text_are_never_stored_or_shown() {
    let planted = [
        "pr0bePassw0rd",
        "Sup3rS3cretPw",
        "glpat-AbCdEfGhIjKlMnOpQrSt",
    ];
    for (on, d) in on_each_backend().await {
        let mut body: Value = serde_json::from_str(&alert_body(
            "firing",
            "ProbeFailed",
            &[
                ("namespace", "shop"),
                ("pod", "checkout-1"),
                (
                    "instance",
                    "https://monitor:pr0bePassw0rd@checkout.shop:8443/healthz",
                ),
            ],
            "fp-creds",
            "2026-01-01T00:00:00Z",
        ))
        .unwrap();
        body["alerts"][0]["annotations"]["description"] = serde_json::json!(
            "checkout cannot reach postgres://checkout:Sup3rS3cretPw@db.shop:5432/orders"
        );
        body["alerts"][0]["generatorURL"] = serde_json::json!(
            "http://prometheus:9090/graph?g0.expr=up&private_token=glpat-AbCdEfGhIjKlMnOpQrSt"
        );
        let r = d.send_alertmanager(&body.to_string()).await;
        assert_eq!(r.status(), 200, "{on}");
        let answer: Value = r.json().await.unwrap();
        let id = answer["outcomes"][0]["request_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let request = d.api(&format!("/api/v1/requests/{id}")).await;
        let signals = d.api("/api/v1/signals").await;
        for shown in [request.to_string(), signals.to_string()] {
            for secret in planted {
                assert!(!shown.contains(secret), "{on}: {secret} shown in {shown}");
            }
        }
        assert_eq!(request["signal"]["labels"]["pod"], "checkout-1", "{on}");
        assert_eq!(request["target"]["name"], "checkout-1", "{on}: {request:#}");
        assert_eq!(
            request["signal"]["labels"]["instance"],
            "https://monitor:[REDACTED]@checkout.shop:8443/healthz",
            "{on}"
        );
        d.stop().await;
    }
}

/// Issue 13, item 5: with no cluster configured, `serve` accepts alerts and the requests wait
/// for a cluster — `/readyz` says which and why — then, after `--max-wait-seconds`, end in
/// review naming the missing cluster (they used to end at once, "enrichment not available").
#[tokio::test]
async fn without_a_cluster_requests_wait_then_end_naming_the_missing_cluster() {
    let d = TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some("/nonexistent/kubemedic-test/kubeconfig".into());
        a.pipeline.max_wait_seconds = Some(3);
    })
    .await;
    // Still accepting alerts (Alertmanager keeps delivering), but not ready to remediate.
    let ready = d.client.get(d.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["status"], "degraded", "{ready:#}");
    assert_eq!(ready["checks"]["cluster"]["ok"], false, "{ready:#}");
    assert!(
        ready["checks"]["cluster"]["detail"]
            .as_str()
            .unwrap()
            .starts_with("not configured"),
        "{ready:#}"
    );
    let v: Value = d
        .send_alertmanager(&fixture("alertmanager/kubernaut-pod-crash.json"))
        .await
        .json()
        .await
        .unwrap();
    let id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let waiting = d
        .eventually(&format!("/api/v1/requests/{id}"), 10, |r| {
            r["state"]["waiting"]["dependency"] == "cluster"
        })
        .await;
    assert_eq!(waiting["phase"], "Enriching", "{waiting:#}");
    let done = d
        .eventually(&format!("/api/v1/requests/{id}"), 20, |r| {
            r["phase"] == "ManualReviewRequired"
        })
        .await;
    let reason = done["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("cluster not available for")
            && reason.contains("no Kubernetes cluster is configured"),
        "{reason}"
    );
    let kinds: Vec<&str> = done["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"waiting"), "{kinds:?}");
    d.stop().await;
}

// --- Slow and surplus clients (issue 13, item 4): no connection is held forever. These talk
// raw HTTP/1.1 over TCP so that they can stall where a real client library never would.

/// How long a test waits for the server to do something it should do within about a second.
/// Generous: the machine may be busy; the point is "cut", not "cut in exactly 1 s".
const CUT_WITHIN: Duration = Duration::from_secs(10);

async fn connect(d: &TestDaemon) -> TcpStream {
    TcpStream::connect(d.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Read until the server closes the connection (end of stream or reset) and return what it
/// sent before; `None` if it was still open after [`CUT_WITHIN`].
async fn read_until_closed(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + CUT_WITHIN;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(got),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Read one response (head and a Content-Length body) off a kept-alive connection.
async fn read_response(s: &mut TcpStream) -> (u16, String) {
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).to_string();
                let length = head
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
                    .map(|(_, v)| v.trim().parse::<usize>().unwrap())
                    .expect("a Content-Length");
                while got.len() < end + 4 + length {
                    let n = s.read(&mut buf).await.unwrap();
                    assert!(n > 0, "closed mid-body: {head}");
                    got.extend_from_slice(&buf[..n]);
                }
                let status = head[9..12].parse().unwrap();
                let body = String::from_utf8_lossy(&got[end + 4..end + 4 + length]).to_string();
                return (status, body);
            }
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before a response");
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(CUT_WITHIN, read)
        .await
        .expect("a response in time")
}

/// The head of an authenticated webhook delivery of `length` bytes, as Alertmanager sends it.
fn webhook_head(length: usize) -> String {
    format!(
        "POST /api/v1/alerts/alertmanager HTTP/1.1\r\nHost: kubemedic\r\n\
         User-Agent: Alertmanager/0.25.0\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {WEBHOOK_TOKEN}\r\nContent-Length: {length}\r\n\r\n"
    )
}

async fn metric(d: &TestDaemon, line: &str) -> bool {
    let text = d
        .client
        .get(d.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines().any(|l| l == line)
}

/// A client that stalls in its request head, one that sends nothing, and one that idles after
/// its response on a kept-alive connection are all disconnected after about the header
/// timeout (1 s here).
#[tokio::test]
async fn a_client_stalling_in_its_request_head_or_idling_is_disconnected() {
    let d = TestDaemon::start(|a| a.web.http_header_timeout_seconds = Some(1)).await;
    let mut partial = connect(&d).await;
    partial
        .write_all(b"POST /api/v1/alerts/alertmanager HTTP/1.1\r\nHost: kubemedic\r\nAuthoriz")
        .await
        .unwrap();
    let mut silent = connect(&d).await;
    let mut idle = connect(&d).await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: kubemedic\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(&mut idle).await.0, 200);

    for (what, s) in [
        ("partial head", &mut partial),
        ("no head at all", &mut silent),
        ("idle keep-alive", &mut idle),
    ] {
        let sent = read_until_closed(s).await;
        assert!(sent.is_some(), "{what}: still open after {CUT_WITHIN:?}");
    }
    // All three are counted: an idle kept-alive connection is waiting for a head too.
    assert!(metric(&d, "kubemedic_http_timeouts_total{phase=\"header\"} 3").await);
    assert_eq!(d.api("/api/v1/signals").await["total"], 0);
    d.stop().await;
}

/// An authenticated delivery that declares a longer body than it sends gets 408 after the body
/// timeout and is disconnected; nothing is stored.
#[tokio::test]
async fn a_body_shorter_than_declared_gets_408_after_the_body_timeout() {
    let d = TestDaemon::start(|a| a.web.http_body_timeout_seconds = Some(1)).await;
    let body = fixture("alertmanager/captured-from-alertmanager-0.25.json");
    let mut s = connect(&d).await;
    s.write_all(webhook_head(body.len()).as_bytes())
        .await
        .unwrap();
    s.write_all(&body.as_bytes()[..body.len() / 2])
        .await
        .unwrap();

    let sent = read_until_closed(&mut s)
        .await
        .expect("the connection is closed after the body timeout");
    let sent = String::from_utf8_lossy(&sent);
    assert!(sent.starts_with("HTTP/1.1 408 "), "{sent}");
    assert!(sent.contains("within 1 s"), "{sent}");
    assert_eq!(d.api("/api/v1/signals").await["total"], 0);
    assert!(metric(&d, "kubemedic_http_timeouts_total{phase=\"body\"} 1").await);
    assert!(metric(&d, "kubemedic_signals_rejected_total{reason=\"timeout\"} 1").await);
    d.stop().await;
}

/// With the cap at 3, three stalled connections fill it: the fourth is closed unserved and
/// counted. Once the header timeout has cut the stalled ones, a normal request is served.
#[tokio::test]
async fn connections_over_the_cap_are_closed_until_slots_free_up() {
    let d = TestDaemon::start(|a| {
        a.web.http_max_connections = Some(3);
        a.web.http_header_timeout_seconds = Some(2);
    })
    .await;
    let mut stalled = Vec::new();
    for _ in 0..3 {
        let mut s = connect(&d).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        stalled.push(s);
    }
    // Accepted after the three (the listener accepts in order), so it finds the cap full.
    let mut surplus = connect(&d).await;
    // The server may have closed it already; then the write fails, which is the point.
    let _ = surplus
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: kubemedic\r\n\r\n")
        .await;
    let sent = read_until_closed(&mut surplus)
        .await
        .expect("the surplus connection is closed");
    assert!(
        sent.is_empty(),
        "served over the cap: {}",
        String::from_utf8_lossy(&sent)
    );

    for s in &mut stalled {
        assert!(read_until_closed(s).await.is_some(), "stalled one not cut");
    }
    let r = d.client.get(d.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200, "slots are free again");
    assert!(metric(&d, "kubemedic_http_connections_refused_total 1").await);
    d.stop().await;
}

/// A client that sends requests and never reads the answers (a broken scraper, or someone
/// holding connections on purpose) fills the socket buffers; the server's write then makes no
/// progress, and after the write timeout (1 s here) the connection is closed and counted,
/// instead of holding its slot of the connection cap forever. No credentials are needed for
/// that, so the cap alone would not protect ingest.
#[tokio::test]
async fn a_client_that_stops_reading_its_answers_is_disconnected() {
    let d = TestDaemon::start(|a| {
        a.web.http_write_timeout_seconds = Some(1);
        a.web.http_header_timeout_seconds = Some(30);
    })
    .await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let s = socket
        .connect(d.base.trim_start_matches("http://").parse().unwrap())
        .await
        .unwrap();
    let (mut rx, mut tx) = s.into_split();
    // Far more answer than the buffers between the two hold (the OpenAPI document is tens of
    // kilobytes; the kernel's send buffer grows to a few megabytes).
    let writer = tokio::spawn(async move {
        let request = b"GET /api/v1/openapi.json HTTP/1.1\r\nHost: kubemedic\r\n\r\n";
        for _ in 0..2000 {
            if tx.write_all(request).await.is_err() {
                return;
            }
        }
        // Keep the write half open: the client is still there, just not reading.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    let deadline = tokio::time::Instant::now() + CUT_WITHIN * 3;
    while !metric(&d, "kubemedic_http_timeouts_total{phase=\"write\"} 1").await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server still waits to write to a client that does not read"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Once the client reads again, what it gets ends in a close, not in more answers.
    let mut buf = vec![0u8; 1 << 16];
    let closed = tokio::time::timeout(CUT_WITHIN, async {
        loop {
            match rx.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the connection was not closed");
    writer.abort();
    assert_eq!(
        d.client
            .get(d.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    d.stop().await;
}

/// Alertmanager's traffic is untouched by the limits, even short ones: deliveries in a row on
/// one kept-alive connection, with pauses shorter than the idle limit, and a body that trickles
/// in over twice the header timeout but within the body timeout.
#[tokio::test]
async fn alertmanager_traffic_on_a_kept_alive_connection_is_served() {
    let d = TestDaemon::start(|a| {
        a.web.http_header_timeout_seconds = Some(1);
        a.web.http_body_timeout_seconds = Some(10);
    })
    .await;
    let mut s = connect(&d).await;
    for file in [
        "captured-from-alertmanager-0.25.json",
        "kubernaut-pod-crash.json",
        "kubernaut-multiple-alerts.json",
    ] {
        let body = fixture(&format!("alertmanager/{file}"));
        s.write_all(format!("{}{body}", webhook_head(body.len())).as_bytes())
            .await
            .unwrap();
        let (status, answer) = read_response(&mut s).await;
        assert_eq!(status, 200, "{file}: {answer}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // Slow but steady: eight pieces 250 ms apart, 2 s in all.
    let body = fixture("alertmanager/kubernaut-high-memory.json");
    s.write_all(webhook_head(body.len()).as_bytes())
        .await
        .unwrap();
    for piece in body.as_bytes().chunks(body.len().div_ceil(8)) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        s.write_all(piece).await.unwrap();
    }
    let (status, answer) = read_response(&mut s).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(d.api("/api/v1/signals").await["total"], 6);
    d.stop().await;
}

fn sign_in_form(key: &str) -> String {
    format!("key={key}&next=%2Finbox")
}

async fn sign_in(d: &TestDaemon, key: &str) -> reqwest::Response {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(d.url("/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(sign_in_form(key))
        .send()
        .await
        .unwrap()
}

/// Two replicas on one Postgres database count a client's failed sign-ins together: guesses
/// spread over both lock the client out of both, and a sign-in on one clears the count.
#[tokio::test]
async fn failed_sign_ins_on_one_replica_lock_the_client_out_of_the_other() {
    let Some(url) = common::fresh_postgres().await else {
        return;
    };
    let on = |url: String| {
        move |a: &mut kubemedic::config::DaemonArgs| {
            a.store.database_url = Some(kubemedic::secret::Secret::new(url))
        }
    };
    let a = TestDaemon::start(on(url.clone())).await;
    let b = TestDaemon::start(on(url)).await;
    let viewer =
        common::create_key(a.store.as_ref(), kubemedic::domain::Role::Viewer, "vera").await;

    // A sign-in that succeeds clears the count, on either replica.
    for i in 0..4 {
        assert_eq!(sign_in(&a, &format!("km_guess-{i}")).await.status(), 401);
    }
    assert_eq!(sign_in(&b, &viewer).await.status(), 303);
    for i in 0..4 {
        assert_eq!(sign_in(&b, &format!("km_guess-{i}")).await.status(), 401);
    }
    assert_eq!(
        sign_in(&a, &viewer).await.status(),
        303,
        "four failures since the last sign-in: still allowed"
    );

    // Three guesses on one replica and two on the other make five.
    for (d, i) in [(&a, 0), (&b, 1), (&a, 2), (&b, 3), (&a, 4)] {
        assert_eq!(sign_in(d, &format!("km_guess-{i}")).await.status(), 401);
    }
    for d in [&a, &b] {
        let r = sign_in(d, &viewer).await;
        assert_eq!(
            r.status(),
            reqwest::StatusCode::TOO_MANY_REQUESTS,
            "both replicas refuse the client, even with the right key"
        );
        let wait: u64 = r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
    }
    a.stop().await;
    b.stop().await;
}

/// The limiter cannot count failures without the store: a sign-in is refused, not let through.
#[tokio::test]
async fn a_sign_in_is_refused_when_the_store_cannot_count_failures() {
    let (_dir, url) = common::sqlite_url();
    let real = common::open_store(&url, Arc::new(kubemedic::clock::SystemClock)).await;
    let viewer = common::create_key(real.as_ref(), kubemedic::domain::Role::Viewer, "vera").await;
    let broken: Arc<dyn Store> = Arc::new(UnreachableStore(real.clone()));
    let d = TestDaemon::start_with(|_| {}, Components::default(), Some(broken)).await;
    assert_eq!(sign_in(&d, &viewer).await.status(), 503);
    d.stop().await;
}
