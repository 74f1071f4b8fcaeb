//! The `ssh` provider: hosts a vendor already has (their RHEL, Ubuntu, Amazon Linux machines),
//! listed in a hosts file with the OS id each runs. A cell takes the hosts of its OS it needs;
//! between cells the runner resets Berth on them, so they should start fresh for each run.
//!
//! ```yaml
//! hosts:
//!   - address: 192.0.2.10
//!     port: 22            # default 22
//!     user: root          # another user needs passwordless sudo
//!     key: /path/to/key   # default ~/.ssh/id_ed25519
//!     os: ubuntu-2204     # an id of the OS spec
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};

use super::node::SshNode;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    pub address: String,
    #[serde(default = "ssh_port")]
    pub port: u16,
    #[serde(default = "root")]
    pub user: String,
    #[serde(default)]
    pub key: Option<PathBuf>,
    pub os: String,
}

fn ssh_port() -> u16 {
    22
}

fn root() -> String {
    "root".to_string()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostsFile {
    pub hosts: Vec<HostEntry>,
}

/// A word safe for ssh's command line: an address, a user name.
fn plain(word: &str) -> bool {
    !word.is_empty()
        && word.len() <= 253
        && !word.starts_with('-')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
}

pub fn read(path: &Path) -> anyhow::Result<HostsFile> {
    let text = fs_err::read_to_string(path)?;
    let file: HostsFile = serde_norway::from_str(&text)
        .with_context(|| format!("{}: not a hosts file", path.display()))?;
    for (index, host) in file.hosts.iter().enumerate() {
        if !plain(&host.address) || !plain(&host.user) {
            bail!(
                "{}: host {}: the address and user must be plain names (letters, digits, `.`, `-`, `_`, `:`)",
                path.display(),
                index + 1
            );
        }
    }
    Ok(file)
}

impl HostEntry {
    /// The host as a node of a cell.
    pub fn node(
        &self,
        name: &str,
        known_hosts: &Path,
        forward: Option<u16>,
    ) -> anyhow::Result<SshNode> {
        let key = match &self.key {
            Some(key) => key.clone(),
            None => dirs::home_dir()
                .context("no home folder for the default key; give each host a `key`")?
                .join(".ssh/id_ed25519"),
        };
        Ok(SshNode {
            name: name.to_string(),
            address: self.address.clone(),
            port: self.port,
            user: self.user.clone(),
            key,
            known_hosts: known_hosts.to_path_buf(),
            forward,
            console: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_or_user_that_could_become_an_ssh_option_is_refused() {
        let file = tempfile::NamedTempFile::new().unwrap();
        for (address, user) in [
            ("-oProxyCommand=x", "root"),
            ("192.0.2.1", "a b"),
            ("h;reboot", "root"),
        ] {
            fs_err::write(
                file.path(),
                format!("hosts:\n  - {{address: '{address}', user: '{user}', os: debian-12}}\n"),
            )
            .unwrap();
            let error = read(file.path()).unwrap_err().to_string();
            assert!(error.contains("plain names"), "{address} {user}: {error}");
        }
        fs_err::write(
            file.path(),
            "hosts:\n  - {address: 192.0.2.1, os: debian-12}\n",
        )
        .unwrap();
        let hosts = read(file.path()).unwrap();
        assert_eq!(
            (hosts.hosts[0].port, hosts.hosts[0].user.as_str()),
            (22, "root")
        );
    }
}
