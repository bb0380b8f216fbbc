//! The tamper-evident audit trail: every audit event carries a keyed hash (HMAC-SHA256) of its
//! content and of the previous event's hash, so editing, deleting or inserting a row anywhere
//! breaks the chain from that row on, and only the holder of the key can forge a chain.
//!
//! The key lives outside the database (a file in the data directory, or a secret given by
//! configuration): someone who can write the database cannot re-sign what they changed. One
//! chain runs through the whole table in id order; writers extend it one transaction at a time
//! (SQLite has one writer; Postgres takes an advisory transaction lock first).
//!
//! What is hashed is what the database gives back: the message and payload as stored (U+0000
//! replaced), the time in microseconds, the payload in a canonical JSON form (keys sorted,
//! numbers as serde writes them), so a JSONB round trip does not change the hash. Numbers read
//! back parse to the very f64 that was written (serde_json's `float_roundtrip`; without it a
//! tenth of computed scores came back one ULP off and their events read as edited).

use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// The smallest key accepted (bytes).
pub const MIN_KEY_BYTES: usize = 32;

/// The key the daemon signs the audit trail with, and the retired keys it still checks older
/// events with (a keyring: the first key given signs, the others were rotated out). Never
/// printed.
#[derive(Clone)]
pub struct AuditKey {
    key: Vec<u8>,
    id: String,
    retired: Vec<AuditKey>,
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditKey(id {}", self.id)?;
        if !self.retired.is_empty() {
            write!(f, ", retired {}", self.retired_ids().join(", "))?;
        }
        write!(f, ")")
    }
}

/// The kind of the audit event that hands the chain from one key to the next. It is signed
/// with the key being retired, and its payload names both (`old_key_id`, `new_key_id`).
pub const KEY_ROTATED: &str = "key_rotated";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the audit key must be at least {MIN_KEY_BYTES} bytes, hex-encoded ({digits} hex digits); got {0} bytes", digits = MIN_KEY_BYTES * 2)]
    TooShort(usize),
    #[error("the audit key is not hex: {0}")]
    NotHex(String),
    #[error("cannot read or create the audit key file {path}: {error}")]
    File { path: String, error: std::io::Error },
    #[error("no audit key given")]
    Empty,
}

impl AuditKey {
    /// A key from its bytes (at least [`MIN_KEY_BYTES`]).
    pub fn from_bytes(key: Vec<u8>) -> Result<Self, KeyError> {
        if key.len() < MIN_KEY_BYTES {
            return Err(KeyError::TooShort(key.len()));
        }
        Ok(Self {
            id: key_id(&key),
            key,
            retired: Vec::new(),
        })
    }

    /// A keyring from hex: keys separated by commas, spaces or newlines, the first one signing,
    /// the others retired (kept to check the events they signed). Lines starting with `#` are
    /// comments. A key given twice counts once.
    pub fn from_hex(text: &str) -> Result<Self, KeyError> {
        let mut keys = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .flat_map(|l| l.split(|c: char| c == ',' || c.is_whitespace()))
            .filter(|k| !k.is_empty())
            .map(|k| {
                let bytes = hex::decode(k).map_err(|e| KeyError::NotHex(e.to_string()))?;
                Self::from_bytes(bytes)
            });
        let mut signing = keys.next().ok_or(KeyError::Empty)??;
        for key in keys {
            let key = key?;
            if key.id != signing.id && signing.find(&key.id).is_none() {
                signing.retired.push(key);
            }
        }
        Ok(signing)
    }

    /// A fresh random key.
    pub fn generate() -> Self {
        let key: [u8; MIN_KEY_BYTES] = rand::random();
        Self {
            id: key_id(&key),
            key: key.to_vec(),
            retired: Vec::new(),
        }
    }

