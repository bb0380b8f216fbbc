//! The cluster tools' tests.

use super::*;

#[test]
fn capping_keeps_warnings_and_order() {
    let events: Vec<Value> = (0..10)
        .map(|i| {
            json!({"type": if i % 3 == 0 { "Warning" } else { "Normal" }, "lastTimestamp": format!("2026-01-01T00:00:{i:02}Z"), "reason": format!("r{i}")})
        })
        .collect();
    let kept = cap_events(events, 5);
    let reasons: Vec<&str> = kept.iter().map(|e| e["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["r0", "r3", "r6", "r8", "r9"]);
}

#[tokio::test]
async fn top_pods_reads_the_metrics_api_when_it_is_served() {
    let snap = crate::cluster::SnapshotCluster::from_yaml(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: shop}\nspec: {containers: [{name: web, image: nginx}]}\n---\napiVersion: metrics.k8s.io/v1beta1\nkind: PodMetrics\nmetadata: {name: web-1, namespace: shop}\ncontainers: [{name: web, usage: {cpu: 250m, memory: 200Mi}}]\n",
    )
    .unwrap();
    let clock = std::sync::Arc::new(crate::clock::SystemClock);
    let t = ClusterTools::new(
        std::sync::Arc::new(snap),
        clock.clone(),
        ToolLimits::default(),
    );
    let r = t
        .call("kubectl_top_pods", &json!({"namespace": "shop"}))
        .await;
    assert!(
        r.ok && r.text.contains("web cpu=250m memory=200Mi"),
        "{}",
        r.text
    );
    assert_eq!(r.data["available"], true);

    let bare = crate::cluster::SnapshotCluster::from_yaml(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: shop}\n",
    )
    .unwrap();
    let t = ClusterTools::new(std::sync::Arc::new(bare), clock, ToolLimits::default());
    let r = t
        .call("kubectl_top_pods", &json!({"namespace": "shop"}))
        .await;
    assert!(
        r.ok && r.text.starts_with("metrics API not available"),
        "{}",
        r.text
    );
}

const SHOP: &str = "apiVersion: kubemedic.io/v1alpha1\nkind: SnapshotInfo\ncapturedAt: \"2026-11-21T12:00:00Z\"\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: shop}\nspec: {containers: [{name: web, image: nginx}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: coredns-1, namespace: kube-system}\nspec: {containers: [{name: coredns, image: coredns}]}\n---\napiVersion: v1\nkind: Event\nmetadata: {name: coredns-1.1, namespace: kube-system}\ninvolvedObject: {kind: Pod, name: coredns-1, namespace: kube-system}\ntype: Warning\nreason: BackOff\nmessage: restarting\n---\napiVersion: kubemedic.io/v1alpha1\nkind: PodLogs\nmetadata: {namespace: shop, name: web-1}\ncontainer: web\nprevious: false\ntext: |\n  2026-11-21T10:00:00Z old line password=hunter2\n  2026-11-21T11:58:00Z recent line\n  no timestamp here\n";

fn shop_tools(limits: ToolLimits, policy: crate::cluster::ReadPolicy) -> ClusterTools {
    let snap = crate::cluster::SnapshotCluster::from_yaml(SHOP)
        .unwrap()
        .with_policy(policy);
    ClusterTools::new(
        std::sync::Arc::new(snap),
        std::sync::Arc::new(crate::clock::SystemClock),
        limits,
    )
}

#[tokio::test]
async fn output_over_the_cap_is_cut_and_marked_after_sanitising() {
    let limits = ToolLimits {
        max_output_chars: 40,
        ..Default::default()
    };
    let t = shop_tools(limits, Default::default());
    let r = t
        .call(
            "kubectl_logs",
            &json!({"name": "web-1", "namespace": "shop"}),
        )
        .await;
    assert!(r.ok && r.truncated, "{r:?}");
    assert!(r.text.ends_with(TRUNCATED), "{}", r.text);
    assert!(r.text.len() <= 40 + 1 + TRUNCATED.len(), "{}", r.text);
    assert!(!r.text.contains("hunter2"), "{}", r.text);
    // A person is shown the whole output, sanitised too.
    let whole = r.whole.as_deref().unwrap();
    assert!(whole.contains("no timestamp here"), "{whole}");
    assert!(
        !whole.contains("hunter2") && !whole.contains(TRUNCATED),
        "{whole}"
    );
    assert_eq!(r.whole_text(), whole);
    // Under the cap: whole, unmarked.
    let t = shop_tools(ToolLimits::default(), Default::default());
    let r = t
        .call(
            "kubectl_logs",
            &json!({"name": "web-1", "namespace": "shop"}),
        )
        .await;
    assert!(r.ok && !r.truncated && !r.text.contains(TRUNCATED), "{r:?}");
    assert!(r.text.contains("no timestamp here") && !r.text.contains("hunter2"));
    assert_eq!(
        (r.whole.as_deref(), r.whole_text()),
        (None, r.text.as_str())
    );
}

