//! The cluster view against a real kube-apiserver + controller-manager (Kubernetes 1.20, built
//! by scripts/kube-tier): every tool, owner chains of every workload kind, the spec hash, every
//! detected label, least privilege, writes, the sanitiser, snapshots and API request counts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::kube::{Kube, LogStore, fake_kubelet, status};
use kubemedic::actions::writes;
use kubemedic::clock::{Clock, ManualClock, SystemClock};
use kubemedic::cluster::tools::{ClusterTools, ToolLimits, ToolResult};
use kubemedic::cluster::{
    ClusterReader, ClusterWriter, ErrorKind, ListQuery, PatchType, ReadPolicy, SnapshotCluster,
    context::ContextResolver, jobs, snapshot,
};
use serde_json::{Value, json};

fn clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

fn tools(reader: Arc<dyn ClusterReader>) -> ClusterTools {
    ClusterTools::new(reader, clock(), ToolLimits::default())
}

async fn call(t: &ClusterTools, name: &str, args: Value) -> ToolResult {
    t.call(name, &args).await
}

fn deployment(name: &str, image: &str, replicas: i64, extra_template: Value) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": image,
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}}]}
            }
        }
    });
    if let Value::Object(extra) = extra_template {
        for (k, v) in extra {
            d["spec"]["template"]["metadata"][k] = v;
        }
    }
    d
}

/// A deployment with one crash-looping pod and one healthy pod on a node with a kubelet that
/// serves their logs.
struct Incident {
    k: Kube,
    node: String,
    crashing: Value,
    healthy: Value,
    logs: LogStore,
}

