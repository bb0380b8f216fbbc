//! `kubemedic apikey create|list|revoke` and `kubemedic audit verify`: administration on the
//! daemon's own store (the same `--data-dir` / `--database-url` as `serve`).

use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};

use crate::config::{DaemonArgs, Settings};
use crate::domain::{ApiKey, Role};
use crate::web::auth::{digest, key_prefix, new_key};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RoleArg {
    Viewer,
    Approver,
    Admin,
}

impl From<RoleArg> for Role {
    fn from(r: RoleArg) -> Self {
        match r {
            RoleArg::Viewer => Role::Viewer,
            RoleArg::Approver => Role::Approver,
            RoleArg::Admin => Role::Admin,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ApikeyArgs {
    #[command(subcommand)]
    pub command: ApikeyCommand,
}

#[derive(Debug, Subcommand)]
pub enum ApikeyCommand {
    /// Create a key and print it once (only its digest is kept).
    Create {
        /// viewer (reads everything), approver (also decides approvals) or admin (also keys,
        /// the admin API).
        #[arg(long, value_enum)]
        role: RoleArg,
        /// A name for the key, unique among active keys; the audit trail names its holder by it.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// List keys (never the keys themselves).
    List {
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Revoke the active key with this name; its sessions end at once.
    Revoke {
        name: String,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Walk the audit trail's hash chain and name the first broken link (exit 1 if any).
    Verify {
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Hand the audit trail over to a new signing key. With a key file (the default
    /// <data-dir>/audit.key, or --audit-key-file) a fresh key is put in front of the file's
    /// keys; with --audit-key NEW,OLD the first key given is the new one. The retired key signs
    /// a `key_rotated` event naming the new key; then restart every replica with the new
    /// keyring (one still running with the old key writes nothing more).
    RotateKey {
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Print a fresh random audit key (hex), to put in front of the keyring in a Secret.
    NewKey,
}

/// Who runs the command, as the audit trail names them.
fn operator() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!("cli:{user}")
}

async fn open(args: &DaemonArgs) -> Result<std::sync::Arc<dyn crate::store::Store>, ExitCode> {
    let settings = match Settings::load(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Err(ExitCode::from(2));
        }
    };
    let clock: std::sync::Arc<dyn crate::clock::Clock> =
        std::sync::Arc::new(crate::clock::SystemClock);
    crate::daemon::open_store(&settings, clock)
        .await
        .map_err(|e| {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        })
}

pub async fn apikey(args: ApikeyArgs) -> ExitCode {
    match args.command {
        ApikeyCommand::Create { role, name, daemon } => {
            let name = name.trim().to_owned();
            if name.is_empty()
                || name.len() > 64
                || name.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                eprintln!("error: --name must be 1 to 64 characters without spaces");
                return ExitCode::from(2);
            }
            let store = match open(&daemon).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            let key = new_key();
            let record = ApiKey {
                id: uuid::Uuid::new_v4(),
                name: name.clone(),
                role: role.into(),
                prefix: key_prefix(&key),
                created_at: chrono::Utc::now(),
                created_by: operator(),
                revoked_at: None,
            };
            match store.create_api_key(&record, &digest(&key)).await {
                Ok(()) => {
                    println!("{key}");
                    eprintln!(
                        "created {} key `{name}`; this is the only time it is shown",
                        record.role
                    );
                    ExitCode::SUCCESS
                }
                Err(crate::store::StoreError::Conflict) => {
                    eprintln!(
                        "error: an active key is already named `{name}`; revoke it first or choose another name"
                    );
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        ApikeyCommand::List { daemon } => {
            let store = match open(&daemon).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            match store.list_api_keys().await {
                Ok(keys) => {
                    println!(
                        "{:<24} {:<9} {:<8} {:<20} {:<16} STATUS",
                        "NAME", "ROLE", "PREFIX", "CREATED", "BY"
                    );
                    for k in keys {
                        let status = match k.revoked_at {
                            Some(t) => format!("revoked {}", t.format("%Y-%m-%d %H:%M")),
                            None => "active".into(),
                        };
                        println!(
                            "{:<24} {:<9} {:<8} {:<20} {:<16} {status}",
                            k.name,
                            k.role.as_str(),
                            k.prefix,
                            k.created_at.format("%Y-%m-%d %H:%M UTC"),
                            k.created_by
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        ApikeyCommand::Revoke { name, daemon } => {
            let store = match open(&daemon).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            match store.revoke_api_key(name.trim(), &operator()).await {
                Ok(Some(k)) => {
                    println!("revoked {} key `{}`", k.role, k.name);
                    ExitCode::SUCCESS
                }
                Ok(None) => {
                    eprintln!("error: no active key is named `{}`", name.trim());
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// `kubemedic audit rotate-key`.
async fn rotate_key(daemon: &DaemonArgs) -> ExitCode {
    use crate::config::AuditKeySource;
    let settings = match Settings::load(daemon) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("error: {e}");
        ExitCode::FAILURE
    };
    let keyring = match settings.audit_key.load() {
        Ok(k) => k,
        Err(e) => return fail(&e),
    };
    let store = match open(daemon).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let current = match store
        .setting_or_init("audit_key_id", &|| keyring.id().to_owned())
        .await
    {
        Ok(id) => id,
        Err(e) => return fail(&e),
    };
    let store = if current != keyring.id() {
        // The first key given is already the new one (`--audit-key NEW,OLD`, or a key file a
        // rotation replaced before it was interrupted): hand over to it.
        store
    } else {
        match &settings.audit_key {
            AuditKeySource::File(path) => {
                let next = keyring.rotated();
                if let Err(e) = next.replace_file(path) {
                    return fail(&e);
                }
                eprintln!(
                    "{} now holds a new key ({}) in front of the retired ones",
                    path.display(),
                    next.id()
                );
                match open(daemon).await {
                    Ok(s) => s,
                    Err(code) => return code,
                }
            }
            AuditKeySource::Given(_) => {
                eprintln!(
                    "error: the trail is already signed with the first key given ({current}); \
                     put a new key in front of the current one (--audit-key NEW_KEY,CURRENT_KEY, \
                     or KUBEMEDIC_AUDIT_KEY), e.g. one printed by `kubemedic audit new-key`"
                );
                return ExitCode::from(2);
            }
        }
    };
    match store.rotate_audit_key(&operator()).await {
        Ok(Some((old, new))) => {
            println!("audit key rotated: {old} retired, {new} signs from here on");
            eprintln!(
                "restart every replica with the new keyring (new key first, then the retired \
                 ones): a replica still running with the retired key writes nothing more, and \
                 `audit verify` needs the retired keys to check the events they signed"
            );
            ExitCode::SUCCESS
        }
        Ok(None) => {
            println!("nothing to rotate: the trail is already signed with {current}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

pub async fn audit(args: AuditArgs) -> ExitCode {
    match args.command {
        AuditCommand::RotateKey { daemon } => rotate_key(&daemon).await,
        AuditCommand::NewKey => {
            println!(
                "{}",
                crate::store::AuditKey::generate().to_file_text().trim()
            );
            ExitCode::SUCCESS
        }
        AuditCommand::Verify { daemon } => {
            let store = match open(&daemon).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            match store.verify_chain().await {
                Ok(report) => match &report.broken {
                    None => {
                        println!(
                            "audit chain intact: {} events checked{}; head {}",
                            report.events,
                            if report.unchained > 0 {
                                format!(
                                    " ({} written before the chain existed, not protected)",
                                    report.unchained
                                )
                            } else {
                                String::new()
                            },
                            report.head.as_deref().unwrap_or("(empty)")
                        );
                        ExitCode::SUCCESS
                    }
                    Some(b) => {
                        println!(
                            "audit chain BROKEN at event {}{}: {}",
                            b.event_id,
                            b.request_id
                                .as_deref()
                                .map(|r| format!(" (request {r})"))
                                .unwrap_or_default(),
                            b.reason
                        );
                        println!(
                            "{} events before it are intact",
                            report.events.saturating_sub(1)
                        );
                        ExitCode::FAILURE
                    }
                },
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
