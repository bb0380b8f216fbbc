//! The store's settings (owner: `store`): where state lives, which database, and the audit
//! trail's signing key.

use std::path::{Path, PathBuf};

use super::declare::{HelpDefault, settings};
use super::{Result, invalid, non_empty};
use crate::secret::{Secret, redact_url};
use crate::store::DatabaseUrl;
use crate::store::chain::{AuditKey, KeyError};

/// The state directory unless configured (relative to the working directory).
pub const DEFAULT_DATA_DIR: &str = "kubemedic-data";

settings! {
    /// The database and the audit trail's key.
    pub struct StoreArgs {
        /// Directory for the embedded database and other state.
        #[arg(long, env = "KUBEMEDIC_DATA_DIR", value_name = "DIR", help_default = DEFAULT_DATA_DIR)]
        pub data_dir: Option<PathBuf>,

        /// `sqlite://PATH` or `postgres://…` [default: sqlite://<data-dir>/kubemedic.db].
        #[arg(
            long,
            env = "KUBEMEDIC_DATABASE_URL",
            value_name = "URL",
            hide_env_values = true
        )]
        pub database_url: Option<Secret>,

        /// The audit trail's signing key (hex, at least 64 digits), for several replicas that
        /// share one database; they must all have the same key. `NEW,OLD` gives a keyring: the
        /// first key signs, the retired ones check the events they signed, and a daemon started
        /// with a new key in front hands the trail over to it [default: read from, or created
        /// in, --audit-key-file].
        #[arg(
            long,
            env = "KUBEMEDIC_AUDIT_KEY",
            value_name = "HEX",
            hide_env_values = true
        )]
        pub audit_key: Option<Secret>,

        /// File holding the audit trail's signing key (one hex key per line: the signing key,
        /// then the retired ones); created (mode 0600) when missing [default:
        /// <data-dir>/audit.key]. Keep it out of the database's reach: whoever holds it can
        /// re-sign an edited trail.
        #[arg(long, env = "KUBEMEDIC_AUDIT_KEY_FILE", value_name = "FILE")]
        pub audit_key_file: Option<PathBuf>,

        /// Move the SQLite database and the audit key file an earlier layout kept in DIR into
        /// --data-dir at start-up, when --data-dir has no database yet (the Helm chart sets it:
        /// its state moved from the volume's root into `data/`). Renames only; never over
        /// newer state.
        #[arg(long, env = "KUBEMEDIC_ADOPT_STATE_FROM", value_name = "DIR")]
        pub adopt_state_from: Option<PathBuf>,
    }
}

/// Where the audit trail's signing key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditKeySource {
    /// Given as hex (`--audit-key`).
    Given(Secret),
    /// A file, created with a fresh key when missing.
    File(PathBuf),
}

impl AuditKeySource {
    pub fn load(&self) -> std::result::Result<AuditKey, KeyError> {
        match self {
            AuditKeySource::Given(hex) => AuditKey::from_hex(hex.expose()),
            AuditKeySource::File(path) => AuditKey::load_or_create(path),
        }
    }
}

/// The store's settings, checked.
#[derive(Debug, Clone)]
pub struct StoreParts {
    pub data_dir: PathBuf,
    /// Where an earlier layout kept the state (`--adopt-state-from`).
    pub adopt_state_from: Option<PathBuf>,
    pub database: DatabaseUrl,
    pub audit_key: AuditKeySource,
}

impl StoreArgs {
    pub fn settings(self) -> Result<StoreParts> {
        let data_dir = self
            .data_dir
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
        let database = parse_database_url(self.database_url.as_ref(), &data_dir)?;
        let audit_key = match non_empty(self.audit_key) {
            Some(hex) => AuditKeySource::Given(hex),
            None => AuditKeySource::File(
                self.audit_key_file
                    .unwrap_or_else(|| data_dir.join("audit.key")),
            ),
        };
        Ok(StoreParts {
            adopt_state_from: self.adopt_state_from,
            data_dir,
            database,
            audit_key,
        })
    }
}

fn parse_database_url(raw: Option<&Secret>, data_dir: &Path) -> Result<DatabaseUrl> {
    let Some(raw) = raw.filter(|r| !r.expose().trim().is_empty()) else {
        return Ok(DatabaseUrl::Sqlite(data_dir.join("kubemedic.db")));
    };
    let url = raw.expose();
    let bad = |message: String| invalid("database-url", message);
    if let Some(path) = url
        .strip_prefix("sqlite://")
        .or(url.strip_prefix("sqlite:"))
    {
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        if path.is_empty() || path == ":memory:" {
            return Err(bad(
                "an SQLite database needs a file path (sqlite://PATH); an in-memory database \
                 would lose acknowledged alerts on restart"
                    .into(),
            ));
        }
        return Ok(DatabaseUrl::Sqlite(PathBuf::from(path)));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(DatabaseUrl::Postgres(raw.clone()));
    }
    Err(bad(format!(
        "`{}` is neither sqlite://PATH nor postgres://…",
        redact_url(url)
    )))
}
