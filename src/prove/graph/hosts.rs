//! The hosts and Services the failing containers' logs and events name (`ledger-db:5432`,
//! `http://payments.shop.svc:8080`, `lookup rabbitmq on 10.0.0.10:53`), matched against the
//! Services of the cluster, with their endpoints and the workloads behind them (or the workload a
//! bare name is, when no Service has it); and cluster DNS when the failures are name lookups.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{Change, Ctx, DepKind, Dependency, Read, event_time, last_change, time};
use crate::cluster::ListQuery;
use crate::cluster::obj::{self, array, at, i64_at, str_at};
use crate::cluster::observed;
use crate::cluster::selector::Selector;
use crate::domain::Target;

/// How soon after a workload's creation its first scale-up is part of the creation (the
/// controller scales the new ReplicaSet up within seconds; a slow admission within minutes),
/// not a change to it.
const FIRST_SCALE_UP_MINUTES: i64 = 2;

/// `host:port`, a URL's host, or a host after a word that introduces one.
static HOSTS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)
        (?:[a-z][a-z0-9+.-]*://(?:[^@/\s]*@)?(?P<url>[a-z0-9][a-z0-9.-]*))
        | \b(?P<hp>[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)*):(?P<port>\d{2,5})\b
        | (?:\b(?:lookup|host|connect\s+to|connecting\s+to|dial(?:ing)?|resolve|reach|upstream|server)\s+(?:tcp\s+)?)(?P<kw>[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)+|[a-z0-9]+(?:-[a-z0-9]+)+)
        ",
    )
    .ok()
});

/// Words around a name lookup that failed.
const DNS_FAILURES: &[&str] = &[
    "no such host",
    "server misbehaving",
    "temporary failure in name resolution",
    "could not resolve",
    "name or service not known",
    "getaddrinfo",
    "nxdomain",
    "unknown host",
];

/// Whether a name lookup failed: a resolver's own words, or a line about a lookup (or port
/// 53) that ends in an error.
fn lookup_failed(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    DNS_FAILURES.iter().any(|w| lower.contains(w))
        || lower.lines().any(|l| {
            (l.contains("lookup ") || l.contains(":53:") || l.contains(":53 "))
                && ["refused", "timeout", "timed out", "unreachable", "reset"]
                    .iter()
                    .any(|e| l.contains(e))
        })
}

/// File names in stack traces and log callers (`relay.go:88`) are not hosts.
const SOURCE_FILES: &[&str] = &[
    "go", "py", "js", "ts", "java", "rs", "rb", "c", "cc", "cpp", "h", "cs", "php", "kt", "scala",
    "ex", "exs", "erl", "clj", "swift", "lua", "pl", "sh",
];

/// A name as the logs spell it, split into (service, namespace).
fn service_of(host: &str, own_ns: Option<&str>) -> Option<(String, Option<String>)> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.parse::<std::net::Ipv4Addr>().is_ok() || host == "localhost" {
        return None;
    }
    let parts: Vec<&str> = host.split('.').collect();
    match parts.as_slice() {
        [one] => Some(((*one).to_owned(), own_ns.map(str::to_owned))),
        [svc, ns] => Some(((*svc).to_owned(), Some((*ns).to_owned()))),
        [svc, ns, "svc", ..] => Some(((*svc).to_owned(), Some((*ns).to_owned()))),
        // A pod of a headless Service: `pod.service.namespace.svc…`.
        [_pod, svc, ns, "svc", ..] => Some(((*svc).to_owned(), Some((*ns).to_owned()))),
        // A fully qualified external name: not a Service of this cluster.
        _ => None,
    }
}

/// The hosts named in the failures' text, in order.
fn named(text: &str) -> Vec<(String, Option<String>)> {
    let Some(re) = HOSTS.as_ref() else {
        return vec![];
    };
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for c in re.captures_iter(text) {
        let host = c
            .name("url")
            .or_else(|| c.name("hp"))
            .or_else(|| c.name("kw"))
            .map(|m| m.as_str().to_owned());
        let port = c.name("port").map(|m| m.as_str().to_owned());
        if let Some(h) = host
            && !h
                .rsplit_once('.')
                .is_some_and(|(_, ext)| SOURCE_FILES.contains(&ext))
            && !out.iter().any(|(x, _)| *x == h)
        {
            out.push((h, port));
        }
    }
    out
}