    /// The keyring in `path` (see [`AuditKey::from_hex`]), created with one fresh key (owner-
    /// readable only) when the file does not exist.
    pub fn load_or_create(path: &Path) -> Result<Self, KeyError> {
        let file_error = |error| KeyError::File {
            path: path.display().to_string(),
            error,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_hex(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Self::generate();
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    super::files::private_dir(dir).map_err(file_error)?;
                }
                write_new_private(path, &hex::encode(&key.key)).map_err(file_error)?;
                // Another process may have created it first: the file wins.
                Self::from_hex(&std::fs::read_to_string(path).map_err(file_error)?)
            }
            Err(e) => Err(file_error(e)),
        }
    }

    /// This keyring with a fresh signing key in front, the current one retired behind it.
    pub fn rotated(&self) -> Self {
        let mut next = Self::generate();
        next.retired.push(self.alone());
        next.retired.extend(self.retired.iter().cloned());
        next
    }

    /// The keyring as a key file holds it: one hex key per line, the signing key first.
    pub fn to_file_text(&self) -> String {
        let mut text = String::new();
        for key in std::iter::once(self).chain(&self.retired) {
            text.push_str(&hex::encode(&key.key));
            text.push('\n');
        }
        text
    }

    /// Replace the keyring in `path` with this one, atomically (a new file, 0600, synced, then
    /// renamed over the old one): a crash leaves either the old keyring or the new one.
    pub fn replace_file(&self, path: &Path) -> Result<(), KeyError> {
        let file_error = |error| KeyError::File {
            path: path.display().to_string(),
            error,
        };
        // A name of this run's own: two runs at once never rename each other's file.
        let mut next = path.as_os_str().to_owned();
        next.push(format!(".next-{:016x}", rand::random::<u64>()));
        let next = std::path::PathBuf::from(next);
        write_new_private(&next, &self.to_file_text()).map_err(file_error)?;
        std::fs::rename(&next, path).map_err(file_error)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The rename itself is durable once the directory is synced.
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }

    /// A short public name of the key (a digest prefix), stored with every event: a chain
    /// checked with another key says so instead of calling every row forged.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The keys rotated out, newest first.
    pub fn retired(&self) -> &[AuditKey] {
        &self.retired
    }

    fn retired_ids(&self) -> Vec<&str> {
        self.retired.iter().map(|k| k.id.as_str()).collect()
    }

    /// The key of this keyring whose id is `id`: the signing key or a retired one.
    pub fn find(&self, id: &str) -> Option<&AuditKey> {
        if self.id == id {
            return Some(self);
        }
        self.retired.iter().find(|k| k.id == id)
    }

    /// The signing key without the retired ones.
    fn alone(&self) -> Self {
        Self {
            key: self.key.clone(),
            id: self.id.clone(),
            retired: Vec::new(),
        }
    }

    /// The keys' ids, for messages: `a1b2c3 (signing), d4e5f6 (retired)`.
    pub fn describe(&self) -> String {
        let mut text = format!("{} (signing)", self.id);
        for id in self.retired_ids() {
            text.push_str(&format!(", {id} (retired)"));
        }
        text
    }

    /// The hash of `row` chained to `prev` (the previous event's hash, `None` for the first).
    pub fn link(&self, prev: Option<&str>, row: &ChainRow<'_>) -> String {
        let mut mac = match HmacSha256::new_from_slice(&self.key) {
            Ok(m) => m,
            // HMAC takes keys of any length; this branch is never taken.
            Err(_) => return String::new(),
        };
        let mut field = |bytes: &[u8]| {
            mac.update(&(bytes.len() as u64).to_be_bytes());
            mac.update(bytes);
        };
        field(b"kubemedic-audit-v1");
        field(prev.unwrap_or("").as_bytes());
        field(row.request_id.unwrap_or("").as_bytes());
        field(&row.at_micros.to_be_bytes());
        field(row.phase.unwrap_or("").as_bytes());
        field(row.kind.as_bytes());
        field(row.actor.as_bytes());
        field(row.message.as_bytes());
        field(crate::canonical::to_string(row.payload).as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

fn key_id(key: &[u8]) -> String {
    let digest = Sha256::digest([b"kubemedic-audit-key-id:".as_slice(), key].concat());
    hex::encode(digest.get(..6).unwrap_or_default())
}

#[cfg(unix)]
fn write_new_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut f) => {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn write_new_private(path: &Path, text: &str) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    std::fs::write(path, text)
}

/// The fields of one audit event that the chain covers, as the database holds them.
pub struct ChainRow<'a> {
    /// Hyphenated lower-case UUID.
    pub request_id: Option<&'a str>,
    pub at_micros: i64,
    pub phase: Option<&'a str>,
    pub kind: &'a str,
    pub actor: &'a str,
    pub message: &'a str,
    pub payload: &'a Value,
}

/// Where the chain of one request, or of the whole trail, stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainReport {
    /// Events examined.
    pub events: u64,
    /// Events written before the chain existed (no hash): not protected.
    pub unchained: u64,
    /// The last good event's hash.
    pub head: Option<String>,
    /// The first event whose hash does not hold, and why.
    pub broken: Option<BrokenLink>,
}

