//! The variables a hook session starts with, from five sources: Berth's own (`DIR`,
//! `BERTH_ROOT`, …), each add-on's version and fields, kURL's variables for the fields of its
//! Installer type, and kURL's `key=value` script arguments.
//!
//! kURL's variables are what its conversion gives every field, set or not, so they are
//! defaults: a script argument replaces one (`private-address=…` over
//! `spec.kurl.privateAddress`, as kURL's flags win over the spec), and so does a value Berth
//! sets itself (`AIRGAP`). Every other variable has one source: a field or argument that would
//! set a variable another source sets, one the shell itself obeys (`PATH`, `BASH_ENV`,
//! `LD_PRELOAD`, …), or one the programs hooks run obey to load code or trust a host
//! (`PERL5OPT`, `GIT_SSH_COMMAND`, `HTTPS_PROXY`, …), is refused with both origins named,
//! never silently overridden.

use std::collections::BTreeMap;

use berth_formats::spec::flags::is_flag_variable;
use berth_formats::spec::kurl_type::{KurlVariable, is_kurl_key};
use berth_formats::spec::{
    FieldError, config_environment, is_variable_name, spec_key, upper_snake,
};
use serde_json::{Map, Value};

use crate::node::layout::Layout;

/// Variables bash, the dynamic loader or the helpers obey: never set from an argument.
const SHELL_VARIABLES: [&str; 18] = [
    "PATH",
    "BASH_ENV",
    "ENV",
    "IFS",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "HOME",
    "SHELL",
    "CDPATH",
    "GLOBIGNORE",
    "PROMPT_COMMAND",
    "BASH_XTRACEFD",
    "TMPDIR",
    "POSIXLY_CORRECT",
    "CONTAINERD_ADDRESS",
    "KUBECONFIG",
    "BERTH_CONTAINER_RUNTIME",
];

/// Variables the programs hooks run obey to load code, or to reach or trust other hosts:
/// interpreters' start-up options and library paths, the C library's converters and
/// tunables, the programs tools start, proxies and certificate stores. Never from an
/// argument or a field, so no first node, spec or join command can steer them.
const PROGRAM_VARIABLES: [&str; 61] = [
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "PERLIO",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONWARNINGS",
    "PYTHONINSPECT",
    "PYTHONUSERBASE",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_EXTRA_CA_CERTS",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "CLASSPATH",
    "LUA_INIT",
    "LUA_PATH",
    "GCONV_PATH",
    "LOCPATH",
    "NLSPATH",
    "GLIBC_TUNABLES",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "BROWSER",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "LESSOPEN",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "FTP_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "DOCKER_HOST",
    "WGETRC",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "AWKPATH",
    "AWKLIBPATH",
    "INPUTRC",
    "HOSTALIASES",
    "RESOLV_HOST_CONF",
    "LOCALDOMAIN",
    "RES_OPTIONS",
    "TZDIR",
    "TERMINFO",
    "TERMINFO_DIRS",
    "LESSKEY",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "NETRC",
    "SUDO_EDITOR",
];

/// Prefixes of variables programs obey in the same way: git's (`GIT_SSH_COMMAND`…), the
/// C library's allocator's, Java's, curl's, the XDG folders programs read their configuration
/// from (`XDG_CONFIG_HOME`: git's, among others), pip's and npm's package sources, systemd's,
/// GnuPG's.
const PROGRAM_PREFIXES: [&str; 11] = [
    "GIT_",
    "MALLOC_",
    "_JAVA_",
    "CURL_",
    "XDG_",
    "PIP_",
    "NPM_CONFIG_",
    "YARN_",
    "SYSTEMD_",
    "GNUPG",
    "GPG_",
];

/// Globals the helper library sets from the host and then obeys (kURL's: `K8S_DISTRO` names
/// the functions hooks call, `BIN_*` the programs they run; logging's colours, set before the
/// run's variables are): never from an argument or a field.
const LIBRARY_VARIABLES: [&str; 12] = [
    "K8S_DISTRO",
    "LSB_DIST",
    "DIST_VERSION",
    "DIST_VERSION_MAJOR",
    "DIST_VERSION_MINOR",
    "TEST_PROMPT_RESULT",
    "GREEN",
    "BLUE",
    "LIGHT_BLUE",
    "YELLOW",
    "RED",
    "NC",
];