/// The workload (Deployment or StatefulSet) whose pods a selector picks, in `ns`: one whose
/// pod template carries the labels, else the owner of a pod that carries them now. A selector
/// on a label set at run time (Patroni's and the Redis operators' `role=master`, put on the
/// primary's pod by the database itself) matches no template, only pods.
async fn behind(ctx: &Ctx, ns: &str, sel: &Selector) -> Read<Option<Value>> {
    for kind in ["Deployment", "StatefulSet"] {
        for w in ctx.list_or_empty(kind, Some(ns)).await? {
            if sel.matches_value(at(&w, &["spec", "template", "metadata", "labels"])) {
                return Ok(Some(w));
            }
        }
    }
    if sel.is_empty() {
        return Ok(None);
    }
    let pods = match ctx
        .list("Pod", Some(ns), &ListQuery::labels(sel.to_query()))
        .await
    {
        Ok(p) => p,
        Err(e) if e.is_unreachable() => return Err(e),
        Err(_) => return Ok(None),
    };
    for pod in &pods {
        let owner = match obj::controller(pod) {
            Some(("StatefulSet", name)) => ctx.get("StatefulSet", Some(ns), name).await?,
            Some(("ReplicaSet", rs)) => match ctx.get("ReplicaSet", Some(ns), rs).await? {
                Some(rs) => match obj::controller(&rs) {
                    Some(("Deployment", name)) => ctx.get("Deployment", Some(ns), name).await?,
                    _ => None,
                },
                None => None,
            },
            _ => None,
        };
        if owner.is_some() {
            return Ok(owner);
        }
    }
    Ok(None)
}

/// Why a workload with fewer replicas ready than it wants is unhealthy, if it is: a pod of it
/// fails (`observed::Pod::failure`, having heeded its warnings: a pod stuck terminating
/// included), or it has fewer pods than it wants and its controller says it cannot make them (a
/// `FailedCreate` about it or its ReplicaSets since its newest pod was made). A pod within its
/// start-up allowance with nothing said against it is starting, and a pod on its way out is
/// being replaced (a StatefulSet makes the next only once it is gone, an OrderedReady one its
/// pods one after another), as the rules and the proofs read them: a client's restart is not
/// refused for a backend nothing in which fails. Pods that cannot be read, or events that
/// cannot when a pod is still starting: unhealthy (fail closed).
async fn short_of_replicas(
    ctx: &Ctx,
    w: &Value,
    events: Option<&[Value]>,
    (want, ready): (i64, i64),
) -> Read<Option<String>> {
    let (kind, name) = (obj::kind(w), obj::name(w));
    let short = format!("{kind} {name} has {ready} of {want} replicas ready");
    let Some(sel) = observed::pod_selector(w) else {
        return Ok(Some(short));
    };
    let ns = obj::namespace(w).unwrap_or_default();
    let pods = match ctx
        .list("Pod", Some(ns), &ListQuery::labels(sel.to_query()))
        .await
    {
        Ok(p) => p,
        Err(e) if e.is_unreachable() => return Err(e),
        Err(_) => return Ok(Some(short)),
    };
    let warnings: Vec<observed::Event> = events
        .unwrap_or_default()
        .iter()
        .filter(|e| str_at(e, &["type"]) == Some("Warning"))
        .map(observed::Event::parse)
        .collect();
    // Its own pods only: a Job's pod with the same labels is not why it is short.
    let own: Vec<observed::Pod> = pods
        .iter()
        .map(|p| observed::Pod::at(p, ctx.now))
        .filter(|p| p.selected_by(kind, name) && !p.ended())
        .map(|p| p.heed(&warnings))
        .collect();
    if let Some((p, f)) = own.iter().find_map(|p| Some((p, p.failure()?))) {
        return Ok(Some(format!("{short}: pod {} {}", p.name, f.line)));
    }
    if events.is_none()
        && let Some(p) = own.iter().find(|p| p.placed_not_started())
    {
        return Ok(Some(format!(
            "{short}: pod {} is starting and the events that would say whether it can were not read",
            p.name
        )));
    }
    let names: Vec<&str> = own.iter().map(|p| p.name.as_str()).collect();
    let newest = own.iter().filter_map(|p| p.created).max();
    let cannot_make = warnings
        .iter()
        .filter(|e| e.reason == "FailedCreate" && observed::about_workload(&e.name, name, &names))
        .filter(|e| match (e.last, newest) {
            (Some(t), Some(n)) => t >= n,
            _ => true,
        })
        .max_by_key(|e| e.last);
    let present = i64::try_from(own.len()).unwrap_or(i64::MAX);
    Ok(match cannot_make {
        Some(e) if present < want => Some(format!(
            "{short}: {present} of its pods exist, and it cannot create more: {}",
            e.message.chars().take(160).collect::<String>()
        )),
        _ => None,
    })
}