#[tokio::test]
async fn since_seconds_keeps_the_lines_of_the_last_seconds_before_the_capture() {
    let t = shop_tools(ToolLimits::default(), Default::default());
    let r = t
        .call(
            "kubectl_logs",
            &json!({"name": "web-1", "namespace": "shop", "since_seconds": 600}),
        )
        .await;
    assert!(r.ok, "{}", r.text);
    assert!(
        r.text.contains("recent line") && !r.text.contains("old line"),
        "{}",
        r.text
    );
    assert!(r.text.contains("no timestamp here"), "{}", r.text);
}

#[tokio::test]
async fn blocked_namespaces_are_refused_and_left_out_of_lists() {
    let policy = crate::cluster::ReadPolicy {
        blocked_namespaces: vec!["kube-system".into()],
        ..Default::default()
    };
    let t = shop_tools(ToolLimits::default(), policy);
    for (tool, args) in [
        (
            "kubectl_describe",
            json!({"kind": "Pod", "name": "coredns-1", "namespace": "kube-system"}),
        ),
        (
            "kubectl_get",
            json!({"kind": "pods", "namespace": "kube-system"}),
        ),
        ("kubectl_events", json!({"namespace": "kube-system"})),
        (
            "kubectl_logs",
            json!({"name": "coredns-1", "namespace": "kube-system"}),
        ),
    ] {
        let r = t.call(tool, &args).await;
        assert!(!r.ok, "{tool}: {}", r.text);
        assert!(
            r.text
                .contains("namespace kube-system is blocked by kubemedic's read policy"),
            "{tool}: {}",
            r.text
        );
    }
    // Across all namespaces: the blocked one is simply not there.
    let r = t
        .call("kubectl_find_resource", &json!({"kind": "Pod"}))
        .await;
    assert!(r.ok, "{}", r.text);
    assert!(
        r.text.contains("web-1") && !r.text.contains("coredns"),
        "{}",
        r.text
    );
    let r = t.call("kubectl_count", &json!({"kind": "Pod"})).await;
    assert_eq!(r.data["count"], 1, "{}", r.text);
}

#[test]
fn every_tool_has_a_schema_with_the_contract_arguments() {
    let specs = specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
    for n in [
        "kubectl_describe",
        "kubectl_get",
        "kubectl_get_yaml",
        "kubectl_find_resource",
        "kubectl_events",
        "kubectl_count",
        "kubectl_logs",
        "kubectl_previous_logs",
        "kubectl_top_pods",
        "get_namespaced_resource_context",
        "get_cluster_resource_context",
    ] {
        assert!(names.contains(&n), "{n}");
    }
    let logs = &specs
        .iter()
        .find(|s| s.name == "kubectl_logs")
        .unwrap()
        .parameters["properties"];
    for arg in [
        "container",
        "tail_lines",
        "since_seconds",
        "name",
        "namespace",
    ] {
        assert!(logs.get(arg).is_some(), "{arg}");
    }
    let find = &specs
        .iter()
        .find(|s| s.name == "kubectl_find_resource")
        .unwrap()
        .parameters["properties"];
    for arg in ["namespace", "label_selector", "name_pattern"] {
        assert!(find.get(arg).is_some(), "{arg}");
    }
}

/// The data a decision reads holds every item and whole objects; the text a model reads is
/// the same capped, trimmed view either way.
#[tokio::test]
async fn tools_for_decisions_carry_every_item_whole() {
    let nodes: String = (1..=3)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  managedFields: [{{manager: kubelet, fieldsV1: {{'f:spec': {{'f:taints': {{}}}}}}}}]\n  annotations: {{kubectl.kubernetes.io/last-applied-configuration: '{{}}'}}\n"
            )
        })
        .collect();
    let snap = crate::cluster::SnapshotCluster::from_yaml(&format!(
        "apiVersion: kubemedic.io/v1alpha1\nkind: SnapshotInfo\ncapturedAt: \"2026-11-21T12:00:00Z\"\n{nodes}"
    ))
    .unwrap();
    let limits = ToolLimits {
        max_list_items: 2,
        ..Default::default()
    };
    let capped = ClusterTools::new(
        std::sync::Arc::new(snap),
        std::sync::Arc::new(crate::clock::SystemClock),
        limits,
    );
    let whole = capped.with_limits(capped.limits().clone()).for_decisions();
    let args = json!({"kind": "Node"});
    let (a, b) = (
        capped.call("kubectl_get", &args).await,
        whole.call("kubectl_get", &args).await,
    );
    assert_eq!(a.text, b.text, "the model reads the same");
    assert!(a.text.contains("showing 2 of 3"), "{}", a.text);
    assert_eq!(a.list("items").len(), 2);
    assert!(
        a.list("items")[0]
            .pointer("/metadata/managedFields")
            .is_none()
    );
    let items = b.list("items");
    assert_eq!(items.len(), 3);
    assert_eq!(
        items[0].pointer("/metadata/managedFields/0/manager"),
        Some(&json!("kubelet"))
    );
    assert!(
        items[0]
            .pointer("/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration")
            .is_some()
    );
    let one = json!({"kind": "Node", "name": "n1"});
    let (a, b) = (
        capped.call("kubectl_get", &one).await,
        whole.call("kubectl_get", &one).await,
    );
    assert_eq!(a.text, b.text);
    assert!(
        a.list("items")[0]
            .pointer("/metadata/managedFields")
            .is_none()
    );
    assert!(
        b.list("items")[0]
            .pointer("/metadata/managedFields")
            .is_some()
    );
}