async fn incident(prefix: &str) -> Option<Incident> {
    let k = Kube::new(prefix).await?;
    let logs: LogStore = Arc::new(Mutex::new(HashMap::new()));
    let port = fake_kubelet(logs.clone()).await;
    let node = format!("node-{}", k.ns);
    k.node(&node, port, json!([])).await;
    k.apply(deployment("checkout", "shop/checkout:1.4.2", 2, json!({})))
        .await;
    let pods = k.pods("app=checkout", 2).await;
    for p in &pods {
        k.bind(p["metadata"]["name"].as_str().unwrap(), &node).await;
    }
    let crash_name = pods[0]["metadata"]["name"].as_str().unwrap().to_owned();
    let ok_name = pods[1]["metadata"]["name"].as_str().unwrap().to_owned();
    let crashing = k
        .patch_status(
            "v1",
            "Pod",
            &crash_name,
            status::crash_loop("checkout", "shop/checkout:1.4.2", 7, 1, "Error"),
        )
        .await;
    let healthy = k
        .patch_status(
            "v1",
            "Pod",
            &ok_name,
            status::running("checkout", "shop/checkout:1.4.2"),
        )
        .await;
    k.event(
        &crashing,
        "Normal",
        "Pulled",
        "Container image \"shop/checkout:1.4.2\" already present on machine",
        8,
        300,
    )
    .await;
    k.event(
        &crashing,
        "Warning",
        "BackOff",
        "Back-off restarting failed container",
        12,
        20,
    )
    .await;
    // The controllers settle the Deployment's status after the pods change; what the tests
    // compare (live reads against a snapshot of them) must not race that.
    k.wait("the Deployment to count its ready pod", 30, || async {
        let d = k.get("apps/v1", "Deployment", "checkout").await;
        (d["status"]["readyReplicas"].as_i64() == Some(1)
            && d["status"]["unavailableReplicas"].as_i64() == Some(1))
        .then_some(())
    })
    .await;
    logs.lock().unwrap().insert(
        (k.ns.clone(), crash_name.clone(), "checkout".into(), false),
        "starting checkout 1.4.2\nconnecting to db\n".into(),
    );
    logs.lock().unwrap().insert(
        (k.ns.clone(), crash_name.clone(), "checkout".into(), true),
        "starting checkout 1.4.2\nconnecting to db\npanic: config key payment.url missing\n".into(),
    );
    Some(Incident {
        k,
        node,
        crashing,
        healthy,
        logs,
    })
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_follows_what_an_old_server_serves() {
    let Some(k) = Kube::new("disc").await else {
        return;
    };
    let c = k.cluster().await;
    assert_eq!(c.server_version().await.unwrap(), "1.20");
    let pdb = c.resource("pdb").await.unwrap();
    assert_eq!(pdb.api_version(), "policy/v1beta1");
    let hpa = c.resource("HorizontalPodAutoscaler").await.unwrap();
    assert_eq!(hpa.api_version(), "autoscaling/v2beta2");
    assert_eq!(
        c.resource("cronjobs").await.unwrap().api_version(),
        "batch/v1beta1"
    );
    assert_eq!(c.resource("deploy").await.unwrap().api_version(), "apps/v1");
    assert!(!c.resource("Node").await.unwrap().namespaced);
    assert_eq!(
        c.resource("Widget").await.unwrap_err().kind,
        ErrorKind::NotServed
    );
    assert_eq!(
        c.resource("secrets").await.unwrap_err().kind,
        ErrorKind::Blocked
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_tool_on_a_crash_looping_deployment() {
    let Some(i) = incident("tools").await else {
        return;
    };
    let ns = i.k.ns.clone();
    let t = tools(i.k.cluster().await);
    let crash = name(&i.crashing).to_owned();

    let get = call(&t, "kubectl_get", json!({"kind": "pods", "namespace": ns})).await;
    assert!(get.ok, "{}", get.text);
    assert!(
        get.text.contains("CrashLoopBackOff") && get.text.contains("Running"),
        "{}",
        get.text
    );
    assert_eq!(get.data["items"].as_array().unwrap().len(), 2);
    let row = get.text.lines().find(|l| l.starts_with(&crash)).unwrap();
    assert!(row.contains("0/1") && row.contains(" 7 "), "{row}");

    let d = call(
        &t,
        "kubectl_describe",
        json!({"kind": "Pod", "name": crash, "namespace": ns}),
    )
    .await;
    assert!(d.ok, "{}", d.text);
    for needle in [
        "Waiting (CrashLoopBackOff)",
        "Terminated (Error), exit code 1",
        "Restarts:    7",
        "Limits:      memory=256Mi",
        "Controlled By: ReplicaSet/checkout-",
        "BackOff (x12): Back-off restarting failed container",
        &format!("Node:          {}", i.node),
    ] {
        assert!(d.text.contains(needle), "missing {needle:?} in\n{}", d.text);
    }
    // Newest event last.
    assert!(d.text.find("Pulled").unwrap() < d.text.find("BackOff (x12)").unwrap());
    assert_eq!(d.data["events"].as_array().unwrap().len(), 2);

    let y = call(
        &t,
        "kubectl_get_yaml",
        json!({"kind": "pod", "name": crash, "namespace": ns}),
    )
    .await;
    assert!(
        y.ok && !y.text.contains("managedFields") && y.text.contains("shop/checkout:1.4.2"),
        "{}",
        y.text
    );
    let parsed: Value = serde_saphyr::from_str(&y.text).unwrap();
    assert_eq!(parsed["metadata"]["name"], crash.as_str());

    let found = call(
        &t,
        "kubectl_find_resource",
        json!({"kind": "Pod", "namespace": ns, "label_selector": "app=checkout"}),
    )
    .await;
    assert_eq!(found.data["total"], 2);
    let by_name = call(
        &t,
        "kubectl_find_resource",
        json!({"kind": "Pod", "namespace": ns, "name_pattern": "^CHECKOUT-"}),
    )
    .await;
    assert_eq!(by_name.data["total"], 2, "case-insensitive name pattern");
    let none = call(
        &t,
        "kubectl_find_resource",
        json!({"kind": "Pod", "namespace": ns, "name_pattern": "payments"}),
    )
    .await;
    assert!(
        none.ok && none.text.starts_with("No pods found"),
        "{}",
        none.text
    );

    let count = call(
        &t,
        "kubectl_count",
        json!({"kind": "pods", "namespace": ns, "label_selector": "app=checkout"}),
    )
    .await;
    assert_eq!(count.data["count"], 2);
    assert_eq!(count.data["by_status"]["CrashLoopBackOff"], 1);
    assert_eq!(count.data["by_status"]["Running"], 1);
    assert!(
        count.text.starts_with("2 pods in namespace"),
        "{}",
        count.text
    );

    let ev = call(
        &t,
        "kubectl_events",
        json!({"kind": "Pod", "name": crash, "namespace": ns}),
    )
    .await;
    assert!(ev.ok && ev.text.contains("BackOff"), "{}", ev.text);
    let ns_events = call(&t, "kubectl_events", json!({"namespace": ns})).await;
    assert!(ns_events.data["total"].as_u64().unwrap() >= 2);
    let node_obj = i.k.get("v1", "Node", &i.node).await;
    i.k.event(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": i.node, "namespace": "default", "uid": node_obj["metadata"]["uid"]}}),
        "Warning", "NodeHasDiskPressure", "Node has disk pressure", 1, 5).await;
    let node_events = call(&t, "kubectl_events", json!({"node": i.node})).await;
    assert!(
        node_events.text.contains("NodeHasDiskPressure"),
        "{}",
        node_events.text
    );

    let logs = call(
        &t,
        "kubectl_logs",
        json!({"name": crash, "namespace": ns, "container": "checkout", "tail_lines": 1}),
    )
    .await;
    assert!(logs.ok, "{}", logs.text);
    assert_eq!(logs.text.trim(), "connecting to db");
    // since_seconds reaches the kubelet through the API server's log proxy.
    let healthy = name(&i.healthy).to_owned();
    let now = chrono::Utc::now();
    i.logs.lock().unwrap().insert(
        (ns.clone(), healthy.clone(), "checkout".into(), false),
        format!(
            "{} served 120 requests\n{} served 80 requests\n",
            (now - chrono::Duration::hours(1)).to_rfc3339(),
            (now - chrono::Duration::seconds(30)).to_rfc3339()
        ),
    );
    let recent = call(
        &t,
        "kubectl_logs",
        json!({"name": healthy, "namespace": ns, "container": "checkout", "since_seconds": 600}),
    )
    .await;
    assert!(
        recent.ok && recent.text.contains("served 80") && !recent.text.contains("served 120"),
        "{}",
        recent.text
    );
    let prev = call(
        &t,
        "kubectl_previous_logs",
        json!({"name": crash, "namespace": ns, "container": "checkout"}),
    )
    .await;
    assert!(
        prev.text.contains("panic: config key payment.url missing"),
        "{}",
        prev.text
    );
    assert_eq!(prev.data["previous"], true);

    let top = call(&t, "kubectl_top_pods", json!({"namespace": ns})).await;
    assert!(
        top.ok && top.text.starts_with("metrics API not available"),
        "{}",
        top.text
    );
    assert_eq!(top.data["available"], false);

    // Errors are results the model can reason about, with a hint.
    let gone = call(
        &t,
        "kubectl_describe",
        json!({"kind": "Pod", "name": "checkout-gone", "namespace": ns}),
    )
    .await;
    assert!(!gone.ok);
    assert!(
        gone.text.contains("NotFound") && gone.text.contains("rescheduled"),
        "{}",
        gone.text
    );
    let widget = call(
        &t,
        "kubectl_get",
        json!({"kind": "Widget", "namespace": ns}),
    )
    .await;
    assert!(
        !widget.ok && widget.text.contains("not served"),
        "{}",
        widget.text
    );
    let missing_arg = call(&t, "kubectl_logs", json!({"namespace": ns})).await;
    assert!(
        !missing_arg.ok && missing_arg.text.contains("missing argument `name`"),
        "{}",
        missing_arg.text
    );
    let secret = call(
        &t,
        "kubectl_get",
        json!({"kind": "secrets", "namespace": ns}),
    )
    .await;
    assert!(
        !secret.ok && secret.text.contains("blocked"),
        "{}",
        secret.text
    );
    let _ = &i.healthy;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_capped_warnings_first_newest_last() {
    let Some(k) = Kube::new("events").await else {
        return;
    };
    let cm = k.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "noisy"}, "data": {}})).await;
    for n in 0..8 {
        k.event(
            &cm,
            "Warning",
            &format!("Old{n}"),
            "old warning",
            1,
            1000 - n,
        )
        .await;
    }
    for n in 0..30 {
        k.event(&cm, "Normal", &format!("New{n}"), "recent info", 1, 100 - n)
            .await;
    }
    let t = ClusterTools::new(
        k.cluster().await,
        clock(),
        ToolLimits {
            max_events: 20,
            ..Default::default()
        },
    );
    let r = call(&t, "kubectl_events", json!({"namespace": k.ns})).await;
    let events = r.data["events"].as_array().unwrap();
    assert_eq!(events.len(), 20);
    assert_eq!(r.data["total"], 38);
    assert_eq!(
        events.iter().filter(|e| e["type"] == "Warning").count(),
        8,
        "every Warning kept"
    );
    let times: Vec<&str> = events
        .iter()
        .map(|e| e["lastTimestamp"].as_str().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "newest last: {times:?}"
    );
    assert!(
        r.text.contains("New29") && !r.text.contains("New0:"),
        "newest Normal events kept: {}",
        r.text
    );
}