/// What a workload behind a Service shows: unhealthy how, since when, what changed.
async fn workload_state(
    ctx: &Ctx,
    w: &Value,
) -> Read<(Option<String>, Option<Change>, Vec<String>)> {
    let kind = obj::kind(w);
    let name = obj::name(w);
    let ns = obj::namespace(w).unwrap_or_default();
    let workload = observed::Workload::parse(w);
    let (want, ready) = (workload.wanted(), workload.ready_replicas);
    let created = time(w, &["metadata", "creationTimestamp"]);
    let evidence = Vec::new();
    // Its namespace's events: its pods' warnings (whether a starting pod fails), its scaling.
    // `None` when they could not be read.
    let events = if Some(ns) == ctx.ns.as_deref() {
        Some(ctx.all_events.clone())
    } else {
        match ctx.list("Event", Some(ns), &ListQuery::default()).await {
            Ok(e) => Some(e),
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => None,
        }
    };
    let unhealthy = if want == 0 {
        Some(format!("{kind} {name} is scaled to 0 replicas"))
    } else if ready < want {
        short_of_replicas(ctx, w, events.as_deref(), (want, ready)).await?
    } else {
        // All ready, but pods still changing: its clients' connections move with them, and a
        // restart of a client now may reconnect to pods on their way out.
        workload
            .rollout_in_progress()
            .map(|why| format!("{kind} {name} is rolling out: {why}"))
    };
    // The latest scaling of it, from its controller's events; else its own last write.
    let scaled = events
        .iter()
        .flatten()
        .filter(|e| {
            // A Deployment's scaling, a StatefulSet's pods deleted (scaled down): not the
            // routine creation of pods.
            observed::event_subject(e).1 == name
                && matches!(
                    (kind, str_at(e, &["reason"])),
                    ("Deployment", Some("ScalingReplicaSet"))
                        | ("StatefulSet", Some("SuccessfulDelete"))
                )
        })
        // Its first scale-up, right after it was created, is no change to anything.
        .filter(|e| {
            let first_scale_up = str_at(e, &["message"]).is_some_and(|m| m.starts_with("Scaled up"))
                && matches!((event_time(e), created), (Some(t), Some(c)) if t <= c + chrono::Duration::minutes(FIRST_SCALE_UP_MINUTES));
            !first_scale_up
        })
        .filter_map(|e| Some((event_time(e)?, str_at(e, &["message"]).unwrap_or(""))))
        // The latest; within the same second, the one that left it as it is now.
        .max_by_key(|(t, m)| (*t, m.ends_with(&format!(" to {want}"))));
    let change = match scaled {
        Some((t, m)) => Some(Change {
            at: t,
            what: format!("{kind} {name}: {}", m.chars().take(120).collect::<String>()),
        }),
        // An edit, not its creation: a workload created recently is no change to what its
        // clients had.
        None => last_change(w).filter(|c| !c.is_creation()).map(|c| Change {
            what: format!("{kind} {name} {}", c.what),
            ..c
        }),
    };
    Ok((unhealthy, change, evidence))
}

