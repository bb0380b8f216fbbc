//! The MCP client's settings (owner: `mcp_client`): the other teams' MCP servers whose tools
//! invocation 1 may call, the header (a token) each wants, and the allowlist of their tools.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use super::declare::{HelpDefault, settings};
use super::{Result, invalid};
use crate::mcp_client::{
    McpClientSettings, McpHeader, McpServer, check_server_name, check_tool_name,
};
use crate::secret::{Secret, redact_url};

settings! {
    /// Other teams' MCP servers whose allowlisted tools the model may call in invocation 1.
    pub struct McpClientArgs {
        /// An MCP server (streamable HTTP) whose tools the model may use, as `NAME=URL`
        /// (`deploys=https://deploys.internal/mcp`); repeat the flag, or comma-separate in the
        /// variable. NAME: lowercase letters, digits and `-`. Only the tools --mcp-allow-tool
        /// lists are offered [default: none].
        #[arg(
            long,
            env = "KUBEMEDIC_MCP_SERVER",
            value_name = "NAME=URL",
            value_delimiter = ','
        )]
        pub mcp_server: Option<Vec<String>>,

        /// A header sent to one MCP server, usually its token: `NAME=Header-Name: value`
        /// (`deploys=Authorization: Bearer …`); repeat the flag for several servers.
        #[arg(
            long,
            env = "KUBEMEDIC_MCP_SERVER_HEADER",
            value_name = "NAME=HEADER: VALUE",
            hide_env_values = true
        )]
        pub mcp_server_header: Option<Vec<Secret>>,

        /// A file holding one MCP server's header (`Header-Name: value`, e.g. a mounted
        /// Kubernetes Secret), as `NAME=PATH`; repeat the flag, or comma-separate in the
        /// variable.
        #[arg(
            long,
            env = "KUBEMEDIC_MCP_SERVER_HEADER_FILE",
            value_name = "NAME=PATH",
            value_delimiter = ','
        )]
        pub mcp_server_header_file: Option<Vec<String>>,

        /// A tool the model may call, as `NAME/TOOL` (`deploys/recent_deploys`); repeat the
        /// flag, or comma-separate in the variable. List read-only tools only: anything else
        /// the model asks for is refused and audited [default: none].
        #[arg(
            long,
            env = "KUBEMEDIC_MCP_ALLOW_TOOL",
            value_name = "NAME/TOOL",
            value_delimiter = ','
        )]
        pub mcp_allow_tool: Option<Vec<String>>,

        /// Seconds connecting to an MCP server and listing its tools may take; one that does
        /// not answer only loses its tools (calls have --tool-timeout-seconds).
        #[arg(
            long,
            env = "KUBEMEDIC_MCP_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = McpClientSettings::DEFAULT_TIMEOUT_SECONDS
        )]
        pub mcp_timeout_seconds: Option<u64>,

        /// Seconds an MCP server's tool listing is reused before it is asked again (a server
        /// that failed is asked again at the next investigation).
        #[arg(
            long,
            env = "KUBEMEDIC_MCP_REFRESH_SECONDS",
            value_name = "SECONDS",
            help_default = McpClientSettings::DEFAULT_REFRESH_SECONDS
        )]
        pub mcp_refresh_seconds: Option<u64>,
    }
}

/// A value as an error may quote it: a URL without its credentials or query.
fn shown(raw: &str) -> String {
    if raw.contains("://") {
        redact_url(raw)
    } else {
        raw.to_owned()
    }
}

