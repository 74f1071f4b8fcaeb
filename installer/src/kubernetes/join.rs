//! Join parameters: what a new node needs from this one (an address, a token, a CA hash…),
//! published by hooks with `berth_set_join_param`, and the join command built from them.
//!
//! They live in one file readable by root alone (0600). A secret expires: it is given a time
//! to live when published, `berth join-command` refuses to print one that has expired, and the
//! join command carries the earliest expiry of the secrets in it, so `berth join` refuses the
//! command once that time has passed. The service a secret belongs to checks the secret
//! itself, as kubeadm checks its tokens; the expiry is Berth's own guard on top.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use berth_formats::time::rfc3339;
use serde::{Deserialize, Serialize};

use crate::files::write_atomically_with_mode;

/// The join command's own parameter: when the secrets in it expire (RFC 3339, UTC).
pub const EXPIRES_PARAM: &str = "join-expires";

/// A secret's time to live when none is configured, as kubeadm's bootstrap tokens.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JoinFile {
    /// The installer this node was installed with.
    pub installer: Option<String>,
    /// Where this installer's scripts are served (`<server>/<id>`), for the online command.
    pub scripts_url: Option<String>,
    pub params: BTreeMap<String, JoinParam>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JoinParam {
    pub value: String,
    #[serde(default)]
    pub secret: bool,
    /// Given only to nodes that join the control plane.
    #[serde(default)]
    pub control_plane: bool,
    pub set_at: String,
    /// Secrets only.
    pub expires_at: Option<String>,
}

impl JoinParam {
    /// When it expires (`None` for a parameter that does not); an unreadable time is an
    /// error, never taken for one still to come.
    pub fn expiry(&self) -> Result<Option<SystemTime>, JoinError> {
        self.expires_at
            .as_deref()
            .map(|expires_at| {
                humantime::parse_rfc3339(expires_at).map_err(|_| JoinError::BadExpiry {
                    value: expires_at.into(),
                })
            })
            .transpose()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is damaged: {message}\nhint: run `berth install` again to publish the join parameters anew"
    )]
    Damaged { path: PathBuf, message: String },
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "`{key}` is not a join parameter name: use letters, digits and `-`, starting with a letter"
    )]
    BadKey { key: String },
    #[error(
        "no installer is recorded on this node, so it has no join command to print\nhint: run `berth join-command` on the cluster's first node, the one `berth install` (or install.sh) installed"
    )]
    NotInstalled,
    #[error(
        "installer {id} was installed without the URL its scripts are served from, so there is no online join command\nhint: pass --airgap for the command that runs the bundle's join.sh, or install through the served install.sh"
    )]
    NoScriptsUrl { id: String },
    #[error(
        "the join secret{} {} expired at {expired_at}\nhint: run `berth install` again on this node: its hooks publish fresh secrets",
        if keys.len() == 1 { "" } else { "s" },
        keys.join(", ")
    )]
    SecretsExpired {
        keys: Vec<String>,
        expired_at: String,
    },
    #[error(
        "this join command expired at {expired_at} (its secrets live for a limited time)\nhint: run `berth join-command` on a node of the cluster for a fresh one"
    )]
    CommandExpired { expired_at: String },
    #[error("{EXPIRES_PARAM}={value} is not a time (RFC 3339, as `berth join-command` prints it)")]
    BadExpiry { value: String },
}

/// The join parameters of a node.
#[derive(Debug, Clone)]
pub struct JoinStore {
    path: PathBuf,
}

impl JoinStore {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// The join command of what is published here ([`join_command`]).
    pub fn command(&self, options: CommandOptions) -> Result<String, JoinError> {
        join_command(&self.load()?, options)
    }

    pub fn load(&self) -> Result<JoinFile, JoinError> {
        match fs_err::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| JoinError::Damaged {
                path: self.path.clone(),
                message: error.to_string(),
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(JoinFile::default()),
            Err(source) => Err(JoinError::Read {
                path: self.path.clone(),
                source,
            }),
        }
    }

    /// Writes the file readable by its owner alone; it is never world-readable, even briefly.
    pub fn save(&self, file: &JoinFile) -> Result<(), JoinError> {
        let write_error = |source| JoinError::Write {
            path: self.path.clone(),
            source,
        };
        let mut bytes = serde_json::to_vec_pretty(file).expect("join parameters serialize");
        bytes.push(b'\n');
        write_atomically_with_mode(&self.path, &bytes, 0o600).map_err(write_error)
    }

    /// Records the installer a run applies, keeping the parameters hooks published. An
    /// unchanged record is not written again.
    pub fn record_installer(&self, id: &str, scripts_url: Option<&str>) -> Result<(), JoinError> {
        let old = self.load()?;
        let mut file = old.clone();
        file.installer = Some(id.to_string());
        if let Some(url) = scripts_url {
            file.scripts_url = Some(url.trim_end_matches('/').to_string());
        }
        if file != old {
            self.save(&file)?;
        }
        Ok(())
    }

