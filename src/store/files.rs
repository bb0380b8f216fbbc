//! The files kubemedic keeps its state in: the data directory, the SQLite database beside it and
//! the audit key file. Whoever can write them can swap the database or the key that signs the
//! audit trail, so a directory kubemedic creates is 0700, a file 0600, and it refuses to start
//! on a directory or key file that its group or others can write (checked before anything is
//! created or read; a path that does not exist yet is created private).

use std::path::{Path, PathBuf};

/// A state path that someone besides its owner can write.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to start: the {what} {path} is writable by {who} (mode {mode:04o}); whoever can \
     write it can replace the database or the audit key. Fix it with: chmod {fix:o} {path}",
    path = path.display()
)]
pub struct SharedWrite {
    /// "data directory", "database directory", "audit key file".
    pub what: &'static str,
    pub path: PathBuf,
    /// The permission bits (`mode & 0o7777`).
    pub mode: u32,
    /// "its group", "others", "its group and others".
    pub who: &'static str,
    /// The mode to set (0700 for a directory, 0600 for a file).
    pub fix: u32,
}

/// Create `dir` (and missing parents) readable by its owner only; an existing one is left as it
/// is (see [`refuse_shared_write`]).
#[cfg(unix)]
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Err when `path` exists and its group or others may write it. A missing path is fine (it
/// will be created private); a path that cannot be read is left to the code that opens it.
#[cfg(unix)]
pub fn refuse_shared_write(what: &'static str, path: &Path) -> Result<(), SharedWrite> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let mode = meta.mode() & 0o7777;
    let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (false, false) => return Ok(()),
        (true, false) => "its group",
        (false, true) => "others",
        (true, true) => "its group and others",
    };
    Err(SharedWrite {
        what,
        path: path.to_path_buf(),
        mode,
        who,
        fix: if meta.is_dir() { 0o700 } else { 0o600 },
    })
}

#[cfg(not(unix))]
pub fn refuse_shared_write(_what: &'static str, _path: &Path) -> Result<(), SharedWrite> {
    Ok(())
}

/// The state files an older layout kept directly in a directory the data directory now sits in.
const ADOPTABLE: &[&str] = &[
    "kubemedic.db",
    "kubemedic.db-wal",
    "kubemedic.db-shm",
    "audit.key",
];

/// Move the state an earlier layout kept in `from` (the SQLite database with its journal, the
/// audit key file) into `data_dir`, when `data_dir` has no database yet and `from` has one.
/// Renames within one file system, so nothing is copied or half-moved; each moved file is made
/// 0600 and `data_dir` is created 0700. Answers the names moved (none: nothing to adopt).
#[cfg(unix)]
pub fn adopt(from: &Path, data_dir: &Path) -> std::io::Result<Vec<&'static str>> {
    use std::os::unix::fs::PermissionsExt;
    if from == data_dir
        || data_dir.join("kubemedic.db").exists()
        || !from.join("kubemedic.db").is_file()
    {
        return Ok(vec![]);
    }
    private_dir(data_dir)?;
    let mut moved = Vec::new();
    for name in ADOPTABLE {
        let (old, new) = (from.join(name), data_dir.join(name));
        if old.is_file() && !new.exists() {
            std::fs::rename(&old, &new)?;
            std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o600))?;
            moved.push(*name);
        }
    }
    Ok(moved)
}

#[cfg(not(unix))]
pub fn adopt(_from: &Path, _data_dir: &Path) -> std::io::Result<Vec<&'static str>> {
    Ok(vec![])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_created_directory_is_private_and_passes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        private_dir(&dir).unwrap();
        for d in [tmp.path().join("a"), dir.clone()] {
            let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
        }
        refuse_shared_write("data directory", &dir).unwrap();
        refuse_shared_write("data directory", &tmp.path().join("missing")).unwrap();
    }

    #[test]
    fn group_or_other_write_is_refused_with_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        chmod(tmp.path(), 0o775);
        let err = refuse_shared_write("data directory", tmp.path()).unwrap_err();
        assert_eq!((err.who, err.mode, err.fix), ("its group", 0o775, 0o700));
        let text = err.to_string();
        assert!(text.contains("mode 0775"), "{text}");
        assert!(
            text.contains(&format!("chmod 700 {}", tmp.path().display())),
            "{text}"
        );
        chmod(tmp.path(), 0o755);
        refuse_shared_write("data directory", tmp.path()).unwrap();

        let key = tmp.path().join("audit.key");
        std::fs::write(&key, "x").unwrap();
        chmod(&key, 0o602);
        let err = refuse_shared_write("audit key file", &key).unwrap_err();
        assert_eq!((err.who, err.fix), ("others", 0o600));
        assert!(err.to_string().contains("chmod 600"), "{err}");
        chmod(&key, 0o644);
        refuse_shared_write("audit key file", &key).unwrap();
    }

    #[test]
    fn state_in_the_old_place_is_moved_once_and_never_over_newer_state() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        for (name, body) in [
            ("kubemedic.db", "db"),
            ("kubemedic.db-wal", "wal"),
            ("audit.key", "key"),
        ] {
            std::fs::write(root.path().join(name), body).unwrap();
            chmod(&root.path().join(name), 0o660);
        }
        let moved = adopt(root.path(), &data).unwrap();
        assert_eq!(moved, ["kubemedic.db", "kubemedic.db-wal", "audit.key"]);
        assert_eq!(
            std::fs::read_to_string(data.join("audit.key")).unwrap(),
            "key"
        );
        assert!(!root.path().join("kubemedic.db").exists());
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&data).unwrap().mode() & 0o777, 0o700);
        assert_eq!(
            std::fs::metadata(data.join("kubemedic.db")).unwrap().mode() & 0o777,
            0o600
        );
        // Again: nothing left to move.
        assert!(adopt(root.path(), &data).unwrap().is_empty());
        // A database in the data directory is never replaced by an old one.
        std::fs::write(root.path().join("kubemedic.db"), "older").unwrap();
        assert!(adopt(root.path(), &data).unwrap().is_empty());
        assert_eq!(
            std::fs::read_to_string(data.join("kubemedic.db")).unwrap(),
            "db"
        );
    }
}
