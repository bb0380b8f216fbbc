//! The Helm chart (charts/kubemedic) on the real API server tier: every manifest, rendered by
//! the real helm (scripts/render-chart) for the test server's Kubernetes (1.20), is accepted by
//! a server-side dry run, with the default values and with ci/full-values.yaml; a ServiceAccount
//! bound to exactly the chart's reader + writer ClusterRoles runs every built-in action against
//! real objects; without `patch` on deployments the action that needs it gets 403; the writer
//! role grants exactly the verbs the actions call ([`CALLS`]); SQLite with two replicas does not
//! render; a fresh install with no values generates its webhook and API tokens, an upgrade
//! keeps them, a Secret of one's own wins, and the NOTES say how to read them. The Remediation
//! mirror's role grants exactly the calls the mirror makes ([`MIRROR_CALLS`]): a ServiceAccount
//! bound to the chart's roles mirrors an object through every one of them, and wider access
//! (replacing an object, deleting them all, other kinds of the group, core Events) is refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use chrono::Utc;
use common::kube::Kube;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kubemedic::cluster::{ClusterError, ErrorKind};
use kubemedic::domain::Target;
use serde_json::{Value, json};

/// What each built-in action (src/execute/builtin.rs → src/cluster/writes.rs) writes, as
/// (action, API group, resource, verb) — read from the code: a merge/strategic patch is
/// `patch`, a replace (PUT) is `update`, an eviction is `create` on `pods/eviction`. Reads go
/// through the reader role. The chart's writer ClusterRole must grant exactly these.
const CALLS: &[(&str, &str, &str, &str)] = &[
    ("rollout_undo", "apps", "deployments", "update"),
    ("rollout_restart", "apps", "deployments", "patch"),
    ("rollout_restart", "apps", "statefulsets", "patch"),
    ("rollout_restart", "apps", "daemonsets", "patch"),
    ("scale", "apps", "deployments", "patch"),
    ("scale", "apps", "statefulsets", "patch"),
    ("set_resources", "apps", "deployments", "patch"),
    ("set_resources", "apps", "statefulsets", "patch"),
    ("set_resources", "apps", "daemonsets", "patch"),
    ("rollback_statefulset", "apps", "statefulsets", "patch"),
    (
        "patch_hpa_max",
        "autoscaling",
        "horizontalpodautoscalers",
        "patch",
    ),
    ("relax_pdb", "policy", "poddisruptionbudgets", "patch"),
    ("delete_pod", "", "pods", "delete"),
    ("cordon", "", "nodes", "patch"),
    ("drain", "", "nodes", "patch"),
    ("drain", "", "pods/eviction", "create"),
    ("remove_taint", "", "nodes", "patch"),
    ("expand_pvc", "", "persistentvolumeclaims", "patch"),
    // Not a step action: a workflow of engine `job` (src/execute/mod.rs).
    ("job", "batch", "jobs", "create"),
];