/// Whether `word` appears in `text` as a whole name (not inside a longer one).
fn mentions(text: &str, word: &str) -> bool {
    let name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(name) && !after.is_some_and(name)
    })
}

/// The Deployment or StatefulSet `name` in `ns`, named by the failures without a Service in
/// between, with what it shows: scaled to zero, replicas not ready, what changed.
async fn named_workload(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    relation: &str,
) -> Read<Option<Dependency>> {
    for kind in ["Deployment", "StatefulSet"] {
        let Some(w) = ctx.get(kind, Some(ns), name).await? else {
            continue;
        };
        let (unhealthy, change, evidence) = workload_state(ctx, &w).await?;
        let mut d = Dependency::of(
            DepKind::Host,
            Target::new(kind, name, Some(ns.to_owned())),
            relation,
        );
        if let Some(u) = unhealthy {
            // "Deployment x is scaled to 0 replicas" about Deployment x: the object is said.
            let prefix = format!("{kind} {name} ");
            let u = u.strip_prefix(&prefix).map(str::to_owned).unwrap_or(u);
            d = d.unhealthy(u, None);
        }
        d.changed = change;
        d.evidence.extend(evidence);
        return Ok(Some(d));
    }
    Ok(None)
}

/// "named in the failures of TARGET", with the first line that names `word`.
fn named_in_failures(ctx: &Ctx, word: &str) -> String {
    match ctx.line_with(word) {
        Some(line) if !line.is_empty() => {
            format!("named in the failures of {}: \"{line}\"", ctx.target.name)
        }
        _ => format!("named in the failures of {}", ctx.target.name),
    }
}