async fn root_of(
    c: Arc<dyn ClusterReader>,
    kind: &str,
    name: &str,
    ns: Option<&str>,
) -> (Vec<String>, kubemedic::domain::Target) {
    let resolver = ContextResolver::new(c);
    let ctx = resolver.resolve(kind, name, ns).await.unwrap();
    (
        ctx.owner_chain.iter().map(|l| l.kind.clone()).collect(),
        ctx.root_owner.clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_chains_of_every_workload_kind() {
    let Some(k) = Kube::new("owners").await else {
        return;
    };
    let ns = Some(k.ns.as_str());
    let c: Arc<dyn ClusterReader> = k.cluster().await;
    let port = fake_kubelet(Arc::new(Mutex::new(HashMap::new()))).await;
    k.node(&format!("node-{}", k.ns), port, json!([])).await;

    k.apply(deployment("web", "nginx:1.25", 1, json!({}))).await;
    let pod = k.pods("app=web", 1).await.remove(0);
    let (chain, root) = root_of(c.clone(), "Pod", name(&pod), ns).await;
    assert_eq!(chain, ["Pod", "ReplicaSet", "Deployment"]);
    assert_eq!(root.to_string(), format!("{}/Deployment/web", k.ns));

    let template = |app: &str| json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": app, "image": "busybox"}]}});
    k.apply(json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "replicas": 1, "selector": {"matchLabels": {"app": "db"}}, "template": template("db")}})).await;
    let pod = k.pods("app=db", 1).await.remove(0);
    assert_eq!(
        root_of(c.clone(), "Pod", name(&pod), ns).await.0,
        ["Pod", "StatefulSet"]
    );

    // Pinned to this test's node: other tests' nodes share the cluster.
    let mut agent = template("agent");
    agent["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": format!("node-{}", k.ns)});
    k.apply(
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": agent}}),
    )
    .await;
    let pods = k.pods("app=agent", 1).await;
    assert_eq!(
        root_of(c.clone(), "Pod", name(&pods[0]), ns).await.0,
        ["Pod", "DaemonSet"]
    );

    let mut job_template = template("once");
    job_template["spec"]["restartPolicy"] = json!("Never");
    k.apply(
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
        "spec": {"template": job_template}}),
    )
    .await;
    let pod = k.pods("job-name=once", 1).await.remove(0);
    assert_eq!(
        root_of(c.clone(), "Pod", name(&pod), ns).await.0,
        ["Pod", "Job"]
    );

    // A CronJob's Job, owned as the CronJob controller owns it.
    let cron = k.apply(json!({"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": job_template.clone()}}}})).await;
    let mut nightly_template = job_template.clone();
    nightly_template["metadata"]["labels"]["app"] = json!("nightly");
    k.apply(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "nightly-29061", "ownerReferences": [{"apiVersion": "batch/v1beta1", "kind": "CronJob",
            "name": "nightly", "uid": cron["metadata"]["uid"], "controller": true}]},
        "spec": {"template": nightly_template}})).await;
    let pod = k.pods("job-name=nightly-29061", 1).await.remove(0);
    let (chain, root) = root_of(c.clone(), "Pod", name(&pod), ns).await;
    assert_eq!(chain, ["Pod", "Job", "CronJob"]);
    assert_eq!(root.name, "nightly");

    let bare = k
        .apply(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
        "spec": {"containers": [{"name": "b", "image": "busybox"}]}}),
        )
        .await;
    assert_eq!(root_of(c.clone(), "Pod", name(&bare), ns).await.0, ["Pod"]);

    // Cluster-scoped: the namespace is cleared.
    let node = format!("node-{}", k.ns);
    let (chain, root) = root_of(c.clone(), "Node", &node, Some("ignored")).await;
    assert_eq!(chain, ["Node"]);
    assert_eq!(root.namespace, None);
    let t = tools(c);
    let ctx = call(
        &t,
        "get_cluster_resource_context",
        json!({"kind": "Node", "name": node}),
    )
    .await;
    assert!(ctx.ok, "{}", ctx.text);
    assert!(ctx.data["root_owner"].get("namespace").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_hash_is_stable_changes_on_a_rollout_and_returns_on_undo() {
    let Some(k) = Kube::new("hash").await else {
        return;
    };
    let c = k.cluster().await;
    k.apply(deployment("api", "shop/api:1.0", 1, json!({})))
        .await;
    let pod = k.pods("app=api", 1).await.remove(0);
    let hash = |c: Arc<kubemedic::cluster::KubeCluster>, pod: String| {
        let ns = k.ns.clone();
        async move {
            ContextResolver::new(c)
                .resolve("Pod", &pod, Some(&ns))
                .await
                .unwrap()
                .spec_hash
                .clone()
                .unwrap()
        }
    };
    let first = hash(c.clone(), name(&pod).to_owned()).await;
    assert_eq!(
        first,
        hash(c.clone(), name(&pod).to_owned()).await,
        "same spec, same hash"
    );
    k.patch_status(
        "apps/v1",
        "Deployment",
        "api",
        json!({"observedGeneration": 7}),
    )
    .await;
    assert_eq!(
        first,
        hash(c.clone(), name(&pod).to_owned()).await,
        "status changes do not count"
    );

    // A real rollout: a new image makes a new ReplicaSet.
    k.patch("apps/v1", "Deployment", "api", json!({"spec": {"template": {"spec": {"containers": [{"name": "api", "image": "shop/api:1.1"}]}}}})).await;
    k.wait("second revision", 30, || async {
        let d = k.get("apps/v1", "Deployment", "api").await;
        (d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2").then_some(())
    })
    .await;
    let second = hash(c.clone(), name(&pod).to_owned()).await;
    assert_ne!(first, second, "a rollout changes the hash");

    // Undo puts the old template back: the hash is the old one again (what regression
    // detection relies on).
    let undone = writes::rollout_undo(c.as_ref(), c.as_ref(), &k.ns, "api", None, false)
        .await
        .unwrap();
    assert_eq!(undone.detail["toRevision"], 1);
    let d = k.get("apps/v1", "Deployment", "api").await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "shop/api:1.0"
    );
    assert_eq!(first, hash(c.clone(), name(&pod).to_owned()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_detected_label() {
    let Some(k) = Kube::new("labels").await else {
        return;
    };
    let c: Arc<dyn ClusterReader> = k.cluster().await;
    let web = deployment(
        "web",
        "nginx",
        2,
        json!({"annotations": {"sidecar.istio.io/inject": "true"}}),
    );
    let mut web = web;
    web["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
    web["metadata"]["annotations"] = json!({"meta.helm.sh/release-name": "web", "argocd.argoproj.io/tracking-id": "web:apps/Deployment:shop/web"});
    k.apply(web).await;
    let mut api = deployment(
        "api",
        "shop/api",
        1,
        json!({"annotations": {"linkerd.io/inject": "enabled"}}),
    );
    api["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] = json!("apps");
    k.apply(api).await;
    k.apply(deployment("plain", "busybox", 1, json!({}))).await;
    k.apply(json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "replicas": 1, "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}})).await;
    k.apply(json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})).await;
    k.apply(json!({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 2, "maxReplicas": 6,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]}})).await;

    // Before policies and quotas exist: nothing of the namespace-level labels.
    let plain_before = ContextResolver::new(c.clone())
        .resolve("Deployment", "plain", Some(&k.ns))
        .await
        .unwrap();
    let l = &plain_before.detected_labels;
    assert!(
        !l.network_isolated
            && !l.resource_quota_constrained
            && !l.pdb_protected
            && !l.hpa_enabled
            && !l.git_ops_managed
            && !l.helm_managed
            && !l.service_mesh
            && !l.stateful
    );
    assert!(l.failed_detections.is_empty());

    k.apply(json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "deny-all"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}})).await;
    k.apply(
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute"},
        "spec": {"hard": {"pods": "20", "requests.cpu": "4", "requests.memory": "8Gi"}}}),
    )
    .await;
    k.wait("quota usage", 30, || async {
        let q = k.get("v1", "ResourceQuota", "compute").await;
        q["status"]["used"]["pods"].as_str().map(|_| ())
    })
    .await;

    let resolver = ContextResolver::new(c.clone());
    let web = resolver
        .resolve("Deployment", "web", Some(&k.ns))
        .await
        .unwrap();
    let l = &web.detected_labels;
    assert!(l.helm_managed, "{l:?}");
    assert!(
        l.git_ops_managed && l.git_ops_tool.as_deref() == Some("argocd"),
        "{l:?}"
    );
    assert!(
        l.pdb_protected && l.hpa_enabled && l.network_isolated,
        "{l:?}"
    );
    assert!(
        l.service_mesh && l.service_mesh_type.as_deref() == Some("istio"),
        "{l:?}"
    );
    assert!(l.resource_quota_constrained);
    assert_eq!(l.quota_details["pods"].hard, "20");
    assert_eq!(l.quota_details["requests.cpu"].hard, "4");
    assert!(!l.quota_details["pods"].used.is_empty());
    assert!(!l.stateful);

    let api = resolver
        .resolve("Deployment", "api", Some(&k.ns))
        .await
        .unwrap();
    let l = &api.detected_labels;
    assert!(
        l.git_ops_managed && l.git_ops_tool.as_deref() == Some("flux"),
        "{l:?}"
    );
    assert!(l.service_mesh && l.service_mesh_type.as_deref() == Some("linkerd"));
    assert!(!l.pdb_protected && !l.hpa_enabled && !l.helm_managed);

    let db = resolver
        .resolve("StatefulSet", "db", Some(&k.ns))
        .await
        .unwrap();
    assert!(db.detected_labels.stateful);

    // The JSON keys are the contract's spelling.
    let v = serde_json::to_value(&web.detected_labels).unwrap();
    for key in [
        "gitOpsManaged",
        "gitOpsTool",
        "helmManaged",
        "pdbProtected",
        "hpaEnabled",
        "stateful",
        "networkIsolated",
        "serviceMesh",
        "resourceQuotaConstrained",
        "quota_details",
        "failedDetections",
    ] {
        assert!(v.get(key).is_some(), "{key} in {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_context_costs_one_get_per_hop_and_one_list_per_family() {
    let Some(k) = Kube::new("count").await else {
        return;
    };
    k.apply(deployment("web", "nginx", 2, json!({}))).await;
    let pods = k.pods("app=web", 2).await;
    let cluster = k.cluster().await;
    // Warm discovery (per process, not per investigation).
    cluster.resource("Pod").await.unwrap();
    for kind in [
        "ReplicaSet",
        "Deployment",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
        "ResourceQuota",
        "Namespace",
    ] {
        cluster.resource(kind).await.unwrap();
    }
    cluster.requests().take();
    let resolver = ContextResolver::new(cluster.clone());
    resolver
        .resolve("Pod", name(&pods[0]), Some(&k.ns))
        .await
        .unwrap();
    let first = cluster.requests().take();
    let families = [
        "/poddisruptionbudgets",
        "/horizontalpodautoscalers",
        "/networkpolicies",
        "/resourcequotas",
    ];
    let lists: Vec<&String> = first
        .iter()
        .filter(|r| families.iter().any(|f| r.ends_with(f)))
        .collect();
    let gets: Vec<&String> = first
        .iter()
        .filter(|r| r.starts_with("GET ") && !lists.contains(r))
        .collect();
    println!(
        "resource context Pod -> ReplicaSet -> Deployment: {} requests: {first:#?}",
        first.len()
    );
    assert_eq!(first.len(), 8, "{first:#?}");
    assert_eq!(gets.len(), 4, "3 owner hops + the namespace: {first:#?}");
    assert_eq!(
        lists.len(),
        4,
        "PDB, HPA, NetworkPolicy, ResourceQuota: {first:#?}"
    );
    let unique: std::collections::HashSet<&String> = first.iter().collect();
    assert_eq!(unique.len(), first.len(), "nothing repeated");

    // The same target again, and a sibling pod, in the same investigation.
    resolver
        .resolve("Pod", name(&pods[0]), Some(&k.ns))
        .await
        .unwrap();
    assert!(cluster.requests().take().is_empty(), "cached");
    resolver
        .resolve("Pod", name(&pods[1]), Some(&k.ns))
        .await
        .unwrap();
    let sibling = cluster.requests().take();
    assert_eq!(
        sibling.len(),
        1,
        "only the new pod is fetched: {sibling:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_privilege_reader_role_from_the_chart() {
    let Some(k) = Kube::new("rbac").await else {
        return;
    };
    let Some(reader_cfg) = common::kube::kubeconfig("KUBEMEDIC_TEST_READER_KUBECONFIG") else {
        return;
    };
    let Some(nobody_cfg) = common::kube::kubeconfig("KUBEMEDIC_TEST_NOBODY_KUBECONFIG") else {
        return;
    };
    let rules_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/charts/kubemedic/rbac/reader-rules.yaml"
    );
    let rules: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(rules_path).unwrap()).unwrap();
    let role = format!("kubemedic-reader-{}", k.ns);
    k.apply(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role}, "rules": rules})).await;
    k.apply(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "kubemedic-reader"}]})).await;
    k.apply(deployment("web", "nginx", 1, json!({}))).await;
    let pod = k.pods("app=web", 1).await.remove(0);
    k.apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"password": "hunter2"}})).await;

    let reader = k.cluster_as(&reader_cfg, ReadPolicy::default()).await;
    let t = tools(reader.clone());
    let d = call(
        &t,
        "kubectl_describe",
        json!({"kind": "Pod", "name": name(&pod), "namespace": k.ns}),
    )
    .await;
    assert!(d.ok, "the chart's role can investigate: {}", d.text);
    let ctx = call(
        &t,
        "get_namespaced_resource_context",
        json!({"kind": "Pod", "name": name(&pod), "namespace": k.ns}),
    )
    .await;
    assert!(ctx.ok, "{}", ctx.text);
    assert_eq!(
        ctx.data["detected_labels"]["failedDetections"],
        json!([]),
        "{}",
        ctx.text
    );
    // kubemedic refuses Secrets itself…
    assert_eq!(
        reader.resource("secrets").await.unwrap_err().kind,
        ErrorKind::Blocked
    );
    // …and the role forbids them even when that guard is switched off.
    let unguarded = k
        .cluster_as(
            &reader_cfg,
            ReadPolicy {
                blocked_resources: vec![],
                blocked_namespaces: vec![],
            },
        )
        .await;
    let secrets = unguarded.resource("secrets").await.unwrap();
    let err = unguarded
        .list(&secrets, Some(&k.ns), &ListQuery::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Forbidden, "{err}");
    let err = unguarded
        .get(&secrets, Some(&k.ns), "db")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Forbidden);
    // As a tool result: what happened and what to do about it, in one line each.
    let r = call(
        &tools(unguarded.clone()),
        "kubectl_get",
        json!({"kind": "secrets", "namespace": k.ns}),
    )
    .await;
    assert!(!r.ok);
    assert!(
        r.text.starts_with("Error (Forbidden):")
            && r.text.contains("may not read this; do not retry it"),
        "{}",
        r.text
    );

    // A role without NetworkPolicy access: that detection fails, the rest works.
    let partial = format!("kubemedic-partial-{}", k.ns);
    let mut reduced = rules.clone();
    for rule in reduced.as_array_mut().unwrap() {
        if rule["apiGroups"] == json!(["networking.k8s.io"]) {
            rule["resources"] = json!(["ingresses"]);
        }
    }
    k.apply(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": partial}, "rules": reduced})).await;
    k.apply(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "partial"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": partial},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "nobody"}]})).await;
    let limited = k.cluster_as(&nobody_cfg, ReadPolicy::default()).await;
    let ctx = k
        .wait("RBAC to apply", 20, || async {
            ContextResolver::new(limited.clone())
                .resolve("Deployment", "web", Some(&k.ns))
                .await
                .ok()
        })
        .await;
    assert_eq!(ctx.detected_labels.failed_detections, ["networkIsolated"]);
    assert_eq!(ctx.root_owner.name, "web");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_on_the_real_api_server() {
    let Some(k) = Kube::new("writes").await else {
        return;
    };
    let c = k.cluster().await;
    let port = fake_kubelet(Arc::new(Mutex::new(HashMap::new()))).await;
    let node = format!("node-{}", k.ns);
    k.node(
        &node,
        port,
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    )
    .await;
    k.apply(deployment("web", "web:1", 2, json!({}))).await;
    let deploy = c.resource("Deployment").await.unwrap();

    // Dry run changes nothing; a real merge patch does, under field manager kubemedic.
    c.patch(
        &deploy,
        Some(&k.ns),
        "web",
        PatchType::Merge,
        &json!({"metadata": {"labels": {"tier": "front"}}}),
        true,
    )
    .await
    .unwrap();
    assert!(
        k.get("apps/v1", "Deployment", "web").await["metadata"]["labels"]
            .get("tier")
            .is_none()
    );
    c.patch(
        &deploy,
        Some(&k.ns),
        "web",
        PatchType::Merge,
        &json!({"metadata": {"labels": {"tier": "front"}}}),
        false,
    )
    .await
    .unwrap();
    let d = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(d["metadata"]["labels"]["tier"], "front");
    let managers: Vec<&str> = d["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kubemedic"), "{managers:?}");
    c.patch(&deploy, Some(&k.ns), "web", PatchType::Strategic, &json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "resources": {"limits": {"memory": "512Mi"}}}]}}}}), false).await.unwrap();
    let d = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"],
        "512Mi"
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"], "web:1",
        "strategic merge keeps the rest"
    );
    c.patch(&deploy, Some(&k.ns), "web", PatchType::Apply, &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "annotations": {"kubemedic.io/note": "applied"}}}), false).await.unwrap();
    assert_eq!(
        k.get("apps/v1", "Deployment", "web").await["metadata"]["annotations"]["kubemedic.io/note"],
        "applied"
    );

    // Rollout restart stamps the template; the controller makes a new ReplicaSet.
    let restarted = writes::rollout_restart(
        c.as_ref(),
        c.as_ref(),
        "Deployment",
        &k.ns,
        "web",
        chrono::Utc::now(),
        false,
    )
    .await
    .unwrap();
    let d = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(
        d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"],
        restarted.detail["restartedAt"]
    );
    k.wait("a new ReplicaSet", 30, || async {
        let rs = k
            .api("apps/v1", "ReplicaSet")
            .list(&Default::default())
            .await
            .ok()?;
        (rs.items.len() >= 2).then_some(())
    })
    .await;

    let scaled = writes::scale(c.as_ref(), c.as_ref(), "Deployment", &k.ns, "web", 3, false)
        .await
        .unwrap();
    assert_eq!(scaled.detail["from"], 2);
    assert_eq!(
        k.get("apps/v1", "Deployment", "web").await["spec"]["replicas"],
        3
    );

    writes::cordon(c.as_ref(), c.as_ref(), &node, false)
        .await
        .unwrap();
    assert_eq!(
        k.get("v1", "Node", &node).await["spec"]["unschedulable"],
        true
    );
    writes::remove_taint(
        c.as_ref(),
        c.as_ref(),
        &node,
        "dedicated",
        Some("NoSchedule"),
        false,
    )
    .await
    .unwrap();
    let taints = k.get("v1", "Node", &node).await["spec"]["taints"].clone();
    assert!(
        taints
            .as_array()
            .is_none_or(|a| a.iter().all(|t| t["key"] != "dedicated")),
        "{taints}"
    );

    // Eviction respects a PodDisruptionBudget; relaxing it lets the eviction through.
    k.apply(deployment("guarded", "busybox", 2, json!({})))
        .await;
    let guarded = k.pods("app=guarded", 2).await;
    for p in &guarded {
        k.bind(name(p), &node).await;
        k.patch_status("v1", "Pod", name(p), status::running("guarded", "busybox"))
            .await;
    }
    k.apply(json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}}})).await;
    k.wait("PDB status", 30, || async {
        let pdb = k
            .get("policy/v1beta1", "PodDisruptionBudget", "guarded")
            .await;
        (pdb["status"]["currentHealthy"] == 2).then_some(())
    })
    .await;
    let victim = name(&guarded[0]).to_owned();
    let refused = c.evict(&k.ns, &victim, false).await.unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Refused, "{refused}");
    writes::relax_pdb(c.as_ref(), c.as_ref(), &k.ns, "guarded", 1, false)
        .await
        .unwrap();
    k.wait("PDB to allow a disruption", 30, || async {
        let pdb = k
            .get("policy/v1beta1", "PodDisruptionBudget", "guarded")
            .await;
        (pdb["status"]["disruptionsAllowed"] == 1).then_some(())
    })
    .await;
    c.evict(&k.ns, &victim, true).await.unwrap();
    assert!(
        k.get("v1", "Pod", &victim).await["metadata"]
            .get("deletionTimestamp")
            .is_none(),
        "dry-run eviction"
    );
    c.evict(&k.ns, &victim, false).await.unwrap();
    let gone_or_terminating = k.api("v1", "Pod").get_opt(&victim).await.unwrap();
    assert!(gone_or_terminating.is_none_or(|p| p.metadata.deletion_timestamp.is_some()));

    // A Job: created, its pod finishes (as a kubelet would report), the wait sees it complete.
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "fix-it"},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"app": "fix-it"}}, "spec": {"restartPolicy": "Never",
            "containers": [{"name": "fix", "image": "busybox", "env": [{"name": "TARGET_RESOURCE_NAME", "value": "web"}]}]}}}});
    let created = jobs::create_job(c.as_ref(), c.as_ref(), &k.ns, &job, false)
        .await
        .unwrap();
    assert_eq!(created.detail["name"], "fix-it");
    let pod = k.pods("app=fix-it", 1).await.remove(0);
    k.bind(name(&pod), &node).await;
    k.patch_status("v1", "Pod", name(&pod), status::succeeded("fix"))
        .await;
    let (result, _) = jobs::wait_job(
        c.as_ref(),
        &k.ns,
        "fix-it",
        Duration::from_secs(60),
        Duration::from_millis(250),
    )
    .await
    .unwrap();
    assert_eq!(result, jobs::JobResult::Succeeded);
}