    /// Publishes one parameter; a secret expires `ttl` from now.
    pub fn set(
        &self,
        key: &str,
        value: String,
        secret: bool,
        control_plane: bool,
        ttl: Duration,
    ) -> Result<(), JoinError> {
        self.set_all(
            &[NewParam {
                key,
                value,
                secret,
                control_plane,
            }],
            ttl,
        )
    }

    /// Publishes several parameters in one write, so that a join command printed meanwhile
    /// carries all of them or none; a secret expires `ttl` from now.
    pub fn set_all(&self, params: &[NewParam<'_>], ttl: Duration) -> Result<(), JoinError> {
        for param in params {
            check_key(param.key)?;
        }
        let mut file = self.load()?;
        let now = SystemTime::now();
        for param in params {
            file.params.insert(
                param.key.to_string(),
                JoinParam {
                    value: param.value.clone(),
                    secret: param.secret,
                    control_plane: param.control_plane,
                    set_at: rfc3339(now),
                    expires_at: param.secret.then(|| rfc3339(now + ttl.min(MAX_TTL))),
                },
            );
        }
        self.save(&file)
    }
}

/// A parameter to publish with [`JoinStore::set_all`].
#[derive(Debug, Clone)]
pub struct NewParam<'a> {
    pub key: &'a str,
    pub value: String,
    /// Kept from logs and expiring.
    pub secret: bool,
    /// Given only to nodes that join the control plane.
    pub control_plane: bool,
}

fn check_key(key: &str) -> Result<(), JoinError> {
    let mut characters = key.chars();
    let valid = characters.next().is_some_and(|c| c.is_ascii_alphabetic())
        && characters.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if valid && key != EXPIRES_PARAM {
        Ok(())
    } else {
        Err(JoinError::BadKey { key: key.into() })
    }
}

/// Which join command to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandOptions {
    pub control_plane: bool,
    pub airgap: bool,
}

/// A join's `key=value` parameters: every one published (those for the control plane only
/// with `control_plane`), then `join-expires=` when a secret is among them. Refused once a
/// secret has expired.
pub fn join_params(
    file: &JoinFile,
    control_plane: bool,
) -> Result<Vec<(String, String)>, JoinError> {
    let now = SystemTime::now();
    let chosen: Vec<(&String, &JoinParam)> = file
        .params
        .iter()
        .filter(|(_, param)| control_plane || !param.control_plane)
        .collect();
    let mut expired = Vec::new();
    let mut earliest: Option<SystemTime> = None;
    for (key, param) in &chosen {
        if let Some(time) = param.expiry()? {
            if time <= now {
                let at = param.expires_at.clone().unwrap_or_default();
                expired.push(((*key).clone(), at));
            }
            earliest = Some(earliest.map_or(time, |earliest| earliest.min(time)));
        }
    }
    if let Some((_, expired_at)) = expired.first() {
        return Err(JoinError::SecretsExpired {
            expired_at: expired_at.clone(),
            keys: expired.into_iter().map(|(key, _)| key).collect(),
        });
    }
    let mut params: Vec<(String, String)> = chosen
        .into_iter()
        .map(|(key, param)| (key.clone(), param.value.clone()))
        .collect();
    if let Some(earliest) = earliest {
        params.push((EXPIRES_PARAM.to_string(), rfc3339(earliest)));
    }
    Ok(params)
}

/// The command that joins a new node, in kURL's form: the served join.sh (or the bundle's, for
/// airgap) with every parameter as `key=value`, then `join-expires=` when a secret is in it.
pub fn join_command(file: &JoinFile, options: CommandOptions) -> Result<String, JoinError> {
    let id = file.installer.as_deref().ok_or(JoinError::NotInstalled)?;
    let mut words = Vec::new();
    if options.airgap {
        words.push("airgap".to_string());
    }
    for (key, value) in join_params(file, options.control_plane)? {
        words.push(berth_formats::shell::word(&format!("{key}={value}")));
    }
    if options.control_plane {
        words.push("control-plane".to_string());
    }
    let arguments = words.join(" ");
    Ok(if options.airgap {
        format!("cat join.sh | sudo bash -s {arguments}")
    } else {
        let url = file
            .scripts_url
            .as_deref()
            .ok_or_else(|| JoinError::NoScriptsUrl { id: id.into() })?;
        format!(
            "curl -fsSL {} | sudo bash -s {arguments}",
            berth_formats::shell::word(&format!("{url}/join.sh"))
        )
    })
}