/// Follow the hosts the failures name.
pub(super) async fn follow(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let mut out = Vec::new();
    let mut hosts = named(&ctx.failure_text);
    // The namespace's Services the failures mention by name ("inventory unreachable").
    if !ctx.failure_text.is_empty()
        && let Some(ns) = ctx.ns.as_deref()
    {
        let lower = ctx.failure_text.to_ascii_lowercase();
        for s in ctx.list_or_empty("Service", Some(ns)).await? {
            let name = obj::name(&s).to_ascii_lowercase();
            if name.len() >= 3
                && mentions(&lower, &name)
                && !hosts
                    .iter()
                    .any(|(h, _)| h.split('.').next() == Some(name.as_str()))
            {
                hosts.push((name, None));
            }
        }
    }
    let own_ns = ctx.ns.as_deref();
    let mut seen = BTreeSet::new();
    let own_name = ctx.target.name.to_ascii_lowercase();
    for (host, port) in hosts.into_iter().take(8) {
        let Some((svc, ns)) = service_of(&host, own_ns) else {
            continue;
        };
        let Some(ns) = ns else { continue };
        if svc == own_name || !seen.insert((svc.clone(), ns.clone())) {
            continue;
        }
        let relation = named_in_failures(ctx, &host);
        let Some(s) = ctx.get("Service", Some(&ns), &svc).await? else {
            // A bare name that is no Service ("upstream telemetry-broker unavailable") may be a
            // workload reached without one: a node-local agent, a shared socket or file.
            if port.is_none()
                && !host.contains('.')
                && let Some(d) = named_workload(ctx, &ns, &svc, &relation).await?
            {
                out.push(d);
                continue;
            }
            // A name that is no Service here: an external host, or one that is gone. Only a
            // dotted service form (or a host:port) is worth saying so.
            if port.is_some() || host.contains('.') {
                let mut d = Dependency::new(
                    DepKind::Host,
                    format!("host {host}"),
                    relation,
                )
                .evidence(format!("no Service {svc} in namespace {ns}: an external host, another namespace, or one that is gone"));
                if ctx.says(DNS_FAILURES) {
                    d = d.unhealthy("cannot be resolved", None);
                }
                out.push(d);
            }
            continue;
        };
        let mut d = Dependency::of(
            DepKind::Host,
            Target::new("Service", svc.as_str(), Some(ns.to_owned())),
            relation,
        );
        let sel = observed::Service::parse(&s).label_selector();
        // Endpoints: ready addresses, and when they last changed.
        let ep = ctx.get("Endpoints", Some(&ns), &svc).await?;
        let observed::Endpoints { ready, not_ready } = observed::Endpoints::parse(ep.as_ref());
        // The endpoints controller's trigger time, or its last write when that is later (a
        // controller that recorded no trigger time for the change, or kept an old one).
        let ep_since = ep.as_ref().and_then(|e| {
            let trigger = time(
                e,
                &[
                    "metadata",
                    "annotations",
                    "endpoints.kubernetes.io/last-change-trigger-time",
                ],
            );
            let written = array(e, &["metadata", "managedFields"])
                .iter()
                .filter_map(|f| time(f, &["time"]))
                .max();
            trigger.into_iter().chain(written).max()
        });
        match &sel {
            None => {
                d = d.evidence(format!("Service {svc} has no selector (its endpoints are managed by hand or it points outside)"));
                if ready == 0 {
                    d = d.unhealthy("has no ready endpoints", ep_since);
                }
            }
            Some(sel) => {
                if ready == 0 {
                    d = d.unhealthy(
                        if not_ready > 0 {
                            format!("has no ready endpoints ({not_ready} not ready)")
                        } else {
                            "has no ready endpoints".to_owned()
                        },
                        ep_since,
                    );
                }
                if let Some(w) = behind(ctx, &ns, sel).await? {
                    let (unhealthy, change, ev) = workload_state(ctx, &w).await?;
                    if let Some(u) = unhealthy {
                        d.unhealthy = Some(match d.unhealthy.take() {
                            Some(prev) => format!("{prev}: {u}"),
                            None => u,
                        });
                        d.since = d.since.or(ep_since);
                    }
                    d.changed = change;
                    d.evidence.extend(ev);
                } else if ready == 0 {
                    d = d.evidence(format!(
                        "its selector {} matches no Deployment or StatefulSet in {ns}",
                        sel.to_query()
                    ));
                }
                // A targetPort no container of the backends declares.
                if ready > 0
                    && let Some(problem) = port_mismatch(ctx, &s, &ns, sel).await?
                {
                    d = d.unhealthy(problem, None);
                }
            }
        }
        if d.changed.is_none() {
            d.changed = last_change(&s).filter(|c| !c.is_creation());
        }
        // Healthy, but its endpoints moved (a failover, a rollout of the backend): when.
        if d.changed.is_none()
            && d.unhealthy.is_none()
            && let Some(t) = ep_since
        {
            d.changed = Some(Change {
                at: t,
                what: format!("its endpoints changed ({ready} ready now)"),
            });
        }
        out.push(d);
    }
    if lookup_failed(&ctx.failure_text) {
        out.extend(dns(ctx).await?);
    }
    Ok(out)
}

