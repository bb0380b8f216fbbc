//! Compact text renderings of Kubernetes objects, in the spirit of `kubectl get` and
//! `kubectl describe`. The LLM reads these; they must be short and carry the evidence (states,
//! reasons, exit codes, restarts, limits, conditions, taints, events).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::obj::{self, array, at, i64_at, str_at};

/// `3m`, `2h`, `5d` since `t`, as kubectl prints ages.
pub fn age(t: Option<&str>, now: DateTime<Utc>) -> String {
    let Some(t) = t.and_then(|t| DateTime::parse_from_rfc3339(t).ok()) else {
        return "<unknown>".into();
    };
    let secs = (now - t.with_timezone(&Utc)).num_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// The STATUS column of `kubectl get pods` (what playbook triggers match on).
pub fn pod_status(pod: &Value) -> String {
    if str_at(pod, &["metadata", "deletionTimestamp"]).is_some() {
        return "Terminating".into();
    }
    for c in array(pod, &["status", "initContainerStatuses"]) {
        if let Some(r) = str_at(c, &["state", "waiting", "reason"])
            && r != "PodInitializing"
        {
            return format!("Init:{r}");
        }
        if let Some(code) = i64_at(c, &["state", "terminated", "exitCode"])
            && code != 0
        {
            return format!(
                "Init:{}",
                str_at(c, &["state", "terminated", "reason"]).unwrap_or("Error")
            );
        }
    }
    let mut status = str_at(pod, &["status", "reason"])
        .or_else(|| str_at(pod, &["status", "phase"]))
        .unwrap_or("Unknown")
        .to_owned();
    for c in array(pod, &["status", "containerStatuses"]) {
        if let Some(r) = str_at(c, &["state", "waiting", "reason"]) {
            status = r.to_owned();
            break;
        }
        if let Some(r) = str_at(c, &["state", "terminated", "reason"]) {
            status = r.to_owned();
        }
    }
    status
}

fn ready_count(pod: &Value) -> (usize, usize) {
    let statuses = array(pod, &["status", "containerStatuses"]);
    let total = array(pod, &["spec", "containers"])
        .len()
        .max(statuses.len());
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    (ready, total)
}

fn restarts(pod: &Value) -> i64 {
    array(pod, &["status", "containerStatuses"])
        .iter()
        .filter_map(|c| i64_at(c, &["restartCount"]))
        .sum()
}

/// Column headers and one row per object, for `kubectl get`.
pub fn table(kind: &str, items: &[Value], now: DateTime<Utc>, with_namespace: bool) -> String {
    let (headers, rows): (Vec<&str>, Vec<Vec<String>>) = match kind {
        "Pod" => (
            vec!["NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"],
            items
                .iter()
                .map(|p| {
                    let (r, t) = ready_count(p);
                    vec![
                        obj::name(p).to_owned(),
                        format!("{r}/{t}"),
                        pod_status(p),
                        restarts(p).to_string(),
                        age(str_at(p, &["metadata", "creationTimestamp"]), now),
                        str_at(p, &["spec", "nodeName"])
                            .unwrap_or("<none>")
                            .to_owned(),
                    ]
                })
                .collect(),
        ),
        "Deployment" | "StatefulSet" | "ReplicaSet" => (
            vec!["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
            items
                .iter()
                .map(|d| {
                    let desired = i64_at(d, &["spec", "replicas"]).unwrap_or(1);
                    let num = |k: &str| i64_at(d, &["status", k]).unwrap_or(0).to_string();
                    vec![
                        obj::name(d).to_owned(),
                        format!("{}/{desired}", num("readyReplicas")),
                        num("updatedReplicas"),
                        num("availableReplicas"),
                        age(str_at(d, &["metadata", "creationTimestamp"]), now),
                    ]
                })
                .collect(),
        ),
        "Node" => (
            vec!["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
            items
                .iter()
                .map(|n| {
                    let ready = array(n, &["status", "conditions"])
                        .iter()
                        .find(|c| str_at(c, &["type"]) == Some("Ready"))
                        .and_then(|c| str_at(c, &["status"]))
                        == Some("True");
                    let mut status = if ready { "Ready" } else { "NotReady" }.to_owned();
                    if at(n, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
                        status.push_str(",SchedulingDisabled");
                    }
                    let roles: Vec<&str> = obj::labels(n)
                        .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
                        .collect();
                    vec![
                        obj::name(n).to_owned(),
                        status,
                        if roles.is_empty() {
                            "<none>".into()
                        } else {
                            roles.join(",")
                        },
                        age(str_at(n, &["metadata", "creationTimestamp"]), now),
                        str_at(n, &["status", "nodeInfo", "kubeletVersion"])
                            .unwrap_or("")
                            .to_owned(),
                    ]
                })
                .collect(),
        ),
        _ => (
            vec!["NAME", "AGE"],
            items
                .iter()
                .map(|o| {
                    vec![
                        obj::name(o).to_owned(),
                        age(str_at(o, &["metadata", "creationTimestamp"]), now),
                    ]
                })
                .collect(),
        ),
    };
    let mut headers: Vec<String> = headers.into_iter().map(str::to_owned).collect();
    let mut rows = rows;
    if with_namespace {
        headers.insert(0, "NAMESPACE".into());
        for (row, item) in rows.iter_mut().zip(items) {
            row.insert(0, obj::namespace(item).unwrap_or("").to_owned());
        }
    }
    align(&headers, &rows)
}

fn align(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(String::len).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("   ")
            .trim_end()
            .to_owned()
    };
    let mut out = line(headers);
    for row in rows {
        out.push('\n');
        out.push_str(&line(row));
    }
    out
}

fn pairs(v: Option<&Value>) -> String {
    let items: Vec<String> = obj::map_pairs(v).map(|(k, v)| format!("{k}={v}")).collect();
    if items.is_empty() {
        "<none>".into()
    } else {
        items.join(", ")
    }
}

fn quantities(v: Option<&Value>) -> Option<String> {
    let s = pairs(v);
    (s != "<none>").then_some(s)
}

fn container_state(state: &Value, now: DateTime<Utc>) -> String {
    if let Some(w) = state.get("waiting") {
        let reason = str_at(w, &["reason"]).unwrap_or("Waiting");
        return match str_at(w, &["message"]) {
            Some(m) => format!("Waiting ({reason}): {m}"),
            None => format!("Waiting ({reason})"),
        };
    }
    if let Some(r) = state.get("running") {
        return format!("Running since {} ago", age(str_at(r, &["startedAt"]), now));
    }
    if let Some(t) = state.get("terminated") {
        let mut s = format!(
            "Terminated ({}), exit code {}",
            str_at(t, &["reason"]).unwrap_or("Unknown"),
            i64_at(t, &["exitCode"]).map_or("?".into(), |c| c.to_string())
        );
        if let Some(sig) = i64_at(t, &["signal"]) {
            s.push_str(&format!(", signal {sig}"));
        }
        if let Some(f) = str_at(t, &["finishedAt"]) {
            s.push_str(&format!(", finished {} ago", age(Some(f), now)));
        }
        if let Some(m) = str_at(t, &["message"]) {
            s.push_str(&format!(": {m}"));
        }
        return s;
    }
    "<none>".into()
}

fn containers_section(
    spec_containers: &[Value],
    statuses: &[Value],
    now: DateTime<Utc>,
    out: &mut String,
) {
    for c in spec_containers {
        let name = str_at(c, &["name"]).unwrap_or("?");
        out.push_str(&format!("  {name}:\n"));
        out.push_str(&format!(
            "    Image:       {}\n",
            str_at(c, &["image"]).unwrap_or("?")
        ));
        if let Some(cmd) = c.get("command").and_then(Value::as_array) {
            let parts: Vec<&str> = cmd.iter().filter_map(Value::as_str).collect();
            out.push_str(&format!("    Command:     {}\n", parts.join(" ")));
        }
        if let Some(st) = statuses.iter().find(|s| str_at(s, &["name"]) == Some(name)) {
            if let Some(state) = st.get("state") {
                out.push_str(&format!(
                    "    State:       {}\n",
                    container_state(state, now)
                ));
            }
            if let Some(last) = st
                .get("lastState")
                .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
            {
                out.push_str(&format!(
                    "    Last State:  {}\n",
                    container_state(last, now)
                ));
            }
            out.push_str(&format!(
                "    Ready:       {}\n    Restarts:    {}\n",
                st.get("ready").and_then(Value::as_bool).unwrap_or(false),
                i64_at(st, &["restartCount"]).unwrap_or(0)
            ));
        }
        if let Some(q) = quantities(at(c, &["resources", "requests"])) {
            out.push_str(&format!("    Requests:    {q}\n"));
        }
        if let Some(q) = quantities(at(c, &["resources", "limits"])) {
            out.push_str(&format!("    Limits:      {q}\n"));
        }
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
            if let Some(p) = c.get(probe) {
                out.push_str(&format!("    {probe}: {}\n", compact_probe(p)));
            }
        }
        let env: Vec<String> = array(c, &["env"])
            .iter()
            .map(|e| {
                let n = str_at(e, &["name"]).unwrap_or("?");
                if let Some(v) = str_at(e, &["value"]) {
                    format!("{n}={v}")
                } else if let Some(r) = at(e, &["valueFrom", "secretKeyRef"]) {
                    format!(
                        "{n} from Secret {}/{}",
                        str_at(r, &["name"]).unwrap_or("?"),
                        str_at(r, &["key"]).unwrap_or("?")
                    )
                } else if let Some(r) = at(e, &["valueFrom", "configMapKeyRef"]) {
                    format!(
                        "{n} from ConfigMap {}/{}",
                        str_at(r, &["name"]).unwrap_or("?"),
                        str_at(r, &["key"]).unwrap_or("?")
                    )
                } else {
                    format!("{n} (from field)")
                }
            })
            .collect();
        if !env.is_empty() {
            out.push_str(&format!("    Env:         {}\n", env.join("; ")));
        }
        let env_from: Vec<String> = array(c, &["envFrom"])
            .iter()
            .map(|e| {
                if let Some(n) = str_at(e, &["secretRef", "name"]) {
                    format!("Secret {n}")
                } else {
                    format!(
                        "ConfigMap {}",
                        str_at(e, &["configMapRef", "name"]).unwrap_or("?")
                    )
                }
            })
            .collect();
        if !env_from.is_empty() {
            out.push_str(&format!("    EnvFrom:     {}\n", env_from.join(", ")));
        }
    }
}

fn compact_probe(p: &Value) -> String {
    let what = if let Some(h) = p.get("httpGet") {
        format!(
            "http-get {}:{}",
            str_at(h, &["path"]).unwrap_or("/"),
            h.get("port")
                .map(|v| v.to_string().trim_matches('"').to_owned())
                .unwrap_or_default()
        )
    } else if let Some(t) = p.get("tcpSocket") {
        format!(
            "tcp-socket :{}",
            t.get("port").map(|v| v.to_string()).unwrap_or_default()
        )
    } else if p.get("exec").is_some() {
        "exec".to_owned()
    } else {
        "?".to_owned()
    };
    let probe = crate::cluster::observed::Probe::parse(p);
    format!(
        "{what} delay={}s timeout={}s period={}s failure-threshold={}",
        probe.initial_delay, probe.timeout, probe.period, probe.failure_threshold
    )
}

fn conditions(v: &Value) -> Option<String> {
    let items: Vec<String> = array(v, &["status", "conditions"])
        .iter()
        .map(|c| {
            let mut s = format!(
                "{}={}",
                str_at(c, &["type"]).unwrap_or("?"),
                str_at(c, &["status"]).unwrap_or("?")
            );
            if let Some(r) = str_at(c, &["reason"]) {
                s.push_str(&format!(" ({r})"));
            }
            if let Some(m) = str_at(c, &["message"])
                && str_at(c, &["status"]) != Some("True")
            {
                s.push_str(&format!(": {m}"));
            }
            s
        })
        .collect();
    (!items.is_empty()).then(|| items.join("\n               "))
}

/// `kubectl describe`-like text for one object, followed by its events.
pub fn describe(o: &Value, events: &[Value], now: DateTime<Utc>) -> String {
    let kind = obj::kind(o);
    let mut out = String::new();
    out.push_str(&format!("Name:          {}\n", obj::name(o)));
    if let Some(ns) = obj::namespace(o) {
        out.push_str(&format!("Namespace:     {ns}\n"));
    }
    out.push_str(&format!(
        "Kind:          {kind} ({})\n",
        str_at(o, &["apiVersion"]).unwrap_or("?")
    ));
    out.push_str(&format!(
        "Labels:        {}\n",
        pairs(at(o, &["metadata", "labels"]))
    ));
    let annotations: Vec<String> = obj::annotations(o)
        .filter(|(k, _)| *k != "kubectl.kubernetes.io/last-applied-configuration")
        .map(|(k, v)| {
            let v = if v.len() > 120 {
                format!("{}…", &v[..v.floor_char_boundary(120)])
            } else {
                v.to_owned()
            };
            format!("{k}={v}")
        })
        .collect();
    if !annotations.is_empty() {
        out.push_str(&format!("Annotations:   {}\n", annotations.join(", ")));
    }
    for owner in array(o, &["metadata", "ownerReferences"]) {
        out.push_str(&format!(
            "Controlled By: {}/{}\n",
            str_at(owner, &["kind"]).unwrap_or("?"),
            str_at(owner, &["name"]).unwrap_or("?")
        ));
    }
    out.push_str(&format!(
        "Created:       {} ago\n",
        age(str_at(o, &["metadata", "creationTimestamp"]), now)
    ));
    if let Some(d) = str_at(o, &["metadata", "deletionTimestamp"]) {
        out.push_str(&format!("Deleting:      since {} ago\n", age(Some(d), now)));
        let finalizers: Vec<&str> = array(o, &["metadata", "finalizers"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        out.push_str(&format!("Finalizers:    {}\n", finalizers.join(", ")));
    }
    match kind {
        "Pod" => describe_pod(o, now, &mut out),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => {
            describe_workload(o, now, &mut out)
        }
        "Node" => describe_node(o, &mut out),
        _ => {
            for part in ["spec", "status", "data"] {
                if let Some(v) = o.get(part) {
                    out.push_str(&format!(
                        "{}:\n{}",
                        capitalise(part),
                        indent(&to_yaml(v), 2)
                    ));
                }
            }
        }
    }
    if let Some(c) = conditions(o) {
        out.push_str(&format!("Conditions:    {c}\n"));
    }
    out.push_str(&events_section(events, now));
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn indent(s: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    s.lines().map(|l| format!("{pad}{l}\n")).collect()
}

pub fn to_yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|_| v.to_string())
}

fn describe_pod(p: &Value, now: DateTime<Utc>, out: &mut String) {
    out.push_str(&format!("Status:        {}\n", pod_status(p)));
    if let Some(node) = str_at(p, &["spec", "nodeName"]) {
        out.push_str(&format!("Node:          {node}\n"));
    }
    if let Some(m) = str_at(p, &["status", "message"]) {
        out.push_str(&format!("Message:       {m}\n"));
    }
    if let Some(qos) = str_at(p, &["status", "qosClass"]) {
        out.push_str(&format!("QoS Class:     {qos}\n"));
    }
    let init = array(p, &["spec", "initContainers"]);
    if !init.is_empty() {
        out.push_str("Init Containers:\n");
        containers_section(
            init,
            array(p, &["status", "initContainerStatuses"]),
            now,
            out,
        );
    }
    out.push_str("Containers:\n");
    containers_section(
        array(p, &["spec", "containers"]),
        array(p, &["status", "containerStatuses"]),
        now,
        out,
    );
    volumes_section(at(p, &["spec"]), out);
    scheduling_section(at(p, &["spec"]), out);
}

fn volumes_section(spec: Option<&Value>, out: &mut String) {
    let Some(spec) = spec else { return };
    let vols: Vec<String> = array(spec, &["volumes"])
        .iter()
        .filter_map(|v| {
            let name = str_at(v, &["name"])?;
            let src = if let Some(c) = str_at(v, &["persistentVolumeClaim", "claimName"]) {
                format!("PVC {c}")
            } else if let Some(c) = str_at(v, &["configMap", "name"]) {
                format!("ConfigMap {c}")
            } else if let Some(c) = str_at(v, &["secret", "secretName"]) {
                format!("Secret {c}")
            } else if v.get("emptyDir").is_some() {
                "EmptyDir".into()
            } else if v.get("projected").is_some() {
                "Projected".into()
            } else {
                "other".into()
            };
            Some(format!("{name} ({src})"))
        })
        .collect();
    if !vols.is_empty() {
        out.push_str(&format!("Volumes:       {}\n", vols.join(", ")));
    }
}

fn scheduling_section(spec: Option<&Value>, out: &mut String) {
    let Some(spec) = spec else { return };
    if let Some(sel) = spec.get("nodeSelector") {
        out.push_str(&format!("Node-Selectors: {}\n", pairs(Some(sel))));
    }
    let tolerations: Vec<String> = array(spec, &["tolerations"])
        .iter()
        .map(|t| {
            format!(
                "{}{}{}:{}",
                str_at(t, &["key"]).unwrap_or("*"),
                if str_at(t, &["operator"]) == Some("Exists") {
                    ""
                } else {
                    "="
                },
                str_at(t, &["value"]).unwrap_or(""),
                str_at(t, &["effect"]).unwrap_or("*")
            )
        })
        .collect();
    if !tolerations.is_empty() {
        out.push_str(&format!("Tolerations:   {}\n", tolerations.join(", ")));
    }
    if spec.get("affinity").is_some() {
        out.push_str("Affinity:      set (see kubectl_get_yaml)\n");
    }
}

fn describe_workload(w: &Value, now: DateTime<Utc>, out: &mut String) {
    let desired = i64_at(w, &["spec", "replicas"]).unwrap_or(1);
    let num = |k: &str| i64_at(w, &["status", k]).unwrap_or(0);
    out.push_str(&format!(
        "Replicas:      {desired} desired | {} updated | {} ready | {} available | {} unavailable\n",
        num("updatedReplicas"),
        num("readyReplicas"),
        num("availableReplicas"),
        num("unavailableReplicas")
    ));
    if let Some(s) = at(w, &["spec", "selector"]) {
        out.push_str(&format!("Selector:      {}\n", pairs(s.get("matchLabels"))));
    }
    if let Some(st) = str_at(w, &["spec", "strategy", "type"])
        .or_else(|| str_at(w, &["spec", "updateStrategy", "type"]))
    {
        out.push_str(&format!("Strategy:      {st}\n"));
    }
    if let Some(rev) = obj::annotation(w, "deployment.kubernetes.io/revision") {
        out.push_str(&format!("Revision:      {rev}\n"));
    }
    if let Some(g) = i64_at(w, &["metadata", "generation"]) {
        out.push_str(&format!(
            "Generation:    {g} (observed {})\n",
            i64_at(w, &["status", "observedGeneration"]).unwrap_or(0)
        ));
    }
    let template = at(w, &["spec", "template"]);
    if let Some(t) = template {
        out.push_str(&format!(
            "Pod Template labels: {}\n",
            pairs(at(t, &["metadata", "labels"]))
        ));
        out.push_str("Pod Template containers:\n");
        containers_section(array(t, &["spec", "containers"]), &[], now, out);
        volumes_section(t.get("spec"), out);
        scheduling_section(t.get("spec"), out);
    }
    let claims: Vec<&str> = array(w, &["spec", "volumeClaimTemplates"])
        .iter()
        .filter_map(|c| str_at(c, &["metadata", "name"]))
        .collect();
    if !claims.is_empty() {
        out.push_str(&format!("Volume Claims: {}\n", claims.join(", ")));
    }
}

fn describe_node(n: &Value, out: &mut String) {
    let unschedulable = at(n, &["spec", "unschedulable"])
        .and_then(Value::as_bool)
        .unwrap_or(false);
    out.push_str(&format!("Unschedulable: {unschedulable}\n"));
    let taints: Vec<String> = array(n, &["spec", "taints"])
        .iter()
        .map(|t| {
            format!(
                "{}={}:{}",
                str_at(t, &["key"]).unwrap_or("?"),
                str_at(t, &["value"]).unwrap_or(""),
                str_at(t, &["effect"]).unwrap_or("?")
            )
        })
        .collect();
    out.push_str(&format!(
        "Taints:        {}\n",
        if taints.is_empty() {
            "<none>".into()
        } else {
            taints.join(", ")
        }
    ));
    out.push_str(&format!(
        "Capacity:      {}\n",
        pairs(at(n, &["status", "capacity"]))
    ));
    out.push_str(&format!(
        "Allocatable:   {}\n",
        pairs(at(n, &["status", "allocatable"]))
    ));
    if let Some(v) = str_at(n, &["status", "nodeInfo", "kubeletVersion"]) {
        out.push_str(&format!("Kubelet:       {v}\n"));
    }
}

/// When an event last happened: `lastTimestamp`, `eventTime`, or `firstTimestamp`.
pub fn event_time(e: &Value) -> Option<&str> {
    str_at(e, &["lastTimestamp"])
        .or_else(|| str_at(e, &["series", "lastObservedTime"]))
        .or_else(|| str_at(e, &["eventTime"]))
        .or_else(|| str_at(e, &["firstTimestamp"]))
        .or_else(|| str_at(e, &["metadata", "creationTimestamp"]))
}

/// One line per event, oldest first (newest last).
pub fn events_lines(events: &[Value], now: DateTime<Utc>, with_object: bool) -> String {
    let mut out = String::new();
    for e in events {
        let count = i64_at(e, &["count"]).unwrap_or(1);
        let times = if count > 1 {
            format!(" (x{count})")
        } else {
            String::new()
        };
        let object = if with_object {
            format!(
                " {}/{}",
                str_at(e, &["involvedObject", "kind"]).unwrap_or("?"),
                str_at(e, &["involvedObject", "name"]).unwrap_or("?")
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {:<5} {:<7} {}{object}{times}: {}\n",
            age(event_time(e), now),
            str_at(e, &["type"]).unwrap_or("Normal"),
            str_at(e, &["reason"]).unwrap_or("?"),
            str_at(e, &["message"]).unwrap_or("").trim()
        ));
    }
    out
}

fn events_section(events: &[Value], now: DateTime<Utc>) -> String {
    if events.is_empty() {
        return "Events:        <none>\n".into();
    }
    format!(
        "Events (newest last):\n{}",
        events_lines(events, now, false)
    )
}

/// Remove what only costs tokens: managed fields, the last-applied annotation.
pub fn strip_noise(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            ann.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_status_follows_kubectl() {
        let crash = json!({"status": {"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 7, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
        ]}});
        assert_eq!(pod_status(&crash), "CrashLoopBackOff");
        let oom = json!({"status": {"phase": "Running", "containerStatuses": [
            {"name": "a", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}
        ]}});
        assert_eq!(pod_status(&oom), "OOMKilled");
        let term = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}});
        assert_eq!(pod_status(&term), "Terminating");
        assert_eq!(
            pod_status(&json!({"status": {"phase": "Pending"}})),
            "Pending"
        );
    }

    #[test]
    fn ages() {
        let now = DateTime::parse_from_rfc3339("2026-01-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(age(Some("2026-01-01T11:59:30Z"), now), "30s");
        assert_eq!(age(Some("2026-01-01T11:00:00Z"), now), "60m");
        assert_eq!(age(Some("2025-12-30T12:00:00Z"), now), "2d");
    }
}
