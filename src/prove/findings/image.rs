//! A tag that moved under a template: the same template, another image digest.

use std::collections::BTreeSet;

use crate::cluster::observed::Pod;

/// Whether `pod` runs, for some container, another image digest than the one its `siblings`
/// that show its template runs ([`Pod::template_runs_in`]) all run for it: the tag the template
/// names was re-pushed after they pulled it, and a replacement pulls what it points at now. One
/// line saying so. Siblings that differ among themselves (nodes of several architectures
/// pulling a multi-arch tag) say nothing.
pub fn moved_image(pod: &Pod, siblings: &[&Pod]) -> Option<String> {
    let same: Vec<&&Pod> = siblings
        .iter()
        .filter(|p| pod.template_runs_in(p))
        .collect();
    pod.containers.iter().filter(|c| !c.init).find_map(|c| {
        let mine = c.digest.as_ref()?;
        let theirs: BTreeSet<&String> = same
            .iter()
            .flat_map(|p| p.containers.iter())
            .filter(|o| o.name == c.name)
            .filter_map(|o| o.digest.as_ref())
            .collect();
        (theirs.len() == 1 && !theirs.contains(mine)).then(|| {
            format!(
                "container {} of pod {} runs {} as {}, its ready siblings of the same template as {}: the tag was re-pushed, and a replacement pulls what it points at now",
                c.name,
                pod.name,
                c.image,
                short_digest(mine),
                theirs.iter().map(|d| short_digest(d)).collect::<Vec<_>>().join(", ")
            )
        })
    })
}

/// `sha256:9f3c2d1b7a6e…`: enough of a digest to tell it apart.
fn short_digest(d: &str) -> String {
    let cut: String = d.chars().take(19).collect();
    if d.chars().count() > 19 {
        format!("{cut}…")
    } else {
        cut
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A serving pod of template `hash` whose container runs `digest`.
    fn pod(name: &str, hash: &str, digest: &str) -> Pod {
        Pod::parse(&json!({
            "metadata": {"name": name, "labels": {"pod-template-hash": hash}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "app", "image": "idx:latest", "ready": true,
                "imageID": format!("registry/idx@sha256:{digest}")}]},
        }))
    }

    #[test]
    fn a_pod_pulling_another_digest_than_its_siblings_of_the_same_template_moved() {
        let (a, b, new) = (
            pod("a", "h1", "41ab"),
            pod("b", "h1", "41ab"),
            pod("c", "h1", "9f3c"),
        );
        let moved = moved_image(&new, &[&a, &b]).unwrap_or_default();
        assert!(
            moved.contains("sha256:9f3c") && moved.contains("sha256:41ab"),
            "{moved}"
        );
        // Siblings of another template, or siblings that disagree: nothing to say.
        assert_eq!(moved_image(&new, &[&pod("a", "h2", "41ab")]), None);
        assert_eq!(moved_image(&new, &[&a, &pod("b", "h1", "77ee")]), None);
        assert_eq!(moved_image(&a, &[&b]), None);
    }
}
