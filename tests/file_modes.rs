//! The modes of the files kubemedic keeps its state in, as the real binary creates and checks
//! them: a fresh data directory is 0700 (its key and database 0600); a data directory or key
//! file that the group or others can write stops `serve` and `migrate` with the fix.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_kubemedic");

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn kubemedic(args: &[&str], data_dir: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("KUBEMEDIC_AUDIT_KEY")
        .env_remove("KUBEMEDIC_DATABASE_URL")
        .env_remove("KUBEMEDIC_AUDIT_KEY_FILE")
        .output()
        .unwrap()
}

/// `serve` as far as it gets before it would listen: a webhook token, a port of its own.
fn serve(data_dir: &Path) -> Output {
    kubemedic(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--webhook-token",
            "file-modes-test-token",
        ],
        data_dir,
    )
}

#[test]
fn a_fresh_data_directory_is_created_private() {
    let tmp = tempfile::tempdir().unwrap();
    chmod(tmp.path(), 0o755); // the usual umask's directory above it
    let data = tmp.path().join("state");
    // `audit verify` opens the store the way `serve` does: the key file first, then the database.
    let out = kubemedic(&["audit", "verify"], &data);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mode(&data), 0o700, "the data directory");
    assert_eq!(mode(&data.join("audit.key")), 0o600, "the key file");
    assert_eq!(mode(&data.join("kubemedic.db")), 0o600, "the database");
}

#[test]
fn a_data_directory_others_can_write_stops_serve_and_migrate() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("state");
    std::fs::create_dir(&data).unwrap();
    chmod(&data, 0o775);
    for out in [serve(&data), kubemedic(&["migrate"], &data)] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "started on a 0775 data directory: {err}"
        );
        assert!(
            err.contains(&format!(
                "the data directory {} is writable by its group (mode 0775)",
                data.display()
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!("chmod 700 {}", data.display())),
            "{err}"
        );
    }
    assert!(
        !data.join("kubemedic.db").exists() && !data.join("audit.key").exists(),
        "nothing was created in it"
    );
}

#[test]
fn a_key_file_others_can_write_stops_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("state");
    let out = kubemedic(&["migrate"], &data);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = data.join("audit.key");
    std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
    chmod(&key, 0o666);
    let out = serve(&data);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started with a 0666 key file: {err}");
    assert!(
        err.contains(&format!(
            "the audit key file {} is writable by its group and others (mode 0666)",
            key.display()
        )) && err.contains(&format!("chmod 600 {}", key.display())),
        "{err}"
    );
}