/// Takes `join-expires` out of a join's parameters and refuses a command past it.
pub fn check_expiry(params: &mut Vec<(String, String)>) -> Result<(), JoinError> {
    let Some(position) = params.iter().position(|(key, _)| key == EXPIRES_PARAM) else {
        return Ok(());
    };
    let (_, value) = params.remove(position);
    let expires = humantime::parse_rfc3339(&value).map_err(|_| JoinError::BadExpiry {
        value: value.clone(),
    })?;
    if expires <= SystemTime::now() {
        return Err(JoinError::CommandExpired { expired_at: value });
    }
    Ok(())
}

/// The longest a join secret may live.
pub const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

/// A join secret's lifetime: a duration (`24h`, `90m`), or seconds alone as the engine passes
/// it to hooks; from one second to [`MAX_TTL`].
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    berth_formats::duration::parse(text, Duration::from_secs(1)..=MAX_TTL)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, JoinStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = JoinStore::new(dir.path().join("join.json"));
        (dir, store)
    }

    #[test]
    fn an_unreadable_expiry_is_an_error_not_a_time_to_come() {
        let param = |expires_at: Option<&str>| JoinParam {
            value: "s3cr3t".into(),
            secret: true,
            control_plane: false,
            set_at: String::new(),
            expires_at: expires_at.map(str::to_string),
        };
        assert!(matches!(
            param(Some("zzzz")).expiry(),
            Err(JoinError::BadExpiry { .. })
        ));
        assert_eq!(param(None).expiry().unwrap(), None);
        assert!(
            param(Some("2026-01-01T00:00:00Z"))
                .expiry()
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn the_command_carries_every_parameter_and_the_earliest_expiry() {
        let (_dir, store) = store();
        store
            .record_installer("abc1234", Some("http://10.0.0.1:8080/abc1234/"))
            .unwrap();
        store
            .set(
                "demo-address",
                "10.0.0.2:8080".into(),
                false,
                false,
                DEFAULT_TTL,
            )
            .unwrap();
        store
            .set("demo-token", "s3cr3t".into(), true, false, DEFAULT_TTL)
            .unwrap();
        store
            .set(
                "cert-key",
                "k'ey".into(),
                true,
                true,
                Duration::from_secs(60),
            )
            .unwrap();
        let file = store.load().unwrap();
        let worker = join_command(&file, CommandOptions::default()).unwrap();
        assert!(worker.starts_with(
            "curl -fsSL http://10.0.0.1:8080/abc1234/join.sh | sudo bash -s demo-address=10.0.0.2:8080 demo-token=s3cr3t join-expires="
        ), "{worker}");
        assert!(!worker.contains("cert-key"), "{worker}");
        let control_plane = join_command(
            &file,
            CommandOptions {
                control_plane: true,
                airgap: true,
            },
        )
        .unwrap();
        assert!(
            control_plane.starts_with("cat join.sh | sudo bash -s airgap 'cert-key=k'\\''ey' "),
            "{control_plane}"
        );
        assert!(control_plane.ends_with(" control-plane"), "{control_plane}");
        // The control-plane command expires with its shortest-lived secret.
        let expiry = |command: &str| {
            let value = command
                .split(' ')
                .find_map(|word| word.strip_prefix("join-expires="))
                .unwrap()
                .to_string();
            humantime::parse_rfc3339(&value).unwrap()
        };
        assert!(expiry(&control_plane) < expiry(&worker));
        let metadata = fs_err::metadata(&store.path).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn expired_secrets_are_refused_on_both_sides() {
        let (_dir, store) = store();
        store
            .record_installer("abc1234", Some("http://a/abc1234"))
            .unwrap();
        store
            .set("token", "x".into(), true, false, Duration::ZERO)
            .unwrap();
        let error = join_command(&store.load().unwrap(), CommandOptions::default()).unwrap_err();
        assert!(
            error.to_string().contains("the join secret token expired"),
            "{error}"
        );

        let mut params = vec![
            ("a".to_string(), "1".to_string()),
            (
                EXPIRES_PARAM.to_string(),
                "2020-01-01T00:00:00Z".to_string(),
            ),
        ];
        let error = check_expiry(&mut params).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("expired at 2020-01-01T00:00:00Z"),
            "{error}"
        );
        let mut params = vec![(
            EXPIRES_PARAM.to_string(),
            "2999-01-01T00:00:00Z".to_string(),
        )];
        check_expiry(&mut params).unwrap();
        assert!(params.is_empty());
        let mut params = vec![(EXPIRES_PARAM.to_string(), "tomorrow".to_string())];
        assert!(matches!(
            check_expiry(&mut params),
            Err(JoinError::BadExpiry { .. })
        ));
    }

    #[test]
    fn keys_are_checked_and_a_node_without_an_installer_has_no_command() {
        let (_dir, store) = store();
        assert!(matches!(
            store.set("bad key", "v".into(), false, false, DEFAULT_TTL),
            Err(JoinError::BadKey { .. })
        ));
        assert!(matches!(
            join_command(&JoinFile::default(), CommandOptions::default()),
            Err(JoinError::NotInstalled)
        ));
    }
}