impl ChainReport {
    pub fn intact(&self) -> bool {
        self.broken.is_none()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokenLink {
    pub event_id: i64,
    pub request_id: Option<String>,
    pub reason: String,
}

/// One stored event with its chain columns, as the checks read it.
pub struct StoredLink<'a> {
    pub id: i64,
    pub row: ChainRow<'a>,
    pub prev_hash: Option<&'a str>,
    pub hash: Option<&'a str>,
    pub key_id: Option<&'a str>,
}

/// A key rotation as the trail records it: from its event on, `new_key_id` signs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    pub event_id: i64,
    pub old_key_id: String,
    pub new_key_id: String,
}

impl Rotation {
    /// The rotation a `key_rotated` event's payload names.
    pub fn of(event_id: i64, payload: &Value) -> Option<Self> {
        let named = |field: &str| {
            payload
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Some(Self {
            event_id,
            old_key_id: named("old_key_id")?,
            new_key_id: named("new_key_id")?,
        })
    }
}

/// Checks events one after another; `expected_prev` is the hash the previous event holds.
pub struct Verifier<'k> {
    key: &'k AuditKey,
    pub report: ChainReport,
    chained: bool,
    /// Walking the whole trail in order: the key the next event must be signed with (the
    /// previous event's, or the one a rotation handed over to), and the keys rotations retired.
    whole: bool,
    expected_key: Option<String>,
    retired: Vec<String>,
    /// For some events (one request's, not contiguous): the trail's rotations, which say which
    /// key was signing at each event.
    rotations: Vec<Rotation>,
    last_event: Option<(i64, Option<String>)>,
}

impl<'k> Verifier<'k> {
    /// A verifier of some events (one request's), each checked against the hash stored before
    /// it, with the key of the keyring its `key_id` names — which must be the key that signed
    /// the trail at that point, by `rotations` (the trail's `key_rotated` events, in order).
    pub fn new(key: &'k AuditKey, rotations: Vec<Rotation>) -> Self {
        Self {
            key,
            report: ChainReport {
                events: 0,
                unchained: 0,
                head: None,
                broken: None,
            },
            chained: false,
            whole: false,
            expected_key: None,
            retired: Vec::new(),
            rotations,
            last_event: None,
        }
    }

    /// A verifier of the whole trail in order, which also holds every event to the key the
    /// chain is at: the key changes only where a `key_rotated` event, signed with the old key,
    /// hands over to the new one, never back to a key a rotation retired, and the trail must
    /// end at this keyring's signing key ([`Verifier::finish`]). So a retired key (leaked, say)
    /// cannot sign a valid event after its rotation, cannot re-sign the events before it
    /// without breaking the link to the first event the new key signed, and cannot cut the
    /// trail back to before its rotation and go on from there.
    pub fn whole_trail(key: &'k AuditKey) -> Self {
        Self {
            whole: true,
            ..Self::new(key, Vec::new())
        }
    }

    /// The key that signed the trail at event `id`, by the rotations; `None` when the trail was
    /// never rotated (any key of the keyring is then as good as its id says).
    fn key_in_force(&self, id: i64) -> Option<&str> {
        match self.rotations.iter().rev().find(|r| r.event_id < id) {
            Some(r) => Some(&r.new_key_id),
            None => self.rotations.first().map(|r| r.old_key_id.as_str()),
        }
    }

