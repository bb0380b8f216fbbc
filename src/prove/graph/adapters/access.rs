//! The pods' access to the Kubernetes API: when their failures quote the API server refusing
//! them (`… is forbidden: User "system:serviceaccount:NS:SA" cannot VERB resource "RES" in API
//! group "GROUP" …`), the Roles and ClusterRoles bound to that ServiceAccount, and the one that
//! covers the resource without the verb — a Role narrowed under a running workload — or, when
//! none covers it, the ServiceAccount with the bindings it has.
//!
//! Only the refusal's own words are matched (the ServiceAccount, verb, resource and group it
//! names), against the objects of the cluster; nothing in them is followed as an instruction.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::super::{Ctx, DepKind, Dependency, Read, last_change};
use crate::cluster::obj::{self, array, str_at};
use crate::domain::Target;

/// The API server's refusal of a ServiceAccount, as client libraries quote it.
static FORBIDDEN: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"forbidden: User "system:serviceaccount:([a-z0-9.-]+):([a-z0-9.-]+)" cannot ([a-z*]+) resource "([a-z0-9.*/-]+)" in API group "([a-z0-9.*-]*)""#,
    )
    .ok()
});

/// What the API server refused, and the line that shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    namespace: String,
    account: String,
    verb: String,
    resource: String,
    group: String,
    line: String,
}

impl Refusal {
    /// `jobs.batch`, `configmaps`.
    fn what(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

fn refusal(text: &str) -> Option<Refusal> {
    let re = FORBIDDEN.as_ref()?;
    text.lines().find_map(|l| {
        let c = re.captures(l)?;
        Some(Refusal {
            namespace: c[1].to_owned(),
            account: c[2].to_owned(),
            verb: c[3].to_owned(),
            resource: c[4].to_owned(),
            group: c[5].to_owned(),
            line: l.trim().chars().take(200).collect(),
        })
    })
}

/// Whether `rule` (one of a Role's `rules`) names `group` and `resource`, and which verbs it
/// grants them.
fn covers<'a>(rule: &'a Value, group: &str, resource: &str) -> Option<Vec<&'a str>> {
    let any = |key: &str, want: &str| {
        array(rule, &[key])
            .iter()
            .filter_map(Value::as_str)
            .any(|v| v == "*" || v == want)
    };
    (any("apiGroups", group) && any("resources", resource)).then(|| {
        array(rule, &["verbs"])
            .iter()
            .filter_map(Value::as_str)
            .collect()
    })
}

/// Whether `binding` binds the ServiceAccount `namespace/account`.
fn binds(binding: &Value, namespace: &str, account: &str) -> bool {
    array(binding, &["subjects"]).iter().any(|s| {
        str_at(s, &["kind"]) == Some("ServiceAccount")
            && str_at(s, &["name"]) == Some(account)
            && str_at(s, &["namespace"]).unwrap_or(namespace) == namespace
    })
}