#[derive(Debug, thiserror::Error)]
pub enum EnvironmentError {
    #[error(transparent)]
    Field(#[from] FieldError),
    #[error(
        "{origin}: `{name}` is not a name a variable can carry; use letters, digits, `-` and `_`"
    )]
    BadName { origin: String, name: String },
    #[error("{origin} would set ${variable}, which {first} sets")]
    Collision {
        variable: String,
        first: String,
        origin: String,
    },
    #[error("{origin} would set ${variable}, which the shell or Berth obeys")]
    Reserved { variable: String, origin: String },
    #[error(
        "{origin} names no add-on of this run ({addons}); an argument that is not one of kURL's flags sets an add-on's variable, `<add-on>-<field>=…`"
    )]
    NotAnAddons { origin: String, addons: String },
}

/// One variable: its value, where it came from, and whether another source may replace it.
#[derive(Debug)]
struct Entry {
    value: String,
    origin: String,
    default: bool,
}

/// The variables of one hook session, each with where it came from.
#[derive(Debug, Default)]
pub struct HookEnvironment {
    variables: BTreeMap<String, Entry>,
    /// `<ADDON>_` for each add-on of the run: what an argument's variable must start with.
    addon_prefixes: Vec<(String, String)>,
}

impl HookEnvironment {
    /// What every hook session sees of the node: `DIR`, `BERTH_ROOT`, `BERTH_BIN` and
    /// `BIN_KURL` (kURL's utility program, a link to `berth`).
    pub fn for_node(layout: &Layout) -> Self {
        let mut environment = Self::default();
        let mut berth = |name: &str, value: String| {
            environment.variables.insert(
                name.to_string(),
                Entry {
                    value,
                    origin: "Berth".to_string(),
                    default: false,
                },
            );
        };
        berth("DIR", layout.install_dir().display().to_string());
        berth("BERTH_ROOT", layout.root().display().to_string());
        berth("BIN_KURL", layout.kurl_program().display().to_string());
        // kURL's names for its programs that add-ons and helpers run.
        let programs = layout.programs_dir();
        berth(
            "BIN_YAMLUTIL",
            programs.join("yamlutil").display().to_string(),
        );
        berth(
            "BIN_PVMIGRATE",
            programs.join("pvmigrate").display().to_string(),
        );
        if let Ok(binary) = crate::own_program() {
            berth("BERTH_BIN", binary.display().to_string());
        }
        environment
    }

    /// A variable Berth itself sets (`INSTALLER_ID`, `AIRGAP`, …).
    pub fn berth(&mut self, name: &str, value: impl Into<String>) -> Result<(), EnvironmentError> {
        self.set(name.to_string(), value.into(), "Berth".to_string())
    }