/// A Service port whose targetPort no container of its backends declares, when they declare
/// ports at all.
async fn port_mismatch(ctx: &Ctx, s: &Value, ns: &str, sel: &Selector) -> Read<Option<String>> {
    let pods = ctx
        .list("Pod", Some(ns), &ListQuery::labels(sel.to_query()))
        .await
        .unwrap_or_default();
    let Some(p) = pods.first() else {
        return Ok(None);
    };
    let declared: Vec<(Option<String>, i64)> = array(p, &["spec", "containers"])
        .iter()
        .flat_map(|c| array(c, &["ports"]).iter())
        .filter_map(|port| {
            Some((
                str_at(port, &["name"]).map(str::to_owned),
                i64_at(port, &["containerPort"])?,
            ))
        })
        .collect();
    if declared.is_empty() {
        return Ok(None);
    }
    for sp in array(s, &["spec", "ports"]) {
        let target = at(sp, &["targetPort"]).or_else(|| at(sp, &["port"]));
        let ok = match target {
            Some(Value::Number(n)) => declared.iter().any(|(_, p)| Some(*p) == n.as_i64()),
            Some(Value::String(name)) => declared.iter().any(|(n, _)| n.as_deref() == Some(name)),
            _ => true,
        };
        if !ok {
            let listen: Vec<String> = declared.iter().map(|(_, p)| p.to_string()).collect();
            return Ok(Some(format!(
                "sends port {} to targetPort {}, which no container of its pods declares (they declare {})",
                i64_at(sp, &["port"]).unwrap_or(0),
                target
                    .map(|t| t.to_string().trim_matches('"').to_owned())
                    .unwrap_or_default(),
                listen.join(", ")
            )));
        }
    }
    Ok(None)
}

/// Cluster DNS: the kube-dns Service in kube-system, its endpoints and the workload behind it.
async fn dns(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let ns = "kube-system";
    let mut svc = None;
    for name in ["kube-dns", "coredns"] {
        if let Some(s) = ctx.get("Service", Some(ns), name).await? {
            svc = Some(s);
            break;
        }
    }
    let Some(s) = svc else {
        return Ok(vec![]);
    };
    let name = obj::name(&s).to_owned();
    let line = ctx
        .line_with("no such host")
        .or_else(|| ctx.line_with("lookup"))
        .unwrap_or_default();
    let mut d = Dependency::new(
        DepKind::Dns,
        format!("Service {ns}/{name} (cluster DNS)"),
        format!("resolves the names the failures could not look up: \"{line}\""),
    )
    .about(Target::new("Service", name.as_str(), Some(ns.to_owned())));
    let ep = ctx.get("Endpoints", Some(ns), &name).await?;
    let ready = observed::Endpoints::parse(ep.as_ref()).ready;
    if ready == 0 {
        d = d.unhealthy(
            "has no ready endpoints",
            ep.as_ref().and_then(|e| {
                time(
                    e,
                    &[
                        "metadata",
                        "annotations",
                        "endpoints.kubernetes.io/last-change-trigger-time",
                    ],
                )
            }),
        );
    }
    if let Some(sel) = observed::Service::parse(&s).label_selector()
        && let Some(w) = behind(ctx, ns, &sel).await?
    {
        let (unhealthy, change, ev) = workload_state(ctx, &w).await?;
        if let Some(u) = unhealthy {
            d.unhealthy = Some(match d.unhealthy.take() {
                Some(prev) => format!("{prev}: {u}"),
                None => u,
            });
        }
        d.changed = change;
        d.evidence.extend(ev);
    }
    Ok(vec![d])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_from_urls_host_ports_and_lookups() {
        let text = "fatal: cannot connect to database ledger-db:5432: connection refused\n\
            Get \"http://payments.shop.svc.cluster.local:8080/charge\": dial tcp: lookup payments.shop.svc.cluster.local on 10.0.0.10:53: no such host\n\
            waiting for rabbitmq to be ready\n\
            upstream settlement-api: x509: certificate has expired";
        let hosts: Vec<String> = named(text).into_iter().map(|(h, _)| h).collect();
        assert!(hosts.contains(&"ledger-db".to_owned()), "{hosts:?}");
        assert!(
            hosts.contains(&"payments.shop.svc.cluster.local".to_owned()),
            "{hosts:?}"
        );
        assert!(hosts.contains(&"settlement-api".to_owned()), "{hosts:?}");
        assert_eq!(
            service_of("payments.shop.svc.cluster.local", Some("web")),
            Some(("payments".into(), Some("shop".into())))
        );
        assert_eq!(
            service_of("ledger-db", Some("ledger")),
            Some(("ledger-db".into(), Some("ledger".into())))
        );
        assert_eq!(service_of("api.stripe.com", Some("x")), None);
        assert_eq!(service_of("10.0.0.10", Some("x")), None);
    }
}