/// What the Remediation mirror (src/mirror/kube.rs) calls, as (API group, resource, verb): the
/// object read before a write, the status written as a merge patch of the status subresource,
/// a missing object created, its labels patched, the retention sweep's list and delete, and its
/// Events (a repeated one is a patch of the series). The chart's mirror ClusterRole must grant exactly these.
const MIRROR_CALLS: &[(&str, &str, &str)] = &[
    ("kubemedic.io", "remediations/status", "patch"),
    ("kubemedic.io", "remediations", "get"),
    ("kubemedic.io", "remediations", "create"),
    ("kubemedic.io", "remediations", "patch"),
    ("kubemedic.io", "remediations", "list"),
    ("kubemedic.io", "remediations", "delete"),
    ("events.k8s.io", "events", "create"),
    ("events.k8s.io", "events", "patch"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `scripts/render-chart`: Ok(manifests) or Err(helm's message).
fn render(kube_version: &str, values: &str, release: &str, ns: &str) -> Result<Vec<Value>, String> {
    let out = Command::new(root().join("scripts/render-chart"))
        .args([
            "--kube-version",
            kube_version,
            "--namespace",
            ns,
            "--release",
            release,
        ])
        .arg(root().join(values))
        .output()
        .expect("run scripts/render-chart");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("rendered YAML");
    Ok(docs.into_iter().filter(|d| d.is_object()).collect())
}

fn kind(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or("")
}

fn gvk(o: &Value) -> GroupVersionKind {
    let api_version = o["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, kind(o))
}

/// The ClusterRole named `<release>-<suffix>`, as a set of (group, resource, verb).
fn granted(docs: &[Value], name: &str) -> BTreeSet<(String, String, String)> {
    let role = docs
        .iter()
        .find(|d| kind(d) == "ClusterRole" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no ClusterRole {name}"));
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        for g in rule["apiGroups"].as_array().unwrap() {
            for r in rule["resources"].as_array().unwrap() {
                for v in rule["verbs"].as_array().unwrap() {
                    out.insert((
                        g.as_str().unwrap().to_owned(),
                        r.as_str().unwrap().to_owned(),
                        v.as_str().unwrap().to_owned(),
                    ));
                }
            }
        }
    }
    out
}

/// The Prometheus Operator's two CRDs the full values use, with open schemas (this checks the
/// objects' envelope and metadata, not the operator's field schema). Created once per cluster.
async fn monitoring_crds(k: &Kube) {
    let crds: Api<DynamicObject> = Api::all_with(
        k.client.clone(),
        &kube::discovery::ApiResource::from_gvk(&GroupVersionKind::gvk(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
        )),
    );
    for (kind, plural) in [
        ("ServiceMonitor", "servicemonitors"),
        ("PrometheusRule", "prometheusrules"),
    ] {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.monitoring.coreos.com")},
            "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        });
        let obj: DynamicObject = serde_json::from_value(crd).unwrap();
        match crds.create(&PostParams::default(), &obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("create CRD {kind}: {e}"),
        }
        let g = GroupVersionKind::gvk("monitoring.coreos.com", "v1", kind);
        k.wait(&format!("the {kind} CRD served"), 30, || async {
            kube::discovery::pinned_kind(&k.client, &g).await.ok()
        })
        .await;
    }
}

/// Server-side dry run (`dryRun=All`) of every manifest: each must be accepted as it stands.
async fn dry_run_all(k: &Kube, docs: &[Value]) {
    for d in docs {
        let (ar, caps) = kube::discovery::pinned_kind(&k.client, &gvk(d))
            .await
            .unwrap_or_else(|e| panic!("the server does not serve {}: {e}", gvk(d).api_version()));
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(k.client.clone(), &k.ns, &ar)
            }
            kube::discovery::Scope::Cluster => Api::all_with(k.client.clone(), &ar),
        };
        let obj: DynamicObject = serde_json::from_value(d.clone()).unwrap();
        let params = PostParams {
            dry_run: true,
            field_manager: None,
        };
        api.create(&params, &obj).await.unwrap_or_else(|e| {
            panic!(
                "the API server refused {} {}: {e}",
                kind(d),
                d["metadata"]["name"]
            )
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_manifest_passes_a_server_side_dry_run_with_default_and_full_values() {
    let Some(k) = Kube::new("chart").await else {
        return;
    };
    monitoring_crds(&k).await;
    // kubemedic's own CRDs, as helm installs them from crds/ before the templates.
    k.kubemedic_crds().await;
    let release = format!("km-{}", &k.ns[k.ns.len() - 6..]);

    let defaults = render(
        "1.20",
        "charts/kubemedic/ci/default-values.yaml",
        &release,
        &k.ns,
    )
    .unwrap();
    let kinds: BTreeSet<&str> = defaults.iter().map(kind).collect();
    for want in [
        "Deployment",
        "Service",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Secret",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "NetworkPolicy",
    ] {
        assert!(
            kinds.contains(want),
            "no {want} with the defaults: {kinds:?}"
        );
    }
    assert!(!kinds.contains("ServiceMonitor") && !kinds.contains("PrometheusRule"));
    assert!(
        defaults
            .iter()
            .any(|d| kind(d) == "ClusterRole"
                && d["metadata"]["name"] == format!("{release}-mirror")),
        "the mirror's role with the defaults"
    );
    dry_run_all(&k, &defaults).await;

    let full = render(
        "1.20",
        "charts/kubemedic/ci/full-values.yaml",
        &release,
        &k.ns,
    )
    .unwrap();
    let kinds: BTreeSet<&str> = full.iter().map(kind).collect();
    assert!(
        kinds.contains("ServiceMonitor") && kinds.contains("PrometheusRule"),
        "{kinds:?}"
    );
    assert!(
        !kinds.contains("PersistentVolumeClaim"),
        "Postgres needs no volume claim"
    );
    dry_run_all(&k, &full).await;

    // The PodDisruptionBudget's API follows the Kubernetes it is rendered for.
    let pdb_api = |docs: &[Value]| {
        docs.iter()
            .find(|d| kind(d) == "PodDisruptionBudget")
            .map(|d| d["apiVersion"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(pdb_api(&full), "policy/v1beta1");
    let current = render(
        "1.33",
        "charts/kubemedic/ci/full-values.yaml",
        &release,
        &k.ns,
    )
    .unwrap();
    assert_eq!(pdb_api(&current), "policy/v1");
    let at_121 = render(
        "1.21",
        "charts/kubemedic/ci/default-values.yaml",
        &release,
        &k.ns,
    )
    .unwrap();
    assert_eq!(pdb_api(&at_121), "policy/v1");

    // The shipped policy, catalog and playbooks are in the ConfigMaps, with the override.
    let cm = |suffix: &str| {
        full.iter()
            .find(|d| {
                kind(d) == "ConfigMap" && d["metadata"]["name"] == format!("{release}-{suffix}")
            })
            .unwrap()
            .clone()
    };
    assert!(cm("policies")["data"]["approval.rego"].is_string());
    assert!(cm("policies")["data"]["extra.rego"].is_string());
    assert!(cm("workflows")["data"]["restart-deployment.yaml"].is_string());
    assert!(cm("playbooks")["data"]["crashloopbackoff.yaml"].is_string());
}

/// `helm install --dry-run=server -o json` of the chart as RELEASE in the test namespace, with
/// VALUES (a file) if given: the release as helm reports it (its `manifest` and `info.notes`).
/// A server-side dry run runs `lookup` against the real API server, as an install does.
fn helm_dry_run(k: &Kube, release: &str, values: Option<&std::path::Path>) -> Value {
    let helm = Command::new("bash")
        .arg("-c")
        .arg("source scripts/lib/helm.sh && ensure_helm")
        .current_dir(root())
        .output()
        .expect("bash");
    assert!(
        helm.status.success(),
        "{}",
        String::from_utf8_lossy(&helm.stderr)
    );
    let helm = String::from_utf8(helm.stdout).unwrap().trim().to_owned();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(helm);
    cmd.args(["install", release])
        .arg(root().join("charts/kubemedic"))
        .args(["--namespace", &k.ns, "--dry-run=server", "-o", "json"])
        .env("KUBECONFIG", &k.kubeconfig)
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_DATA_HOME", home.path().join("data"));
    if let Some(v) = values {
        cmd.arg("--values").arg(v);
    }
    let out = cmd.output().expect("run helm");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("helm's JSON")
}

/// The manifests of a release as helm reports them.
fn manifests(release: &Value) -> Vec<Value> {
    let text = release["manifest"].as_str().unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).expect("rendered YAML");
    docs.into_iter().filter(|d| d.is_object()).collect()
}

/// The chart's own Secret's `stringData`, if the manifests hold one.
fn own_secret(docs: &[Value]) -> Option<Value> {
    docs.iter()
        .find(|d| kind(d) == "Secret")
        .map(|d| d["stringData"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_install_with_no_values_generates_the_tokens_keeps_them_and_says_how_to_read_them()
{
    let Some(k) = Kube::new("chart-fresh").await else {
        return;
    };
    let release = format!("km-{}", &k.ns[k.ns.len() - 6..]);
    let dir = tempfile::tempdir().unwrap();
    let nothing = dir.path().join("nothing.yaml");
    std::fs::write(&nothing, "{}\n").unwrap();

    // `helm template` with no values at all renders, with two random tokens, and the API
    // server accepts every manifest.
    let docs = render("1.20", nothing.to_str().unwrap(), &release, &k.ns).unwrap();
    let data = own_secret(&docs).expect("the chart's Secret");
    let token = |key: &str| {
        data[key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key}: {data}"))
            .to_owned()
    };
    for key in ["webhook-token", "api-token"] {
        let t = token(key);
        assert!(
            t.len() == 40 && t.chars().all(|c| c.is_ascii_alphanumeric()),
            "{key}: {t}"
        );
    }
    assert_ne!(token("webhook-token"), token("api-token"));
    let env: Vec<String> = docs
        .iter()
        .find(|d| kind(d) == "Deployment")
        .unwrap()["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        env.contains(&"KUBEMEDIC_WEBHOOK_TOKEN".to_owned())
            && env.contains(&"KUBEMEDIC_API_TOKEN".to_owned()),
        "{env:?}"
    );
    dry_run_all(&k, &docs).await;

    // `helm install` (server-side dry run): the NOTES say how to read both tokens and give the
    // receiver with the in-cluster URL.
    let first = helm_dry_run(&k, &release, None);
    let notes = first["info"]["notes"].as_str().unwrap();
    for key in ["webhook-token", "api-token"] {
        let read = format!(
            "kubectl -n {ns} get secret {release} -o jsonpath='{{.data.{key}}}' | base64 -d",
            ns = k.ns
        );
        assert!(notes.contains(&read), "no `{read}` in the NOTES:\n{notes}");
    }
    assert!(
        notes.contains(&format!(
            "- url: http://{release}.{}.svc:8080/api/v1/alerts/alertmanager",
            k.ns
        )) && notes.contains("credentials_file: /etc/alertmanager/secrets/kubemedic/webhook-token"),
        "{notes}"
    );
    assert!(
        notes.contains("generated on the first install, kept on upgrade"),
        "{notes}"
    );
    assert!(
        notes.contains("kubectl get remediations -A"),
        "the NOTES say how to follow the requests: {notes}"
    );

    // An upgrade keeps the tokens the Secret holds (`lookup` on the real API server; the
    // Secret as the first install left it, the render of the upgrade).
    let secret = docs.iter().find(|d| kind(d) == "Secret").unwrap().clone();
    k.apply(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        // Owned by the release, as the first install leaves it (helm adopts it then).
        "metadata": {
            "name": secret["metadata"]["name"],
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {
                "meta.helm.sh/release-name": release,
                "meta.helm.sh/release-namespace": k.ns,
            },
        },
        "stringData": {"webhook-token": "kept-webhook-token", "api-token": "kept-api-token"},
    }))
    .await;
    let again = own_secret(&manifests(&helm_dry_run(&k, &release, None))).unwrap();
    assert_eq!(again["webhook-token"], "kept-webhook-token", "{again}");
    assert_eq!(again["api-token"], "kept-api-token", "{again}");

    // A Secret of one's own still wins: no Secret is generated, the pod reads the named one.
    let own = dir.path().join("own.yaml");
    std::fs::write(&own, "secrets: {existingSecret: my-secrets}\n").unwrap();
    let release_own = helm_dry_run(&k, &release, Some(&own));
    let docs = manifests(&release_own);
    assert!(
        own_secret(&docs).is_none(),
        "a Secret was generated beside my-secrets"
    );
    let refs: BTreeSet<&str> = docs
        .iter()
        .find(|d| kind(d) == "Deployment")
        .unwrap()["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["valueFrom"]["secretKeyRef"]["name"].as_str())
        .collect();
    assert_eq!(refs, BTreeSet::from(["my-secrets"]));
    let notes = release_own["info"]["notes"].as_str().unwrap();
    assert!(
        notes.contains("get secret my-secrets -o jsonpath='{.data.webhook-token}'")
            && !notes.contains("generated on the first install"),
        "{notes}"
    );
}

#[test]
fn sqlite_with_two_replicas_does_not_render() {
    let dir = tempfile::tempdir().unwrap();
    let values = dir.path().join("two.yaml");
    std::fs::write(
        &values,
        "replicaCount: 2\ndatabase: {type: sqlite}\nsecrets: {values: {webhookToken: t}}\n",
    )
    .unwrap();
    let err = render("1.33", values.to_str().unwrap(), "kubemedic", "kubemedic").unwrap_err();
    assert!(
        err.contains("replicaCount is 2 but database.type is sqlite"),
        "{err}"
    );
    assert!(err.contains("database.type: postgres"), "{err}");
}

#[test]
fn the_writer_role_grants_exactly_what_the_actions_call() {
    let docs = render(
        "1.33",
        "charts/kubemedic/ci/default-values.yaml",
        "kubemedic",
        "kubemedic",
    )
    .unwrap();
    let granted = granted(&docs, "kubemedic-writer");
    let called: BTreeSet<(String, String, String)> = CALLS
        .iter()
        .map(|(_, g, r, v)| ((*g).to_owned(), (*r).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(granted, called, "writer rules vs the actions' calls");
    // Every builtin action is accounted for: it writes (listed) or only reads.
    for action in kubemedic::actions::BuiltinAction::ALL {
        assert!(
            CALLS.iter().any(|c| c.0 == action.name()) || action.is_read_only(),
            "{action} is missing from CALLS"
        );
    }
    // The reader never reads Secrets.
    let reader = self::granted(&docs, "kubemedic-reader");
    assert!(reader.iter().all(|(_, r, _)| r != "secrets"), "{reader:?}");
    assert!(
        reader
            .iter()
            .all(|(_, _, v)| ["get", "list", "watch"].contains(&v.as_str()))
    );
}

/// The container's environment variable `name`, as rendered.
fn env_of<'a>(docs: &'a [Value], name: &str) -> Option<&'a Value> {
    let deployment = docs.iter().find(|d| kind(d) == "Deployment").unwrap();
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
}

#[test]
fn the_mirror_role_grants_exactly_what_the_mirror_calls_and_is_gone_when_it_is_off() {
    let docs = render(
        "1.33",
        "charts/kubemedic/ci/default-values.yaml",
        "kubemedic",
        "kubemedic",
    )
    .unwrap();
    let called: BTreeSet<(String, String, String)> = MIRROR_CALLS
        .iter()
        .map(|(g, r, v)| ((*g).to_owned(), (*r).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(
        granted(&docs, "kubemedic-mirror"),
        called,
        "mirror rules vs the mirror's calls"
    );
    assert_eq!(
        env_of(&docs, "KUBEMEDIC_MIRROR_REMEDIATIONS").unwrap()["value"],
        "true"
    );
    assert_eq!(
        env_of(&docs, "KUBEMEDIC_MIRROR_NAMESPACE").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace",
        "objects without a namespaced target go to the release's namespace"
    );

    let dir = tempfile::tempdir().unwrap();
    let values = dir.path().join("off.yaml");
    std::fs::write(
        &values,
        "mirror: {enabled: false}\nsecrets: {values: {webhookToken: t}}\n",
    )
    .unwrap();
    let off = render("1.33", values.to_str().unwrap(), "kubemedic", "kubemedic").unwrap();
    assert!(
        !off.iter()
            .any(|d| d["metadata"]["name"] == "kubemedic-mirror"),
        "no mirror role or binding when it is off"
    );
    assert!(env_of(&off, "KUBEMEDIC_MIRROR_REMEDIATIONS").is_none());
}

/// (group, resource, verb) of one API request as the cluster's counter records it
/// (`PATCH /apis/kubemedic.io/v1alpha1/namespaces/ns/remediations/x/status?…`).
fn call_of(request: &str) -> (String, String, String) {
    let (method, uri) = request.split_once(' ').unwrap();
    let path = uri.split('?').next().unwrap();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts[0] {
        "apis" => (parts[1], &parts[3..]),
        _ => ("", &parts[2..]),
    };
    let rest = match rest {
        ["namespaces", _, more @ ..] if !more.is_empty() => more,
        other => other,
    };
    let (resource, named) = match rest {
        [r] => ((*r).to_owned(), false),
        [r, _] => ((*r).to_owned(), true),
        [r, _, sub] => (format!("{r}/{sub}"), true),
        other => panic!("unexpected path {other:?}"),
    };
    let verb = match (method, named) {
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PATCH", _) => "patch",
        ("PUT", _) => "update",
        ("DELETE", _) => "delete",
        other => panic!("unexpected method {other:?}"),
    };
    (group.to_owned(), resource, verb.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mirror_writes_with_exactly_the_charts_mirror_role_and_nothing_wider() {
    use kubemedic::domain::Phase;
    use kubemedic::mirror::object::{Entry, PHASE_LABEL, PhaseEvent, Remediation, Spec, Status};
    use kubemedic::mirror::{KubeRemediations, RemediationObjects};

    let Some(k) = Kube::new("chart-mirror").await else {
        return;
    };
    k.kubemedic_crds().await;
    let release = format!("km-{}", &k.ns[k.ns.len() - 6..]);
    let docs = render(
        "1.20",
        "charts/kubemedic/ci/default-values.yaml",
        &release,
        &k.ns,
    )
    .unwrap();
    // The chart's ServiceAccount and RBAC as installed (reader, writer, mirror), and nothing
    // else.
    let mirror = format!("{release}-mirror");
    for d in docs
        .iter()
        .filter(|d| ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"].contains(&kind(d)))
    {
        k.apply(d.clone()).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = k.kubeconfig_of(&release, dir.path()).await;
    let cluster = k.cluster_as(&kubeconfig, Default::default()).await;
    let objects = KubeRemediations::new(cluster.client());

    let id = uuid::Uuid::new_v4().to_string();
    let mut object = Remediation {
        name: id.clone(),
        namespace: k.ns.clone(),
        labels: [
            ("app.kubernetes.io/managed-by", "kubemedic"),
            ("kubemedic.io/request-id", id.as_str()),
            (PHASE_LABEL, "Executing"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect(),
        spec: Spec {
            request_id: id.clone(),
            signal: "KubePodCrashLooping".into(),
            target: Some(Target::new("Deployment", "web", Some(k.ns.clone()))),
        },
        status: Status {
            phase: Phase::Executing,
            reason: None,
            target: Some("Deployment/web".into()),
            workflow: Some("restart-deployment".into()),
            decision: Some("AutoApproved".into()),
            approval: Some("NotRequired".into()),
            effective: None,
            undo: None,
            dashboard: None,
            updated_at: Utc::now(),
            audit_event_id: 1,
            timeline: vec![Entry {
                at: Utc::now(),
                kind: "transition".into(),
                message: "Gating -> Executing".into(),
            }],
        },
    };
    let written = k
        .wait("RBAC to let the mirror write", 30, || async {
            objects.write(&object).await.ok()
        })
        .await;
    assert_eq!(written.before, None, "created by this write");
    let stale = object.clone();
    object.status.phase = Phase::Completed;
    object.status.effective = Some(false);
    object.status.undo = Some("Undone".into());
    object.status.audit_event_id = 2;
    object.labels.insert(PHASE_LABEL.into(), "Completed".into());
    let again = objects.write(&object).await.unwrap();
    assert_eq!(again.before.as_deref(), Some("Executing"));
    assert!(!again.outdated);
    // A replica that read the request before that change leaves the later view as it is.
    let late = objects.write(&stale).await.unwrap();
    assert!(late.outdated, "{late:?}");
    let event = PhaseEvent {
        phase: Phase::Completed,
        note: "Verifying -> Completed".into(),
        warning: false,
    };
    objects.publish(&again, &event).await.unwrap();
    objects.publish(&again, &event).await.unwrap();
    let listed = objects.list().await.unwrap();
    let mine = listed.iter().find(|o| o.name == id).unwrap();
    assert_eq!(mine.phase, Some(Phase::Completed));
    let stored = k.get("kubemedic.io/v1alpha1", "Remediation", &id).await;
    assert_eq!(stored["status"]["effective"], false, "{stored:#}");
    assert_eq!(
        stored["status"]["undo"], "Undone",
        "the CRD keeps the undo: {stored:#}"
    );
    assert_eq!(stored["metadata"]["labels"][PHASE_LABEL], "Completed");
    objects.delete(&k.ns, &id).await.unwrap();
    objects.delete(&k.ns, &id).await.unwrap();

    // Every verb the role grants was used, and nothing else was called.
    let made: BTreeSet<(String, String, String)> = cluster
        .requests()
        .take()
        .iter()
        .map(|r| call_of(r))
        .collect();
    assert_eq!(made, granted(&docs, &mirror), "the calls made vs the role");

    // Nothing wider, with all the chart's roles: replacing an object, deleting them all, other
    // kinds of the group, core Events.
    let client = cluster.client();
    let remediations = k.api("kubemedic.io/v1alpha1", "Remediation");
    let theirs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &k.ns,
        &kube::discovery::ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubemedic.io", "v1alpha1", "Remediation"),
            "remediations",
        ),
    );
    let kept = remediations
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "kubemedic.io/v1alpha1",
                "kind": "Remediation", "metadata": {"name": "kept"}, "spec": {"requestId": "kept"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let forbidden = |r: Result<DynamicObject, kube::Error>| match r {
        Err(kube::Error::Api(e)) => e.code == 403,
        _ => false,
    };
    assert!(
        matches!(
            theirs
                .delete_collection(&Default::default(), &Default::default())
                .await,
            Err(kube::Error::Api(e)) if e.code == 403
        ),
        "deletecollection"
    );
    assert!(
        forbidden(theirs.replace("kept", &PostParams::default(), &kept).await),
        "update"
    );
    let workflows: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &k.ns,
        &kube::discovery::ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubemedic.io", "v1alpha1", "RemediationWorkflow"),
            "remediationworkflows",
        ),
    );
    let workflow: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "kubemedic.io/v1alpha1",
        "kind": "RemediationWorkflow", "metadata": {"name": "mine"}, "spec": {}}))
        .unwrap();
    assert!(
        forbidden(workflows.create(&PostParams::default(), &workflow).await),
        "another kind of the group"
    );
    let core_events: Api<DynamicObject> = Api::namespaced_with(
        client,
        &k.ns,
        &kube::discovery::ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Event")),
    );
    let core_event: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "x", "namespace": k.ns},
        "reason": "X", "message": "x"}))
    .unwrap();
    assert!(
        forbidden(
            core_events
                .create(&PostParams::default(), &core_event)
                .await
        ),
        "core Events"
    );

    for name in [
        format!("{release}-reader"),
        format!("{release}-writer"),
        mirror,
    ] {
        for kind in ["ClusterRoleBinding", "ClusterRole"] {
            let _ = k
                .api("rbac.authorization.k8s.io/v1", kind)
                .delete(&name, &Default::default())
                .await;
        }
    }
}

fn args(pairs: &[(&str, Value)]) -> kubemedic::actions::Args {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

async fn act(
    c: &kubemedic::cluster::KubeCluster,
    action: &str,
    a: &[(&str, Value)],
    target: &Target,
) -> Result<kubemedic::cluster::WriteOutcome, ClusterError> {
    kubemedic::actions::run(c, c, action, &args(a), target, Utc::now(), false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_builtin_action_runs_with_exactly_the_charts_permissions() {
    let Some(k) = Kube::new("chart-rbac").await else {
        return;
    };
    let server = std::env::var("KUBEMEDIC_TEST_KUBE_SERVER").expect("KUBEMEDIC_TEST_KUBE_SERVER");
    let ca = std::env::var("KUBEMEDIC_TEST_KUBE_CA_FILE").expect("KUBEMEDIC_TEST_KUBE_CA_FILE");
    let release = format!("km-{}", &k.ns[k.ns.len() - 6..]);
    let docs = render(
        "1.20",
        "charts/kubemedic/ci/default-values.yaml",
        &release,
        &k.ns,
    )
    .unwrap();

    // The chart's ServiceAccount and RBAC, for real; nothing else grants this account anything.
    for d in docs
        .iter()
        .filter(|d| ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"].contains(&kind(d)))
    {
        k.apply(d.clone()).await;
    }
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(k.client.clone(), &k.ns);
    let token = k
        .wait("the ServiceAccount's token", 30, || async {
            let list = secrets.list(&Default::default()).await.ok()?;
            list.items.into_iter().find_map(|s| {
                let ours = s.type_.as_deref() == Some("kubernetes.io/service-account-token")
                    && s.metadata
                        .annotations
                        .as_ref()?
                        .get("kubernetes.io/service-account.name")
                        == Some(&release);
                ours.then(|| {
                    s.data?
                        .get("token")
                        .map(|t| String::from_utf8(t.0.clone()).unwrap())
                })?
            })
        })
        .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("sa.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: '{server}', certificate-authority: '{ca}'}}}}]\n\
             users: [{{name: sa, user: {{token: '{token}'}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: sa}}}}]\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let c = k.cluster_as(&kubeconfig, Default::default()).await;

    // Objects to act on, made as admin.
    let node = format!("{}-node", k.ns);
    k.node(
        &node,
        1,
        json!([{"key": "example.com/broken", "effect": "NoSchedule"}]),
    )
    .await;
    k.apply(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "shop/web:1"}]}}}
    }))
    .await;
    k.pods("app=web", 2).await;
    common::scenarios::run_unscheduled(&k, "app=web", &node).await;
    let web = Target::new("Deployment", "web", Some(k.ns.clone()));
    let node_target = Target::new("Node", &node, None);

    // rollout_undo needs a revision to go back to: roll out image 2 first (as admin).
    k.patch("apps/v1", "Deployment", "web",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "shop/web:2"}]}}}})).await;
    k.wait("revision 2", 30, || async {
        let d = k.get("apps/v1", "Deployment", "web").await;
        (d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2").then_some(())
    })
    .await;
    act(&c, "rollout_undo", &[("toRevision", json!(1))], &web)
        .await
        .unwrap();
    let d = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "shop/web:1"
    );

    act(&c, "rollout_restart", &[], &web).await.unwrap();
    act(&c, "scale", &[("replicas", json!(3))], &web)
        .await
        .unwrap();
    act(
        &c,
        "set_resources",
        &[("container", json!("web")), ("memoryLimit", json!("256Mi"))],
        &web,
    )
    .await
    .unwrap();
    act(&c, "wait_rollout", &[("timeoutSeconds", json!(1))], &web)
        .await
        .unwrap();

    k.apply(
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 3}}),
    )
    .await;
    act(
        &c,
        "patch_hpa_max",
        &[("hpa", json!("web")), ("maxReplicas", json!(6))],
        &web,
    )
    .await
    .unwrap();

    k.apply(
        json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    act(
        &c,
        "relax_pdb",
        &[("pdb", json!("web")), ("maxUnavailable", json!(2))],
        &web,
    )
    .await
    .unwrap();

    // A bound PVC whose class allows expansion (a pre-bound PV; the real PV controller binds).
    let class = format!("{}-grow", k.ns);
    k.apply(json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": class}, "provisioner": "example.com/none", "allowVolumeExpansion": true}))
        .await;
    k.apply(json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": format!("{}-pv", k.ns)},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": class,
            "hostPath": {"path": "/tmp/kubemedic-none"},
            "claimRef": {"namespace": k.ns, "name": "data"}}}))
        .await;
    k.apply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"], "volumeName": format!("{}-pv", k.ns),
            "resources": {"requests": {"storage": "1Gi"}}}}))
        .await;
    k.wait("the PVC bound", 60, || async {
        let p = k.get("v1", "PersistentVolumeClaim", "data").await;
        (p["status"]["phase"] == "Bound").then_some(())
    })
    .await;
    act(
        &c,
        "expand_pvc",
        &[("pvc", json!("data")), ("size", json!("2Gi"))],
        &web,
    )
    .await
    .unwrap();
    let pvc = k.get("v1", "PersistentVolumeClaim", "data").await;
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "2Gi");

    // A StatefulSet mid-update goes back.
    k.apply(
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "shop/db:1"}]}}}}),
    )
    .await;
    k.pods("app=db", 1).await;
    common::scenarios::run_unscheduled(&k, "app=db", &node).await;
    k.patch("apps/v1", "StatefulSet", "db",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "shop/db:2"}]}}}})).await;
    k.wait("the update revision", 30, || async {
        let s = k.get("apps/v1", "StatefulSet", "db").await;
        let (u, cur) = (
            &s["status"]["updateRevision"],
            &s["status"]["currentRevision"],
        );
        (u.is_string() && cur.is_string() && u != cur).then_some(())
    })
    .await;
    let db = Target::new("StatefulSet", "db", Some(k.ns.clone()));
    act(&c, "rollback_statefulset", &[("toRevision", json!(1))], &db)
        .await
        .unwrap();
    act(&c, "scale", &[("replicas", json!(2))], &db)
        .await
        .unwrap();
    act(&c, "rollout_restart", &[], &db).await.unwrap();

    // A DaemonSet: restart and resources.
    k.apply(
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "shop/agent:1"}]}}}}),
    )
    .await;
    let agent = Target::new("DaemonSet", "agent", Some(k.ns.clone()));
    act(&c, "rollout_restart", &[], &agent).await.unwrap();
    act(
        &c,
        "set_resources",
        &[("container", json!("agent")), ("cpuLimit", json!("200m"))],
        &agent,
    )
    .await
    .unwrap();

    // Nodes: taint off, cordon, drain (evicts the bound pods of web and db). The budget goes
    // first: whether it allows a disruption depends on pods nobody runs here, not on RBAC.
    k.api("policy/v1beta1", "PodDisruptionBudget")
        .delete("web", &Default::default())
        .await
        .unwrap();
    act(
        &c,
        "remove_taint",
        &[("key", json!("example.com/broken"))],
        &node_target,
    )
    .await
    .unwrap();
    act(&c, "cordon", &[], &node_target).await.unwrap();
    common::scenarios::run_unscheduled(&k, "app=web", &node).await;
    let drained = act(&c, "drain", &[], &node_target).await.unwrap();
    assert!(
        !drained.detail["evicted"].as_array().unwrap().is_empty(),
        "the drain evicted pods through the API: {drained:?}"
    );

    // delete_pod on a pod still there.
    k.apply(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lone"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .await;
    act(&c, "delete_pod", &[("pod", json!("lone"))], &web)
        .await
        .unwrap();

    // A `job` workflow step creates a Job.
    kubemedic::cluster::jobs::create_job(
        c.as_ref(),
        c.as_ref(),
        &k.ns,
        &json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "fix", "namespace": k.ns},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "fix", "image": "busybox"}]}}}}),
        false,
    )
    .await
    .unwrap();

    // Without `patch` on deployments (the rest of the role as rendered), scale is forbidden.
    let writer = format!("{release}-writer");
    let mut role = docs
        .iter()
        .find(|d| kind(d) == "ClusterRole" && d["metadata"]["name"] == writer.as_str())
        .unwrap()
        .clone();
    for rule in role["rules"].as_array_mut().unwrap() {
        if rule["resources"] == json!(["deployments"]) {
            rule["verbs"] = json!(["update"]);
        }
    }
    let roles = k.api("rbac.authorization.k8s.io/v1", "ClusterRole");
    let current = roles.get(&writer).await.unwrap();
    role["metadata"]["resourceVersion"] = json!(current.metadata.resource_version);
    roles
        .replace(
            &writer,
            &PostParams::default(),
            &serde_json::from_value(role).unwrap(),
        )
        .await
        .unwrap();
    let refused = k
        .wait("RBAC to drop patch on deployments", 30, || async {
            match act(&c, "scale", &[("replicas", json!(1))], &web).await {
                Err(e) if e.kind == ErrorKind::Forbidden => Some(e),
                _ => None,
            }
        })
        .await;
    assert!(refused.message.contains("403"), "{refused}");
    assert!(refused.message.contains("patch"), "{refused}");
    // The StatefulSet's patch is still granted: only the removed verb is missing.
    act(&c, "scale", &[("replicas", json!(1))], &db)
        .await
        .unwrap();

    // The configuration kinds: read cluster-wide and their status written — never the objects
    // themselves (write access to an ApprovalPolicy equals approval rights).
    k.kubemedic_crds().await;
    k.apply(
        json!({"apiVersion": "kubemedic.io/v1alpha1", "kind": "ApprovalPolicy",
        "metadata": {"name": "p"}, "spec": {"modules": {"x.rego": "package x\n"}}}),
    )
    .await;
    let policies = kube::core::ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubemedic.io", "v1alpha1", "ApprovalPolicy"),
        "approvalpolicies",
    );
    let sa = c.client();
    let all: Api<DynamicObject> = Api::all_with(sa.clone(), &policies);
    all.list(&Default::default()).await.unwrap();
    let here: Api<DynamicObject> = Api::namespaced_with(sa, &k.ns, &policies);
    here.patch_status(
        "p",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"status": {"observedGeneration": 1}})),
    )
    .await
    .unwrap();
    let forbidden = |r: Result<DynamicObject, kube::Error>| matches!(r, Err(kube::Error::Api(e)) if e.code == 403);
    let other: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubemedic.io/v1alpha1", "kind": "ApprovalPolicy",
        "metadata": {"name": "q", "namespace": k.ns},
        "spec": {"modules": {"x.rego": "package x\n"}}}))
    .unwrap();
    assert!(forbidden(here.create(&PostParams::default(), &other).await));
    assert!(forbidden(
        here.patch(
            "p",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"modules": {"y.rego": "package y\n"}}})),
        )
        .await
    ));

    for name in [
        format!("{release}-reader"),
        format!("{release}-config"),
        writer,
        format!("{release}-mirror"),
    ] {
        let _ = roles.delete(&name, &Default::default()).await;
        let _ = k
            .api("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
            .delete(&name, &Default::default())
            .await;
    }
}