    /// kURL's variables for the fields of its Installer type, as defaults. Berth's own value
    /// of one stands (`AIRGAP`); another add-on's field that would set one is refused.
    pub fn kurl(&mut self, variables: Vec<KurlVariable>) -> Result<(), EnvironmentError> {
        for variable in variables {
            match self.variables.get(&variable.variable) {
                Some(first) if first.origin == "Berth" => {}
                Some(first) => {
                    return Err(EnvironmentError::Collision {
                        variable: variable.variable,
                        first: first.origin.clone(),
                        origin: variable.origin,
                    });
                }
                None => {
                    self.variables.insert(
                        variable.variable,
                        Entry {
                            value: variable.value,
                            origin: variable.origin,
                            default: true,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// `<ADDON>_VERSION` and a variable per field of the add-on's configuration: under kURL's
    /// names for one of kURL's add-ons (see [`HookEnvironment::kurl`]), `<ADDON>_<FIELD>`
    /// for any other.
    pub fn addon(
        &mut self,
        name: &str,
        version: &str,
        config: &Map<String, Value>,
    ) -> Result<(), EnvironmentError> {
        self.addon_prefixes
            .push((format!("{}_", upper_snake(name)), name.to_string()));
        self.set(
            format!("{}_VERSION", upper_snake(name)),
            version.to_string(),
            format!("the version of {name}"),
        )?;
        if is_kurl_key(spec_key(name)) {
            return Ok(());
        }
        for (variable, value) in config_environment(name, config)? {
            self.set(variable, value, format!("a field of {name}"))?;
        }
        Ok(())
    }

    /// A variable one of kURL's script flags sets (`NODE_LABELS` from `labels=`).
    pub fn flag(&mut self, name: &str, value: &str, flag: &str) -> Result<(), EnvironmentError> {
        self.set(
            name.to_string(),
            value.to_string(),
            format!("the flag `{flag}`"),
        )
    }

    /// A `key=value` script argument that is not one of kURL's flags: `demo-port` becomes
    /// `DEMO_PORT`. Such an argument is an add-on's (its key starts with the name of an add-on
    /// of the run, given to [`HookEnvironment::addon`] first) or sets one of kURL's variables
    /// (its Installer fields' or its flags'): what hooks receive from the command line is allowed by name, not only kept
    /// from what is known to steer programs.
    pub fn param(&mut self, key: &str, value: &str) -> Result<(), EnvironmentError> {
        let origin = format!("the argument `{key}=…`");
        let plain = !key.is_empty()
            && key
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_'));
        let variable = upper_snake(key);
        if !plain || !is_variable_name(&variable) {
            return Err(EnvironmentError::BadName {
                origin,
                name: key.to_string(),
            });
        }
        reserved(&variable, &origin)?;
        // Allowed: an add-on's variable, or one of kURL's the argument replaces (see
        // [`HookEnvironment::kurl`]); one another source set is a collision, said below.
        let addons = self.addon_prefixes.iter().any(|(prefix, _)| {
            variable.starts_with(prefix.as_str()) && variable.len() > prefix.len()
        });
        if !addons && !self.variables.contains_key(&variable) && !is_flag_variable(&variable) {
            let mut addons: Vec<&str> = self
                .addon_prefixes
                .iter()
                .map(|(_, name)| name.as_str())
                .collect();
            addons.sort_unstable();
            return Err(EnvironmentError::NotAnAddons {
                origin,
                addons: addons.join(", "),
            });
        }
        self.set(variable, value.to_string(), origin)
    }

    fn set(
        &mut self,
        variable: String,
        value: String,
        origin: String,
    ) -> Result<(), EnvironmentError> {
        reserved(&variable, &origin)?;
        if let Some(first) = self.variables.get(&variable)
            && !first.default
        {
            return Err(EnvironmentError::Collision {
                variable,
                first: first.origin.clone(),
                origin,
            });
        }
        self.variables.insert(
            variable,
            Entry {
                value,
                origin,
                default: false,
            },
        );
        Ok(())
    }

    /// The variables, by name.
    pub fn into_vec(self) -> Vec<(String, String)> {
        self.variables
            .into_iter()
            .map(|(name, entry)| (name, entry.value))
            .collect()
    }
}

/// Refuses a variable the shell, the loader, the helper library or the programs hooks run obey
/// (only Berth itself sets `BERTH_*`).
fn reserved(variable: &str, origin: &str) -> Result<(), EnvironmentError> {
    if SHELL_VARIABLES.contains(&variable)
        || LIBRARY_VARIABLES.contains(&variable)
        || PROGRAM_VARIABLES.contains(&variable)
        || PROGRAM_PREFIXES
            .iter()
            .any(|prefix| variable.starts_with(prefix))
        || variable.starts_with("LD_")
        || variable.starts_with("BASH_")
        || variable.starts_with("BIN_")
        || variable.starts_with("BERTH_") && origin != "Berth"
    {
        return Err(EnvironmentError::Reserved {
            variable: variable.to_string(),
            origin: origin.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> HookEnvironment {
        HookEnvironment::for_node(&Layout::new("/tmp/berth-test-root"))
    }

    #[test]
    fn arguments_that_would_steer_the_shell_or_berth_are_refused() {
        for key in [
            "path",
            "bash-env",
            "dir",
            "ld-preload",
            "berth-root",
            "ifs",
            "bash_func_x",
            "perl5opt",
            "perl5db",
            "pythonwarnings",
            "browser",
            "git-ssh-command",
            "gconv-path",
            "node-options",
            "https-proxy",
            "ssl-cert-file",
            "malloc-check-",
            "xdg-config-home",
            "wgetrc",
            "phprc",
            "php-ini-scan-dir",
            "pip-index-url",
            "npm-config-registry",
            "awkpath",
        ] {
            let error = node().param(key, "x").unwrap_err();
            assert!(
                matches!(
                    error,
                    EnvironmentError::Reserved { .. } | EnvironmentError::Collision { .. }
                ),
                "{key}: {error}"
            );
        }
        for key in ["x=y", "a b", "", "1st", "a.b"] {
            assert!(
                matches!(
                    node().param(key, "x"),
                    Err(EnvironmentError::BadName { .. })
                ),
                "{key}"
            );
        }
        // An argument replaces one of kURL's variables.
        let mut environment = node();
        environment
            .kurl(vec![KurlVariable {
                variable: "PUBLIC_ADDRESS".into(),
                value: String::new(),
                origin: "spec.kurl.publicAddress".into(),
            }])
            .unwrap();
        environment.param("public-address", "10.0.0.1").unwrap();
        assert!(
            environment
                .into_vec()
                .contains(&("PUBLIC_ADDRESS".into(), "10.0.0.1".into()))
        );
    }

    #[test]
    fn an_argument_sets_only_an_addons_variable_or_one_of_kurls() {
        let mut environment = node();
        environment.addon("demo", "1.0.0", &Map::new()).unwrap();
        environment.param("demo-port", "8081").unwrap();
        // A variable one of kURL's flags sets (Berth's older spelling of `yes`).
        environment.param("assume-yes", "1").unwrap();
        for key in ["unknown-thing", "demo", "wget-rc", "lesspipe"] {
            let error = environment.param(key, "x").unwrap_err();
            assert!(
                matches!(error, EnvironmentError::NotAnAddons { .. }),
                "{key}: {error}"
            );
            assert!(error.to_string().contains("(demo)"), "{error}");
        }
        assert!(
            environment
                .into_vec()
                .contains(&("DEMO_PORT".into(), "8081".into()))
        );
    }

    #[test]
    fn another_addons_field_cannot_take_a_kurl_variable() {
        let mut environment = node();
        let config = Map::from_iter([("address".to_string(), Value::from("http://x"))]);
        environment.addon("proxy", "1.0.0", &config).unwrap();
        let error = environment
            .kurl(vec![KurlVariable {
                variable: "PROXY_ADDRESS".into(),
                value: String::new(),
                origin: "spec.kurl.proxyAddress".into(),
            }])
            .unwrap_err();
        assert!(error.to_string().contains("a field of proxy"), "{error}");
        // Berth's own value of a kURL variable stands, without an error.
        let mut environment = node();
        environment.berth("AIRGAP", "1").unwrap();
        environment
            .kurl(vec![KurlVariable {
                variable: "AIRGAP".into(),
                value: String::new(),
                origin: "spec.kurl.airgap".into(),
            }])
            .unwrap();
        assert!(
            environment
                .into_vec()
                .contains(&("AIRGAP".into(), "1".into()))
        );
        for key in ["k8s-distro", "bin-subnet", "lsb-dist", "green", "nc"] {
            assert!(
                matches!(
                    node().param(key, "x"),
                    Err(EnvironmentError::Reserved { .. })
                ),
                "{key}"
            );
        }
    }

    #[test]
    fn two_sources_of_one_variable_are_refused_with_both_named() {
        let mut environment = node();
        let mut config = Map::new();
        config.insert("bar".into(), Value::from(1));
        environment.addon("foo", "1.0.0", &config).unwrap();
        // `foo-bar`'s version would be FOO_BAR_VERSION: no clash with FOO_BAR.
        environment.addon("foo-bar", "1.0.0", &Map::new()).unwrap();
        let error = environment.param("foo-bar", "x").unwrap_err();
        assert!(error.to_string().contains("a field of foo"), "{error}");
        let error = environment.addon("foo", "2.0.0", &Map::new()).unwrap_err();
        assert!(error.to_string().contains("the version of foo"), "{error}");
    }
}
