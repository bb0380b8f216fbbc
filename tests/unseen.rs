//! The unseen incidents (tests/unseen/, docs/unseen-incidents.md): an examiner's set of
//! incident classes the investigator was not written against, each captured from the real API
//! server tier with an expected.json committed before it ran. This test scores the current
//! `kubemedic` binary with scripts/score-unseen and holds it to a ratchet: raise `MIN_RIGHT`
//! (and lower `MAX_HARMFUL`) when the investigator gets better, never the other way round.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use serde_json::Value;

/// Incidents the current investigator gets right (see docs/unseen-incidents.md).
const MIN_RIGHT: usize = 54;
/// Incidents with a right action where it is proposed and its proof holds (recall, issue 38).
const MIN_PROVEN: usize = 14;
/// Incidents whose reason names the culprit the examiner expects.
const MIN_NAMED: usize = 55;
/// Incidents where it currently does harm (a forbidden action, a live problem closed, or an
/// auto-approved action where none is right).
const MAX_HARMFUL: usize = 0;

macro_rules! names {
    ($($test:ident => $name:literal),* $(,)?) => {
        const NAMES: &[&str] = &[$($name),*];
    };
}

common::unseen::for_each_unseen!(names);

#[test]
fn every_unseen_incident_is_complete_and_listed() {
    let root = common::unseen::dir("");
    let mut folders: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    folders.sort();
    let mut listed: Vec<String> = NAMES.iter().map(|n| (*n).to_owned()).collect();
    listed.sort();
    assert_eq!(folders, listed, "tests/unseen folders vs for_each_unseen!");
    let staged: Vec<&str> = common::unseen::all().iter().map(|i| i.name).collect();
    for n in NAMES {
        assert!(
            staged.contains(n),
            "{n} has no staging in common::unseen::all()"
        );
        let dir = common::unseen::dir(n);
        for file in ["expected.json", "alert.json", "snapshot.yaml"] {
            assert!(dir.join(file).is_file(), "{n}/{file} missing");
        }
        let want: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap())
                .unwrap_or_else(|e| panic!("{n}/expected.json: {e}"));
        for key in common::unseen::EXPECTED_KEYS {
            assert!(want.get(key).is_some(), "{n}/expected.json lacks {key}");
        }
        assert!(want["target"]["kind"].is_string(), "{n}: target.kind");
        let alert: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("alert.json")).unwrap())
                .unwrap_or_else(|e| panic!("{n}/alert.json: {e}"));
        assert_eq!(alert["alerts"].as_array().map(Vec::len), Some(1), "{n}");
        kubemedic::cluster::SnapshotCluster::load(&dir.join("snapshot.yaml"))
            .unwrap_or_else(|e| panic!("{n}/snapshot.yaml: {e}"));
    }
}

#[test]
#[allow(clippy::absurd_extreme_comparisons)] // a ratchet at 0 harmful is the goal, not a mistake
fn the_investigator_holds_the_unseen_ratchet() {
    let (table, totals) =
        common::unseen::score_set(env!("CARGO_BIN_EXE_kubemedic"), "tests/unseen");
    let field = |key: &str| -> usize {
        *totals
            .get(key)
            .unwrap_or_else(|| panic!("{key} missing from the TOTAL line\n{table}"))
    };
    let (right, harmful, incidents) = (field("right"), field("harmful"), field("incidents"));
    let (proven, named) = (field("proven"), field("named"));
    assert_eq!(incidents, NAMES.len(), "{table}");
    assert!(
        right >= MIN_RIGHT && harmful <= MAX_HARMFUL,
        "unseen incidents: {right} right (ratchet {MIN_RIGHT}), {harmful} harmful (ratchet {MAX_HARMFUL})\n{table}"
    );
    assert!(
        proven >= MIN_PROVEN && named >= MIN_NAMED,
        "unseen incidents: right action proven on {proven} (ratchet {MIN_PROVEN}), culprit named on {named} (ratchet {MIN_NAMED})\n{table}"
    );
    // Better than the ratchet: say so, so that it is raised.
    if right > MIN_RIGHT || harmful < MAX_HARMFUL || proven > MIN_PROVEN || named > MIN_NAMED {
        eprintln!(
            "unseen incidents: {right} right, {harmful} harmful, {proven} proven, {named} named — raise the ratchets in tests/unseen.rs\n{table}"
        );
    }
}