/// Secrets planted across pod specs, env, annotations, ConfigMaps, logs and events.
const PLANTED: &[&str] = &[
    "Sup3rS3cretDbPass",                                     // env DB_PASSWORD
    "sk-proj-QpT4xJ9vL2mN8rW5yZ1aB3cD6eF7gH0iK",             // env OPENAI_API_KEY
    "AKIAQWERTYUIOPASDFGH",                                  // env AWS_ACCESS_KEY_ID
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzSECRETKEY",             // env AWS_SECRET_ACCESS_KEY
    "ghp_R4nd0mG1tHubT0k3nV4lu3xxxxxxxxxxxxxxx",             // env GITHUB_TOKEN
    "xoxb-112233445566-778899001122-AbCdEfGhIjKlMnOpQrStUv", // env SLACK_BOT_TOKEN
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJrdWJlbWVkaWMtdGVzdCJ9.c2lnbmF0dXJlLWZvci10ZXN0aW5n", // arg --token
    "pgpass-in-url-42",                          // env DATABASE_URL postgres
    "hvs.CAESIVaultTokenValue123",               // annotation vault token
    "T0ABCDEF/B0GHIJKL/slackHookSecretPart1234", // annotation slack webhook
    "mysqlPassw0rd!",                            // ConfigMap database.yml (mysql url)
    "m0ng0Secr3t",                               // ConfigMap mongodb+srv url
    "r3disS3cret",                               // ConfigMap redis url
    "amqpS3cret99",                              // ConfigMap amqp url
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", // ConfigMap PEM private key body
    "MIIDdzCCAl+gAwIBAgIEbase64certbody",        // ConfigMap certificate body
    "envfile-api-key-0xDEADBEEF",                // ConfigMap .env API_KEY
    "client-secret-value-77",                    // ConfigMap oauth client_secret
    "c2VjcmV0LWJhc2U2NC10b2tlbg==",              // ConfigMap token: base64 blob
    "bearer-token-in-logs-abc123XYZ",            // logs Authorization: Bearer
    "ghs_L0gG1tHubAppT0k3nxxxxxxxxxxxxxxxxxxx",  // logs GitHub app token
    "passw0rd-in-log-line",                      // logs password=...
    "eventPassw0rd",                             // event message URL with password
    "AIzaSyA1234567890abcdefghijklmnopqrstuv",   // event message Google key
    "sk_live_51HaBcDeFgHiJkLmNoPqRsTu",          // previous logs Stripe key
    "xapp-1-A0123456789-1234567890123-abcdefabcdef", // previous logs Slack app token
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_planted_secret_survives_any_tool() {
    let Some(k) = Kube::new("secrets").await else {
        return;
    };
    let logs: LogStore = Arc::new(Mutex::new(HashMap::new()));
    let port = fake_kubelet(logs.clone()).await;
    let node = format!("node-{}", k.ns);
    k.node(&node, port, json!([])).await;
    let s = PLANTED;
    k.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-config"}, "data": {
        "database.yml": format!("production:\n  url: mysql://app:{}@mysql:3306/app\n  pool: 5\n", s[10]),
        "mongo": format!("mongodb+srv://admin:{}@cluster0.example.net/db", s[11]),
        "cache": format!("redis://:{}@redis:6379/0", s[12]),
        "queue": format!("amqps://worker:{}@rabbit:5671/", s[13]),
        "tls.key": format!("-----BEGIN PRIVATE KEY-----\n{}\nAAAAB3NzaC1yc2EAAAADAQAB\n-----END PRIVATE KEY-----\n", s[14]),
        "tls.crt": format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", s[15]),
        ".env": format!("API_KEY={}\nLOG_LEVEL=debug\n", s[16]),
        "oauth.json": format!("{{\"client_id\": \"kubemedic\", \"client_secret\": \"{}\"}}", s[17]),
        "token": s[18],
    }})).await;
    k.apply(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "leaky", "labels": {"app": "leaky"}, "annotations": {
            "vault.hashicorp.com/token": s[8],
            "notify/slack-webhook": format!("https://hooks.slack.com/services/{}", s[9])}},
        "spec": {"containers": [{"name": "app", "image": "shop/app:1", "args": [format!("--token={}", s[6])], "env": [
            {"name": "DB_PASSWORD", "value": s[0]},
            {"name": "OPENAI_API_KEY", "value": s[1]},
            {"name": "AWS_ACCESS_KEY_ID", "value": s[2]},
            {"name": "AWS_SECRET_ACCESS_KEY", "value": s[3]},
            {"name": "GITHUB_TOKEN", "value": s[4]},
            {"name": "SLACK_BOT_TOKEN", "value": s[5]},
            {"name": "DATABASE_URL", "value": format!("postgres://app:{}@db:5432/app", s[7])},
            {"name": "LOG_LEVEL", "value": "debug"}]}]}})).await;
    k.bind("leaky", &node).await;
    let pod = k
        .patch_status(
            "v1",
            "Pod",
            "leaky",
            status::crash_loop("app", "shop/app:1", 3, 1, "Error"),
        )
        .await;
    k.event(
        &pod,
        "Warning",
        "Unhealthy",
        &format!(
            "Readiness probe failed: GET https://svc:{}@api.internal/ready; key {}",
            s[22], s[23]
        ),
        4,
        30,
    )
    .await;
    logs.lock().unwrap().insert(
        (k.ns.clone(), "leaky".into(), "app".into(), false),
        format!(
            "GET /api Authorization: Bearer {}\nusing {}\nlogin password={}\nok\n",
            s[19], s[20], s[21]
        ),
    );
    logs.lock().unwrap().insert(
        (k.ns.clone(), "leaky".into(), "app".into(), true),
        format!(
            "charging with STRIPE_KEY={}\nslack app token {}\nexit 1\n",
            s[24], s[25]
        ),
    );

    let t = tools(k.cluster().await);
    let ns = k.ns.clone();
    let calls = [
        (
            "kubectl_describe",
            json!({"kind": "Pod", "name": "leaky", "namespace": ns}),
        ),
        (
            "kubectl_get",
            json!({"kind": "Pod", "name": "leaky", "namespace": ns}),
        ),
        ("kubectl_get", json!({"kind": "ConfigMap", "namespace": ns})),
        (
            "kubectl_get_yaml",
            json!({"kind": "Pod", "name": "leaky", "namespace": ns}),
        ),
        (
            "kubectl_get_yaml",
            json!({"kind": "ConfigMap", "name": "app-config", "namespace": ns}),
        ),
        (
            "kubectl_describe",
            json!({"kind": "ConfigMap", "name": "app-config", "namespace": ns}),
        ),
        (
            "kubectl_find_resource",
            json!({"kind": "ConfigMap", "namespace": ns, "name_pattern": "app"}),
        ),
        (
            "kubectl_find_resource",
            json!({"kind": "Pod", "namespace": ns, "label_selector": "app=leaky"}),
        ),
        ("kubectl_events", json!({"namespace": ns})),
        (
            "kubectl_events",
            json!({"kind": "Pod", "name": "leaky", "namespace": ns}),
        ),
        ("kubectl_count", json!({"kind": "Pod", "namespace": ns})),
        (
            "kubectl_logs",
            json!({"name": "leaky", "namespace": ns, "container": "app"}),
        ),
        (
            "kubectl_previous_logs",
            json!({"name": "leaky", "namespace": ns, "container": "app"}),
        ),
        ("kubectl_top_pods", json!({"namespace": ns})),
        (
            "get_namespaced_resource_context",
            json!({"kind": "Pod", "name": "leaky", "namespace": ns}),
        ),
    ];
    let mut seen = String::new();
    for (tool, args) in calls {
        let r = call(&t, tool, args.clone()).await;
        assert!(r.ok, "{tool} {args}: {}", r.text);
        seen.push_str(&r.text);
        seen.push_str(&r.data.to_string());
    }
    assert!(PLANTED.len() >= 25);
    // The planted values really were in the cluster: the raw API shows the first one.
    let raw = serde_json::to_string(&k.get("v1", "Pod", "leaky").await).unwrap();
    assert!(raw.contains(s[0]));
    let leaked: Vec<&&str> = PLANTED.iter().filter(|p| seen.contains(**p)).collect();
    assert!(
        leaked.is_empty(),
        "secrets survived the sanitiser: {leaked:?}"
    );
    assert!(seen.contains("[REDACTED"), "redactions are visible");
    assert!(
        seen.contains("LOG_LEVEL=debug"),
        "harmless values stay readable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_round_trips_a_namespace_of_the_real_cluster() {
    let Some(i) = incident("snap").await else {
        return;
    };
    let ns = i.k.ns.clone();
    let live = i.k.cluster().await;
    let fixed: Arc<dyn Clock> = Arc::new(ManualClock::new(chrono::Utc::now()));
    let text = snapshot::capture(live.as_ref(), std::slice::from_ref(&ns), fixed.now())
        .await
        .unwrap();
    let snap = Arc::new(SnapshotCluster::from_yaml(&text).unwrap());
    assert!(
        snap.objects().iter().all(|o| o["kind"] != "Secret"),
        "never Secrets"
    );
    assert!(
        snap.pod_logs().iter().any(|l| l.previous),
        "previous logs captured"
    );

    let live_tools = ClusterTools::new(live.clone(), fixed.clone(), ToolLimits::default());
    let snap_tools = ClusterTools::new(snap.clone(), fixed.clone(), ToolLimits::default());
    let crash = name(&i.crashing).to_owned();
    for (tool, args) in [
        (
            "kubectl_describe",
            json!({"kind": "Pod", "name": crash, "namespace": ns}),
        ),
        (
            "kubectl_describe",
            json!({"kind": "Deployment", "name": "checkout", "namespace": ns}),
        ),
        ("kubectl_get", json!({"kind": "Pod", "namespace": ns})),
        (
            "kubectl_events",
            json!({"kind": "Pod", "name": crash, "namespace": ns}),
        ),
        (
            "kubectl_previous_logs",
            json!({"name": crash, "namespace": ns, "container": "checkout"}),
        ),
        (
            "kubectl_find_resource",
            json!({"kind": "ReplicaSet", "namespace": ns, "label_selector": "app=checkout"}),
        ),
        (
            "get_namespaced_resource_context",
            json!({"kind": "Pod", "name": crash, "namespace": ns}),
        ),
    ] {
        let a = call(&live_tools, tool, args.clone()).await;
        let b = call(&snap_tools, tool, args.clone()).await;
        assert!(a.ok && b.ok, "{tool}: {} / {}", a.text, b.text);
        assert_eq!(
            a.text, b.text,
            "{tool} {args} differs between live and snapshot"
        );
    }

    // The CLI does the same.
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("snap.yaml");
    let cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kubemedic"))
        .args(["snapshot", "--namespace", &ns, "--output"])
        .arg(&file)
        .arg("--kubeconfig")
        .arg(&i.k.kubeconfig)
        .output()
        .unwrap();
    assert!(
        cmd.status.success(),
        "{}",
        String::from_utf8_lossy(&cmd.stderr)
    );
    assert!(String::from_utf8_lossy(&cmd.stdout).contains("objects"));
    let loaded = SnapshotCluster::load(&file).unwrap();
    assert!(
        loaded
            .objects()
            .iter()
            .any(|o| o["metadata"]["name"] == crash.as_str())
    );
    let _ = (&i.healthy, &i.logs, i.node.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_is_reported_not_fatal() {
    common::init();
    if common::kube::kubeconfig("KUBEMEDIC_TEST_KUBECONFIG").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = dir.path().join("kc");
    std::fs::write(&cfg, format!("apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', insecure-skip-tls-verify: true}}}}]\nusers: [{{name: u, user: {{token: x}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n")).unwrap();
    let opts = kubemedic::cluster::KubeOptions {
        kubeconfig: Some(cfg.clone()),
        context: None,
        timeout: Duration::from_secs(3),
        policy: Default::default(),
    };
    let c = Arc::new(
        kubemedic::cluster::KubeCluster::connect(&opts)
            .await
            .unwrap(),
    );
    let err = c.resource("Pod").await.unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
    let r = call(
        &tools(c),
        "kubectl_get",
        json!({"kind": "Pod", "namespace": "x"}),
    )
    .await;
    assert!(!r.ok && r.text.contains("cannot be reached"), "{}", r.text);

    // The daemon reports it on /readyz and keeps accepting alerts.
    let d = common::TestDaemon::serving(|a| a.cluster.kubeconfig = Some(cfg.clone())).await;
    let ready: Value = d
        .client
        .get(d.url("/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["status"], "degraded", "{ready}");
    assert!(
        ready["checks"]["cluster"]["detail"]
            .as_str()
            .unwrap()
            .starts_with("unreachable"),
        "{ready}"
    );
    let r = d
        .send_alertmanager(&common::fixture(
            "alertmanager/captured-from-alertmanager-0.25.json",
        ))
        .await;
    assert_eq!(r.status(), 200);
    d.stop().await;

    // And a reachable one.
    let good = common::kube::kubeconfig("KUBEMEDIC_TEST_KUBECONFIG").unwrap();
    let d = common::TestDaemon::serving(|a| a.cluster.kubeconfig = Some(good.clone())).await;
    let ready: Value = d
        .client
        .get(d.url("/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["checks"]["cluster"]["ok"], true, "{ready}");
    assert_eq!(
        ready["checks"]["cluster"]["detail"],
        "Kubernetes 1.20 reachable"
    );
    d.stop().await;
}
