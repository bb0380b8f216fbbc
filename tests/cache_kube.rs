//! The watch-backed view of the cluster (src/cluster/cache.rs, docs/adr/0038-watch-cache.md)
//! on the real API server tier: once its watches have listed the cluster it answers the reads
//! investigations make without a request to the API server, the same answers as the API
//! server; a kind it cannot watch is read directly; and its staleness rules hold both ways: an
//! investigation may read a stale cache, a write never decides on one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::kube::Kube;
use kubemedic::cluster::{CachedReader, ClusterReader, ListQuery, WatchCache};
use serde_json::{Value, json};

fn names(objects: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = objects
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    n.sort();
    n
}

/// The requests a client made, but the watches' own (they are the cache's cost, paid once).
fn reads(requests: Vec<String>) -> Vec<String> {
    requests
        .into_iter()
        .filter(|r| !r.contains("watch=true"))
        .collect()
}

fn pod(name: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"containers": [{"name": "app", "image": "shop/app:1.0"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_cache_answers_as_the_api_server_does_without_asking_it() {
    let Some(k) = Kube::new("cache").await else {
        return;
    };
    let mut staged = Vec::new();
    for (name, app) in [("api-1", "api"), ("api-2", "api"), ("web-1", "web")] {
        staged.push(k.apply(pod(name, app)).await);
    }
    k.event(
        &staged[0],
        "Warning",
        "BackOff",
        "Back-off restarting failed container",
        3,
        10,
    )
    .await;
    let cluster = k.cluster().await;
    let cache = WatchCache::start(cluster.clone());
    assert!(
        cache.settled(Duration::from_secs(60)).await,
        "{:?}",
        cache.stats()
    );
    let stats = cache.stats();
    assert_eq!(stats.serving, stats.kinds, "{stats:?}");
    assert!(stats.direct.is_empty(), "{stats:?}");
    let cached = CachedReader::new(cache.clone(), cluster.clone());
    let direct: Arc<dyn ClusterReader> = cluster.clone();
    let pods = cached.resource("Pod").await.unwrap();
    let events = cached.resource("Event").await.unwrap();
    let ns = Some(k.ns.as_str());
    // What the questions of an investigation look like, each asked of both.
    let queries = [
        (pods.clone(), ListQuery::labels("app=api")),
        (pods.clone(), ListQuery::labels("app in (api,web),app!=web")),
        (pods.clone(), ListQuery::fields("metadata.name=web-1")),
        (pods.clone(), ListQuery::default()),
        (
            events.clone(),
            ListQuery::fields("involvedObject.kind=Pod,involvedObject.name=api-1"),
        ),
    ];
    cluster.requests().take();
    let mut answers = Vec::new();
    for (res, q) in &queries {
        answers.push(names(&cached.list(res, ns, q).await.unwrap()));
    }
    let api1 = cached.get(&pods, ns, "api-1").await.unwrap();
    assert_eq!(
        reads(cluster.requests().take()),
        Vec::<String>::new(),
        "a warm cache asks the API server nothing"
    );
    for ((res, q), cached) in queries.iter().zip(&answers) {
        let asked = names(&direct.list(res, ns, q).await.unwrap());
        assert_eq!(cached, &asked, "{q:?}");
        assert!(!asked.is_empty(), "{q:?}");
    }
    // What is kept: who wrote the pod and when, not how; no last-applied configuration.
    assert_eq!(api1["metadata"]["name"], "api-1");
    assert!(
        api1["metadata"]["managedFields"]
            .as_array()
            .is_some_and(|m| !m.is_empty() && m.iter().all(|m| m.get("fieldsV1").is_none())),
        "{api1:#}"
    );
    assert!(
        api1["metadata"]["annotations"]
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_none()
    );
    // An object created a moment ago that the watch may not have brought yet: the API server
    // answers, not a "not found" from the cache.
    k.apply(pod("api-3", "api")).await;
    assert_eq!(
        cached.get(&pods, ns, "api-3").await.unwrap()["metadata"]["name"],
        "api-3"
    );
    // A Secret is never read, from the cache or otherwise.
    assert!(cached.resource("Secret").await.is_err());
}

/// A kind kubemedic may not watch (its ClusterRole lacks `watch` on it) is read from the API
/// server: the cache says so on `/readyz`'s terms, and the reads still answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_that_cannot_be_watched_is_read_from_the_api_server() {
    let Some(k) = Kube::new("cachedeny").await else {
        return;
    };
    k.apply(pod("api-1", "api")).await;
    let rules = common::kube::chart_rules(&["reader"]);
    // The chart's reader rules without `watch` on pods.
    let rules: Vec<Value> = rules
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            let resources = r["resources"].as_array().cloned().unwrap_or_default();
            let (pods, rest): (Vec<Value>, Vec<Value>) =
                resources.into_iter().partition(|x| x == "pods");
            let mut out = vec![];
            if !rest.is_empty() {
                let mut r2 = r.clone();
                r2["resources"] = json!(rest);
                out.push(r2);
            }
            if !pods.is_empty() {
                let mut r2 = r.clone();
                r2["resources"] = json!(pods);
                r2["verbs"] = json!(["get", "list"]);
                out.push(r2);
            }
            out
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = k.service_account("nowatch", json!(rules), dir.path()).await;
    let cluster = k.cluster_as(&kubeconfig, Default::default()).await;
    let cache = WatchCache::start(cluster.clone());
    // Its list is allowed; the watch that follows is refused.
    k.wait("the cache to give up watching pods", 60, || async {
        let stats = cache.stats();
        (stats.settled && stats.direct.iter().any(|d| d.starts_with("Pod ("))).then_some(())
    })
    .await;
    // And it stays given up: the lists it retries still succeed, the watch does not.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = cache.stats();
    assert!(
        stats.direct.iter().any(|d| d.starts_with("Pod (")),
        "{stats:?}"
    );
    assert!(stats.serving + 1 == stats.kinds, "{stats:?}");
    let cached = CachedReader::new(cache.clone(), cluster.clone());
    let pods = cached.resource("Pod").await.unwrap();
    cluster.requests().take();
    let found = cached
        .list(&pods, Some(&k.ns), &ListQuery::labels("app=api"))
        .await
        .unwrap();
    assert_eq!(names(&found), ["api-1"]);
    assert_eq!(reads(cluster.requests().take()).len(), 1, "read directly");
    k.drop_role(&format!("nowatch-{}", k.ns)).await;
}

/// Both ways of the staleness rules, through the daemon as `serve` assembles it: with the
/// cache's Deployments held at their state before the target was opted out
/// (`kubemedic.io/remediate: "false"`, written after), the enrichment and the investigation
/// read the stale cache and propose the rollback — a stale read is allowed there — and the
/// execution, which reads the API server before its first write, sees the opt-out and writes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_investigation_may_read_a_stale_cache_but_a_write_reads_the_api_server() {
    let Some(staging) = Kube::new("cachestale").await else {
        return;
    };
    let staged = common::scenarios::bad_rollouts(&[&staging]).await.remove(0);
    let kubeconfig = staging.kubeconfig.clone();
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let d = common::TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some(kubeconfig.clone());
        a.gate.policy_dir = Some(policies.clone());
        a.execute.cooldown_seconds = Some(0);
    })
    .await;
    let cache = d.cache.clone().expect("serve watches the cluster");
    assert!(
        cache.settled(Duration::from_secs(60)).await,
        "{:?}",
        cache.stats()
    );
    let before = staging.get("apps/v1", "Deployment", "checkout").await;
    let revision = before["metadata"]["annotations"]["deployment.kubernetes.io/revision"].clone();
    // The cache has the Deployment as staged; from now on it keeps it so.
    staging
        .wait("the cache to hold the Deployment", 30, || async {
            cache
                .peek("Deployment", Some(&staging.ns), "checkout")
                .filter(|c| {
                    c["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == revision
                })
                .map(|_| ())
        })
        .await;
    cache.hold("Deployment", true);
    staging
        .patch(
            "apps/v1",
            "Deployment",
            "checkout",
            json!({"metadata": {"annotations": {"kubemedic.io/remediate": "false"}}}),
        )
        .await;

    let v: Value = d
        .send_alertmanager(&staged.alert.to_string())
        .await
        .json()
        .await
        .unwrap();
    let id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let done = staging
        .wait("the request to end", 120, || async {
            let r = d.api(&format!("/api/v1/requests/{id}")).await;
            r["phase"]
                .as_str()
                .and_then(kubemedic::domain::Phase::parse)
                .is_some_and(kubemedic::domain::Phase::is_terminal)
                .then_some(r)
        })
        .await;
    // The stale side: the rollback was chosen and approved on the cache's word.
    assert_eq!(
        done["state"]["selection"]["selected"]["workflow_id"],
        "rollback-deployment-previous-revision",
        "{done:#}"
    );
    // The fresh side: the execution saw the opt-out and wrote nothing.
    let text = done.to_string();
    assert!(text.contains("kubemedic.io/remediate"), "{done:#}");
    assert_ne!(
        done["state"]["execution"]["outcome"], "succeeded",
        "{done:#}"
    );
    let after = staging.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        after["metadata"]["annotations"]["deployment.kubernetes.io/revision"], revision,
        "not rolled back"
    );
    assert_eq!(after["spec"]["template"], before["spec"]["template"]);
    cache.hold("Deployment", false);
    // What the investigation read came from the cache, and /metrics says so.
    let metrics = staging
        .wait("the cache's figures on /metrics", 30, || async {
            let text = d
                .client
                .get(d.url("/metrics"))
                .send()
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            let cached = text
                .lines()
                .find(|l| l.starts_with("kubemedic_cluster_cache_reads{from=\"cache\"}"))?
                .rsplit(' ')
                .next()?
                .parse::<u64>()
                .ok()?;
            (cached > 0).then_some(text)
        })
        .await;
    let serving = format!(
        "kubemedic_cluster_cache_kinds{{state=\"serving\"}} {}",
        kubemedic::cluster::cache::CACHED_KINDS.len()
    );
    assert!(metrics.contains(&serving), "{metrics}");
    d.stop().await;
}
