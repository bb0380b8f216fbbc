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
}