    /// Check one event against the hash of the event stored just before it. Returns false
    /// once a link is broken (the report names it; later events are not examined).
    pub fn check(&mut self, link: &StoredLink<'_>, actual_prev: Option<&str>) -> bool {
        if self.report.broken.is_some() {
            return false;
        }
        self.report.events += 1;
        self.last_event = Some((link.id, link.row.request_id.map(str::to_owned)));
        let broken = |reason: String| BrokenLink {
            event_id: link.id,
            request_id: link.row.request_id.map(str::to_owned),
            reason,
        };
        let Some(hash) = link.hash else {
            if self.chained || actual_prev.is_some() {
                self.report.broken = Some(broken(
                    "the event has no hash: it was written around kubemedic".into(),
                ));
                return false;
            }
            self.report.unchained += 1;
            return true;
        };
        self.chained = true;
        let key_id = link.key_id.unwrap_or(self.key.id());
        let Some(key) = self.key.find(key_id) else {
            self.report.broken = Some(broken(format!(
                "the event was signed with another key (id {key_id}); the keys given are {}",
                self.key.describe()
            )));
            return false;
        };
        let expected = if self.whole {
            self.expected_key.clone()
        } else {
            self.key_in_force(link.id).map(str::to_owned)
        };
        if let Some(expected) = expected
            && expected != key_id
        {
            self.report.broken = Some(broken(format!(
                "the event was signed with key {key_id} where the trail is at key {expected}: \
                 keys change only at a key rotation event (a retired key signing after its \
                 rotation, or an event written around kubemedic)"
            )));
            return false;
        }
        if self.whole {
            if link.row.kind == KEY_ROTATED {
                match Rotation::of(link.id, link.row.payload) {
                    Some(r) if r.old_key_id == key_id && !self.retired.contains(&r.new_key_id) => {
                        self.retired.push(r.old_key_id);
                        self.expected_key = Some(r.new_key_id);
                    }
                    Some(r) if r.old_key_id == key_id => {
                        self.report.broken = Some(broken(format!(
                            "a key rotation hands the trail back to key {}, which an earlier \
                             rotation retired: a retired key never signs again",
                            r.new_key_id
                        )));
                        return false;
                    }
                    _ => {
                        self.report.broken = Some(broken(format!(
                            "a key rotation event must be signed with the key it retires and \
                             name the next one; this one is signed with {key_id}: {}",
                            link.row.payload
                        )));
                        return false;
                    }
                }
            } else {
                self.expected_key = Some(key_id.to_owned());
            }
        }
        if link.prev_hash != actual_prev {
            self.report.broken = Some(broken(
                "the event does not follow the one stored before it: an event was deleted or \
                 inserted here"
                    .into(),
            ));
            return false;
        }
        if key.link(link.prev_hash, &link.row) != hash {
            self.report.broken = Some(broken(
                "the event's content does not match its hash: it was edited".into(),
            ));
            return false;
        }
        self.report.head = Some(hash.to_owned());
        true
    }