pub(in crate::prove::graph) async fn access(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let Some(r) = refusal(&ctx.failure_text) else {
        return Ok(vec![]);
    };
    // Only the target's own ServiceAccount: a refusal quoted about another is not the pods'.
    if ctx.ns.as_deref() != Some(r.namespace.as_str()) {
        return Ok(vec![]);
    }
    let ns = r.namespace.as_str();
    let mut bindings: Vec<Value> = ctx.list_or_empty("RoleBinding", Some(ns)).await?;
    bindings.extend(ctx.list_or_empty("ClusterRoleBinding", None).await?);
    bindings.retain(|b| binds(b, ns, &r.account));
    let account = format!("ServiceAccount {ns}/{}", r.account);
    let mut narrowed = Vec::new();
    let mut bound = Vec::new();
    for b in &bindings {
        let (Some(kind), Some(name)) = (
            str_at(b, &["roleRef", "kind"]),
            str_at(b, &["roleRef", "name"]),
        ) else {
            continue;
        };
        let role_ns = (kind == "Role").then_some(ns);
        let Some(role) = ctx.get(kind, role_ns, name).await? else {
            continue;
        };
        let role_object = Target::new(kind, name, role_ns.map(str::to_owned));
        let object = Dependency::name_of(&role_object);
        bound.push(format!("{object} (by {} {})", obj::kind(b), obj::name(b)));
        let grants: Vec<Vec<&str>> = array(&role, &["rules"])
            .iter()
            .filter_map(|rule| covers(rule, &r.group, &r.resource))
            .collect();
        if grants
            .iter()
            .any(|verbs| verbs.iter().any(|v| *v == "*" || *v == r.verb))
        {
            // Granted here: the refusal comes from somewhere this cannot see.
            return Ok(vec![]);
        }
        if !grants.is_empty() {
            let verbs: Vec<&str> = grants.into_iter().flatten().collect();
            narrowed.push(
                Dependency::of(
                    DepKind::Access,
                    role_object,
                    format!(
                        "bound to {account} by {} {}: the pods call the API as it",
                        obj::kind(b),
                        obj::name(b)
                    ),
                )
                .unhealthy(
                    format!(
                        "grants {} on {}, not {}: the API server refuses the pods",
                        verbs.join(", "),
                        r.what(),
                        r.verb
                    ),
                    None,
                )
                .changed(last_change(&role))
                .evidence(r.line.clone()),
            );
        }
    }
    if !narrowed.is_empty() {
        return Ok(narrowed);
    }
    // Nothing bound covers the resource at all: the account itself, with what it is bound to.
    let changed = bindings.iter().filter_map(last_change).max_by_key(|c| c.at);
    let mut d = Dependency::new(
        DepKind::Access,
        account,
        "the pods call the API as it".to_owned(),
    )
    .about(Target::new(
        "ServiceAccount",
        r.account.as_str(),
        Some(ns.to_owned()),
    ))
    .unhealthy(
        format!(
            "no Role or ClusterRole bound to it grants {} on {}",
            r.verb,
            r.what()
        ),
        None,
    )
    .changed(changed)
    .evidence(r.line.clone());
    if !bound.is_empty() {
        d = d.evidence(format!("bound: {}", bound.join(", ")));
    }
    Ok(vec![d])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LINE: &str = r#"2026-11-27T02:41:17Z FATAL permission check failed: jobs.batch is forbidden: User "system:serviceaccount:batch:dispatcher" cannot create resource "jobs" in API group "batch" in the namespace "batch""#;

    #[test]
    fn the_refusal_names_account_verb_resource_and_group() {
        let r = refusal(&format!("starting\n{LINE}\n")).unwrap();
        assert_eq!(
            (r.namespace.as_str(), r.account.as_str(), r.verb.as_str()),
            ("batch", "dispatcher", "create")
        );
        assert_eq!(r.what(), "jobs.batch");
        let core = r#"configmaps is forbidden: User "system:serviceaccount:a:b" cannot list resource "configmaps" in API group "" in the namespace "a""#;
        assert_eq!(refusal(core).unwrap().what(), "configmaps");
        assert!(refusal("connection refused").is_none());
        // A user that is not a ServiceAccount is not the pods'.
        assert!(
            refusal(
                r#"forbidden: User "alice" cannot create resource "jobs" in API group "batch""#
            )
            .is_none()
        );
    }

    #[test]
    fn a_rule_covers_a_resource_with_its_verbs() {
        let rule = json!({"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list"]});
        assert_eq!(covers(&rule, "batch", "jobs"), Some(vec!["get", "list"]));
        assert_eq!(covers(&rule, "", "jobs"), None);
        assert_eq!(covers(&rule, "batch", "cronjobs"), None);
        let all = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert_eq!(covers(&all, "batch", "jobs"), Some(vec!["*"]));
    }

    #[test]
    fn a_binding_binds_its_service_accounts() {
        let b = json!({"subjects": [{"kind": "ServiceAccount", "name": "dispatcher", "namespace": "batch"}]});
        assert!(binds(&b, "batch", "dispatcher"));
        assert!(!binds(&b, "other", "dispatcher"));
        assert!(!binds(&b, "batch", "runner"));
    }
}