impl McpClientArgs {
    /// The client settings, checked: every name, URL, header and allowlist entry.
    pub fn settings(self) -> Result<McpClientSettings> {
        let mut servers: BTreeMap<String, McpServer> = BTreeMap::new();
        for raw in self.mcp_server.unwrap_or_default() {
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            let Some((name, url)) = raw.split_once('=') else {
                return Err(invalid(
                    "mcp-server",
                    format!("`{}` is not NAME=URL", shown(raw)),
                ));
            };
            let (name, url) = (name.trim(), url.trim());
            check_server_name(name).map_err(|e| invalid("mcp-server", e))?;
            let parsed = reqwest::Url::parse(url).map_err(|e| {
                invalid(
                    "mcp-server",
                    format!(
                        "the URL of `{name}` (`{}`) is not a URL: {e}",
                        redact_url(url)
                    ),
                )
            })?;
            if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                return Err(invalid(
                    "mcp-server",
                    format!(
                        "the URL of `{name}` (`{}`) is not an http(s) URL",
                        redact_url(url)
                    ),
                ));
            }
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(invalid(
                    "mcp-server",
                    format!(
                        "the URL of `{name}` carries credentials: give them with \
                         --mcp-server-header instead (`{}`)",
                        redact_url(url)
                    ),
                ));
            }
            let server = McpServer {
                name: name.to_owned(),
                url: url.to_owned(),
                header: None,
            };
            if servers.insert(name.to_owned(), server).is_some() {
                return Err(invalid("mcp-server", format!("`{name}` is given twice")));
            }
        }
        let mut headers: Vec<(String, McpHeader, &'static str)> = Vec::new();
        for raw in self.mcp_server_header.unwrap_or_default() {
            let key = "mcp-server-header";
            let Some((name, header)) = raw.expose().split_once('=') else {
                return Err(invalid(
                    key,
                    "a value is not NAME=Header-Name: value".into(),
                ));
            };
            let name = name.trim();
            let header = McpHeader::parse(header)
                .map_err(|e| invalid(key, format!("the header of `{name}`: {e}")))?;
            headers.push((name.to_owned(), header, key));
        }
        for raw in self.mcp_server_header_file.unwrap_or_default() {
            let key = "mcp-server-header-file";
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            let Some((name, path)) = raw.split_once('=') else {
                return Err(invalid(key, format!("`{raw}` is not NAME=PATH")));
            };
            let (name, path) = (name.trim(), PathBuf::from(path.trim()));
            let text = std::fs::read_to_string(&path).map_err(|e| {
                invalid(
                    key,
                    format!(
                        "cannot read the header of `{name}` from {}: {e}",
                        path.display()
                    ),
                )
            })?;
            let header = McpHeader::parse(text.trim()).map_err(|e| {
                invalid(
                    key,
                    format!("the header of `{name}` in {}: {e}", path.display()),
                )
            })?;
            headers.push((name.to_owned(), header, key));
        }
        for (name, header, key) in headers {
            let Some(server) = servers.get_mut(&name) else {
                return Err(invalid(
                    key,
                    format!("`{name}` is not a server of --mcp-server"),
                ));
            };
            if server.header.replace(header).is_some() {
                return Err(invalid(key, format!("`{name}` has more than one header")));
            }
        }
        let mut allow = BTreeSet::new();
        for raw in self.mcp_allow_tool.unwrap_or_default() {
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            let Some((name, tool)) = raw.split_once('/') else {
                return Err(invalid(
                    "mcp-allow-tool",
                    format!("`{raw}` is not NAME/TOOL"),
                ));
            };
            let (name, tool) = (name.trim(), tool.trim());
            if !servers.contains_key(name) {
                return Err(invalid(
                    "mcp-allow-tool",
                    format!("`{raw}`: `{name}` is not a server of --mcp-server"),
                ));
            }
            check_tool_name(name, tool)
                .map_err(|e| invalid("mcp-allow-tool", format!("`{raw}`: {e}")))?;
            allow.insert((name.to_owned(), tool.to_owned()));
        }
        let seconds = |value: Option<u64>, default: u64, key: &str| -> Result<Duration> {
            match value.unwrap_or(default) {
                0 => Err(invalid(key, "must be greater than 0".into())),
                s => Ok(Duration::from_secs(s)),
            }
        };
        Ok(McpClientSettings {
            servers: servers.into_values().collect(),
            allow,
            timeout: seconds(
                self.mcp_timeout_seconds,
                McpClientSettings::DEFAULT_TIMEOUT_SECONDS,
                "mcp-timeout-seconds",
            )?,
            refresh: seconds(
                self.mcp_refresh_seconds,
                McpClientSettings::DEFAULT_REFRESH_SECONDS,
                "mcp-refresh-seconds",
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(servers: &[&str], allow: &[&str]) -> McpClientArgs {
        McpClientArgs {
            mcp_server: Some(servers.iter().map(|s| s.to_string()).collect()),
            mcp_allow_tool: Some(allow.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn servers_headers_and_the_allowlist_are_read() {
        let mut a = args(
            &["deploys=http://127.0.0.1:9000/mcp"],
            &["deploys/recent_deploys"],
        );
        a.mcp_server_header = Some(vec![Secret::new("deploys=Authorization: Bearer s3cr3t")]);
        let s = a.settings().unwrap();
        assert_eq!(s.servers.len(), 1);
        assert_eq!(s.servers[0].name, "deploys");
        let h = s.servers[0].header.as_ref().unwrap();
        assert_eq!(h.value.expose(), "Bearer s3cr3t");
        assert!(
            !format!("{s:?}").contains("s3cr3t"),
            "the settings never print the token"
        );
        assert!(
            s.allow
                .contains(&("deploys".into(), "recent_deploys".into()))
        );
        assert!(McpClientArgs::default().settings().unwrap().is_empty());
    }

    #[test]
    fn a_header_comes_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h");
        std::fs::write(&path, "X-Api-Key: k3y-from-file\n").unwrap();
        let mut a = args(&["deploys=https://deploys.example/mcp"], &[]);
        a.mcp_server_header_file = Some(vec![format!("deploys={}", path.display())]);
        let s = a.settings().unwrap();
        let h = s.servers[0].header.as_ref().unwrap();
        assert_eq!(
            (h.name.as_str(), h.value.expose()),
            ("X-Api-Key", "k3y-from-file")
        );
    }

    #[test]
    fn bad_values_are_named() {
        let cases: &[(McpClientArgs, &str, &str)] = &[
            (
                args(&["deploys"], &[]),
                "--mcp-server",
                "`deploys` is not NAME=URL",
            ),
            (
                args(&["Deploys=http://x/mcp"], &[]),
                "--mcp-server",
                "`Deploys`",
            ),
            (
                args(&["deploys=ftp://x/mcp"], &[]),
                "--mcp-server",
                "not an http(s) URL",
            ),
            (
                args(&["deploys=https://u:hunter2@x/mcp"], &[]),
                "--mcp-server",
                "carries credentials",
            ),
            (
                args(&["deploys=http://x/mcp", "deploys=http://y/mcp"], &[]),
                "--mcp-server",
                "given twice",
            ),
            (
                args(&["deploys=http://x/mcp"], &["other/recent_deploys"]),
                "--mcp-allow-tool",
                "`other` is not a server",
            ),
            (
                args(&["deploys=http://x/mcp"], &["deploys"]),
                "--mcp-allow-tool",
                "`deploys` is not NAME/TOOL",
            ),
            (
                args(&["deploys=http://x/mcp"], &["deploys/recent.deploys"]),
                "--mcp-allow-tool",
                "recent.deploys",
            ),
        ];
        for (a, flag, says) in cases {
            let err = a.clone().settings().unwrap_err().to_string();
            assert!(err.contains(flag) && err.contains(says), "{err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
        let mut a = args(&["deploys=http://x/mcp"], &[]);
        a.mcp_server_header = Some(vec![Secret::new("other=Authorization: Bearer s3cr3t")]);
        let err = a.settings().unwrap_err().to_string();
        assert!(err.contains("`other` is not a server"), "{err}");
        assert!(!err.contains("s3cr3t"), "{err}");
        let mut a = args(&["deploys=http://x/mcp"], &[]);
        a.mcp_server_header = Some(vec![Secret::new("deploys=Bad Header: s3cr3t")]);
        let err = a.settings().unwrap_err().to_string();
        assert!(
            err.contains("--mcp-server-header") && !err.contains("s3cr3t"),
            "{err}"
        );
    }
}