    /// After the whole trail: it must end at this keyring's signing key. A trail that ends at
    /// a key the keyring lists as retired either was not handed over yet (start a daemon with
    /// this keyring, or run `kubemedic audit rotate-key`) or lost the hand-over and what came
    /// after it; either way it is not what the keyring says, and it is reported.
    pub fn finish(&mut self) {
        if !self.whole || self.report.broken.is_some() {
            return;
        }
        let Some(end) = self.expected_key.clone() else {
            return;
        };
        if end == self.key.id() {
            return;
        }
        let (event_id, request_id) = self.last_event.clone().unwrap_or((0, None));
        self.report.broken = Some(BrokenLink {
            event_id,
            request_id,
            reason: format!(
                "the trail ends signed with key {end}, which the keys given list as retired \
                 ({}): the hand-over to {} has not happened yet (start a daemon with these \
                 keys, or run `kubemedic audit rotate-key`), or it was removed with what \
                 followed it",
                self.key.describe(),
                self.key.id()
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row<'a>(message: &'a str, payload: &'a Value) -> ChainRow<'a> {
        ChainRow {
            request_id: Some("6f2c7c43-44a5-4bb4-8a39-3c8f1d4b1c51"),
            at_micros: 1_700_000_000_000_000,
            phase: Some("Received"),
            kind: "received",
            actor: "alertmanager",
            message,
            payload,
        }
    }

    #[test]
    fn the_hash_covers_content_and_the_previous_link() {
        let key = AuditKey::generate();
        let payload = json!({"b": 1, "a": [1.5, "x"]});
        let first = key.link(None, &row("opened", &payload));
        assert_eq!(first.len(), 64);
        assert_eq!(first, key.link(None, &row("opened", &payload)));
        assert_ne!(first, key.link(None, &row("opened!", &payload)));
        assert_ne!(first, key.link(Some("00"), &row("opened", &payload)));
        let reordered = json!({"a": [1.5, "x"], "b": 1});
        assert_eq!(first, key.link(None, &row("opened", &reordered)));
        let other = AuditKey::generate();
        assert_ne!(first, other.link(None, &row("opened", &payload)));
        assert_ne!(key.id(), other.id());
    }

    #[test]
    fn a_computed_float_read_back_from_the_database_hashes_the_same() {
        // A verification score is a weighted mean: any f64. The store hashes the payload it
        // writes; the checks hash what they parse back from the column's JSON text.
        let key = AuditKey::generate();
        let written = json!({"score": 0.902_085_696_565_929_9_f64, "mean": (0.1 + 0.2) / 3.0});
        let read_back: Value = serde_json::from_str(&written.to_string()).unwrap();
        assert_eq!(read_back, written);
        assert_eq!(
            key.link(None, &row("assessed", &written)),
            key.link(None, &row("assessed", &read_back))
        );
    }

    #[test]
    fn short_or_malformed_keys_are_refused_with_the_reason() {
        assert!(matches!(
            AuditKey::from_hex("abcd"),
            Err(KeyError::TooShort(2))
        ));
        assert!(matches!(AuditKey::from_hex("zz"), Err(KeyError::NotHex(_))));
        assert!(AuditKey::from_hex(&"ab".repeat(32)).is_ok());
    }

    #[test]
    fn a_key_file_is_created_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/audit.key");
        let a = AuditKey::load_or_create(&path).unwrap();
        let b = AuditKey::load_or_create(&path).unwrap();
        assert_eq!(a.id(), b.id());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "the key file is private");
        }
    }

    #[test]
    fn a_keyring_signs_with_its_first_key_and_keeps_the_others_to_check() {
        let (a, b) = (AuditKey::generate(), AuditKey::generate());
        let text = format!(
            "# rotated today\n{}\n\n{},{}\n",
            hex::encode(&b.key),
            hex::encode(&a.key),
            hex::encode(&b.key)
        );
        let ring = AuditKey::from_hex(&text).unwrap();
        assert_eq!(ring.id(), b.id());
        assert_eq!(ring.retired().len(), 1, "a key given twice counts once");
        assert!(ring.find(a.id()).is_some() && ring.find(b.id()).is_some());
        assert!(ring.find(AuditKey::generate().id()).is_none());
        assert!(matches!(
            AuditKey::from_hex(" \n# none\n"),
            Err(KeyError::Empty)
        ));
        assert!(matches!(
            AuditKey::from_hex(&format!("{},abcd", hex::encode(&b.key))),
            Err(KeyError::TooShort(2))
        ));
        // Rotating puts a fresh key in front; the file text reads back as the same keyring.
        let next = ring.rotated();
        assert_ne!(next.id(), ring.id());
        let ids = |k: &AuditKey| {
            std::iter::once(k.id().to_owned())
                .chain(k.retired().iter().map(|r| r.id().to_owned()))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&next)[1..], ids(&ring)[..]);
        assert_eq!(
            ids(&AuditKey::from_hex(&next.to_file_text()).unwrap()),
            ids(&next)
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.key");
        AuditKey::load_or_create(&path).unwrap();
        next.replace_file(&path).unwrap();
        assert_eq!(ids(&AuditKey::load_or_create(&path).unwrap()), ids(&next));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "the replaced key file is private");
        }
    }

    /// The whole trail, checked in order with a keyring: the key changes only where a rotation
    /// event signed with the old key names the new one.
    #[test]
    fn the_whole_trail_changes_key_only_at_a_rotation() {
        let old = AuditKey::generate();
        let ring = old.rotated();
        let new = ring.alone();
        let p = json!({});
        let rotation = json!({"old_key_id": old.id(), "new_key_id": new.id()});
        let event = |key: &AuditKey, prev: Option<&str>, kind: &'static str, payload: &Value| {
            let mut r = row("x", payload);
            r.kind = kind;
            let payload = payload.clone();
            (key.link(prev, &r), key.id().to_owned(), kind, payload)
        };
        // old signs e1, hands over in e2, new signs e3.
        let e1 = event(&old, None, "received", &p);
        let e2 = event(&old, Some(&e1.0), KEY_ROTATED, &rotation);
        let e3 = event(&new, Some(&e2.0), "received", &p);
        // A leaked old key signing after the hand-over.
        let forged = event(&old, Some(&e2.0), "received", &p);
        let check = |v: &mut Verifier<'_>,
                     id: i64,
                     e: &(String, String, &'static str, Value),
                     prev: Option<&str>| {
            let mut r = row("x", &e.3);
            r.kind = e.2;
            v.check(
                &StoredLink {
                    id,
                    row: r,
                    prev_hash: prev,
                    hash: Some(&e.0),
                    key_id: Some(&e.1),
                },
                prev,
            )
        };
        let mut v = Verifier::whole_trail(&ring);
        assert!(check(&mut v, 1, &e1, None));
        assert!(check(&mut v, 2, &e2, Some(&e1.0)));
        assert!(check(&mut v, 3, &e3, Some(&e2.0)), "{:?}", v.report.broken);
        v.finish();
        assert!(v.report.intact(), "{:?}", v.report.broken);

        // The hand-over and what followed it removed: what is left holds link by link, but the
        // trail ends at a key the keyring lists as retired.
        let mut v = Verifier::whole_trail(&ring);
        assert!(check(&mut v, 1, &e1, None));
        v.finish();
        let why = v.report.broken.unwrap().reason;
        assert!(
            why.contains("ends signed with key") && why.contains(old.id()),
            "{why}"
        );
        // Checked with the old keyring (before any rotation), the same trail is whole.
        let mut v = Verifier::whole_trail(&old);
        assert!(check(&mut v, 1, &e1, None));
        v.finish();
        assert!(v.report.intact());

        // A rotation back to a key an earlier one retired.
        let back = json!({"old_key_id": new.id(), "new_key_id": old.id()});
        let e4 = event(&new, Some(&e3.0), KEY_ROTATED, &back);
        let both = AuditKey::from_hex(&format!(
            "{}\n{}",
            hex::encode(&old.key),
            hex::encode(&new.key)
        ))
        .unwrap();
        let mut v = Verifier::whole_trail(&both);
        assert!(check(&mut v, 1, &e1, None));
        assert!(check(&mut v, 2, &e2, Some(&e1.0)));
        assert!(check(&mut v, 3, &e3, Some(&e2.0)));
        assert!(!check(&mut v, 4, &e4, Some(&e3.0)));
        let why = v.report.broken.unwrap().reason;
        assert!(why.contains("never signs again"), "{why}");

        let mut v = Verifier::whole_trail(&ring);
        assert!(check(&mut v, 1, &e1, None));
        assert!(check(&mut v, 2, &e2, Some(&e1.0)));
        assert!(!check(&mut v, 3, &forged, Some(&e2.0)));
        let why = v.report.broken.unwrap().reason;
        assert!(why.contains("keys change only at a key rotation"), "{why}");

        // The new key taking over without a rotation event.
        let jump = event(&new, Some(&e1.0), "received", &p);
        let mut v = Verifier::whole_trail(&ring);
        assert!(check(&mut v, 1, &e1, None));
        assert!(!check(&mut v, 2, &jump, Some(&e1.0)));

        // Without the retired key, its events cannot be checked, and the report says which
        // keys were given.
        let mut v = Verifier::whole_trail(&new);
        assert!(!check(&mut v, 1, &e1, None));
        let why = v.report.broken.unwrap().reason;
        assert!(why.contains(old.id()) && why.contains(new.id()), "{why}");

        // A request's own events are checked each with the key that signed the trail at its
        // place, by the trail's rotations: the forged one at the tail is found too.
        let rotations = vec![Rotation::of(2, &rotation).unwrap()];
        let mut v = Verifier::new(&ring, rotations.clone());
        assert!(check(&mut v, 3, &e3, Some(&e2.0)));
        assert!(check(&mut v, 1, &e1, None));
        let mut v = Verifier::new(&ring, rotations);
        assert!(!check(&mut v, 3, &forged, Some(&e2.0)));
        // Never rotated: any key of the keyring, as its id says.
        let mut v = Verifier::new(&ring, vec![]);
        assert!(check(&mut v, 1, &e1, None));
    }

    #[test]
    fn the_verifier_names_the_first_edited_or_missing_event() {
        let key = AuditKey::generate();
        let p = json!({});
        let h1 = key.link(None, &row("one", &p));
        let h2 = key.link(Some(&h1), &row("two", &p));
        let mut v = Verifier::new(&key, vec![]);
        assert!(v.check(
            &StoredLink {
                id: 1,
                row: row("one", &p),
                prev_hash: None,
                hash: Some(&h1),
                key_id: Some(key.id())
            },
            None
        ));
        // Event 2 edited after the fact.
        assert!(!v.check(
            &StoredLink {
                id: 2,
                row: row("TWO", &p),
                prev_hash: Some(&h1),
                hash: Some(&h2),
                key_id: Some(key.id())
            },
            Some(&h1)
        ));
        let broken = v.report.broken.clone().unwrap();
        assert_eq!(broken.event_id, 2);
        assert!(broken.reason.contains("edited"), "{}", broken.reason);

        // Event 1 deleted: event 2 no longer follows what is stored before it.
        let mut v = Verifier::new(&key, vec![]);
        assert!(!v.check(
            &StoredLink {
                id: 2,
                row: row("two", &p),
                prev_hash: Some(&h1),
                hash: Some(&h2),
                key_id: Some(key.id())
            },
            None
        ));
        assert!(v.report.broken.unwrap().reason.contains("deleted"));
    }
}
