//! kURL's script flags: the bare words (`ha`, `preserve-selinux-config`, …) and `key=value`
//! pairs its install, join and upgrade scripts take. As kURL does, a flag is either merged into
//! the spec before its variables are made (`kurl_util/cmd/bashmerge`, `parseBashFlags`: `ha`
//! sets `kubernetes.HACluster`, which hooks then see as `HA_CLUSTER=1`), or sets a variable
//! of its own (`scripts/common/utilbinaries.sh`, `get_patch_yaml`: `labels=` is
//! `NODE_LABELS`). A `key=value` pair that is not one of kURL's flags is Berth's: a join
//! parameter an add-on published, or a variable for hooks (`demo-port=` is `DEMO_PORT`).

use serde_json::Value;

use super::kurl_type::{FieldKind, fields_of};
use super::{INSTALLER_SETTINGS_KEY, InstallerSpec, SETTINGS_SECTIONS, addon_folder};

/// What a flag does.
#[derive(Debug, Clone, Copy)]
enum Effect {
    /// Sets a field of the spec: `true` for a bare word, the value for one that takes it.
    Field(&'static str, &'static str),
    /// Adds the value's comma-separated items to a list field of the spec.
    Append(&'static str, &'static str),
    /// Sets a boolean field of an add-on, only when the spec installs the add-on.
    FieldOfPresent(&'static str, &'static str),
    /// `kubernetes-master-address`: the field, and ekco's internal load balancer when the
    /// address is `localhost:6444` and the spec installs ekco.
    MasterAddress,
    /// Sets a variable: to the value, or to `1` for a bare word.
    Variable(&'static str),
    /// Sets a variable, each repeat adding `,value`.
    VariableList(&'static str),
    /// Sets a variable to the first value given.
    VariableOnce(&'static str),
    /// Taken and does nothing, as in kURL (a flag kept for old command lines).
    Nothing,
    /// Taken, does nothing, and says so.
    Notice(&'static str),
    /// `installer-spec-file=`: a spec whose fields are merged over the installer's, as kURL's
    /// `installermerge` merges them, before the other flags.
    SpecFile,
    /// Refused: what Berth does instead.
    Refused(&'static str),
}

/// One of kURL's flags.
#[derive(Debug, Clone, Copy)]
struct Flag {
    name: &'static str,
    /// Whether kURL requires `name=value` (its `checkIfFlagHasValue`, plus every flag whose
    /// value it reads).
    takes_value: bool,
    effect: Effect,
}

const fn word(name: &'static str, effect: Effect) -> Flag {
    Flag {
        name,
        takes_value: false,
        effect,
    }
}

const fn pair(name: &'static str, effect: Effect) -> Flag {
    Flag {
        name,
        takes_value: true,
        effect,
    }
}

use Effect::{
    Append, Field, FieldOfPresent, MasterAddress, Nothing, Notice, Refused, SpecFile, Variable,
    VariableList, VariableOnce,
};

/// Every flag of kURL's scripts, in the order of kURL's `parseBashFlags`.
const FLAGS: &[Flag] = &[
    pair(
        "additional-no-proxy-addresses",
        Append("kurl", "additionalNoProxyAddresses"),
    ),
    word("airgap", Field("kurl", "airgap")),
    word(
        "aws-exclude-storage-class",
        Field("aws", "excludeStorageClass"),
    ),
    pair("cert-key", Field("kubernetes", "certKey")),
    word("control-plane", Field("kubernetes", "controlPlane")),
    pair("docker-registry-ip", Field("docker", "dockerRegistryIP")),
    word("ha", Field("kubernetes", "HACluster")),
    pair(
        "container-log-max-size",
        Field("kubernetes", "containerLogMaxSize"),
    ),
    pair(
        "container-log-max-files",
        Field("kubernetes", "containerLogMaxFiles"),
    ),
    pair(
        "kubernetes-max-pods-per-node",
        Field("kubernetes", "maxPodsPerNode"),
    ),
    pair("kubeadm-token", Field("kubernetes", "kubeadmToken")),
    pair(
        "kubeadm-token-ca-hash",
        Field("kubernetes", "kubeadmTokenCAHash"),
    ),
    pair(
        "load-balancer-address",
        Field("kubernetes", "loadBalancerAddress"),
    ),
    word(
        "ekco-enable-internal-load-balancer",
        FieldOfPresent("ekco", "enableInternalLoadBalancer"),
    ),
    word(
        "kubernetes-load-balancer-use-first-primary",
        Field("kubernetes", "loadBalancerUseFirstPrimary"),
    ),
    pair("kubernetes-master-address", MasterAddress),
    word(
        "kubernetes-cis-compliance",
        Field("kubernetes", "cisCompliance"),
    ),
    pair(
        "kubernetes-cluster-name",
        Field("kubernetes", "clusterName"),
    ),
    pair("kubernetes-version", Field("kubernetes", "version")),
    pair(
        "kubernetes-init-ignore-preflight-errors",
        Field("kubernetes", "initIgnorePreflightErrors"),
    ),
    pair(
        "kubernetes-upgrade-ignore-preflight-errors",
        Field("kubernetes", "upgradeIgnorePreflightErrors"),
    ),
    pair(
        "kurl-install-directory",
        Refused(
            "Berth keeps its files under /var/lib/berth; BERTH_ROOT moves the whole of Berth's root",
        ),
    ),
    pair("installer-spec-file", SpecFile),
    pair("kurl-registry-ip", Variable("KURL_REGISTRY_IP")),
    pair("labels", Variable("NODE_LABELS")),
    word(
        "ignore-remote-load-images-prompt",
        Field("kurl", "ignoreRemoteLoadImagesPrompt"),
    ),
    word(
        "ignore-remote-upgrade-prompt",
        Field("kurl", "ignoreRemoteUpgradePrompt"),
    ),
    word(
        "host-preflight-ignore",
        Field("kurl", "hostPreflightIgnore"),
    ),
    word("preflight-ignore", Field("kurl", "hostPreflightIgnore")),
    word("preflight-ignore-warnings", Nothing),
    word(
        "host-preflight-enforce-warnings",
        Field("kurl", "hostPreflightEnforceWarnings"),
    ),
    word(
        "dismiss-host-packages-preflight",
        Variable("KURL_DISMISS_HOST_PACKAGES_PREFLIGHT"),
    ),
    word("preserve-docker-config", Field("docker", "preserveConfig")),
    word(
        "preserve-firewalld-config",
        Field("firewalldConfig", "preserveConfig"),
    ),
    word(
        "preserve-iptables-config",
        Field("iptablesConfig", "preserveConfig"),
    ),
    word(
        "preserve-selinux-config",
        Field("selinuxConfig", "preserveConfig"),
    ),
    pair("public-address", Field("kurl", "publicAddress")),
    pair("private-address", Field("kurl", "privateAddress")),
    word(
        "skip-system-package-install",
        Field("kurl", "skipSystemPackageInstall"),
    ),
    pair(
        "storage-migration-ready-timeout",
        Variable("STORAGE_MIGRATION_READY_TIMEOUT"),
    ),
    word(
        "exclude-builtin-host-preflights",
        Field("kurl", "excludeBuiltinHostPreflights"),
    ),
    word(
        "exclude-builtin-preflights",
        Field("kurl", "excludeBuiltinHostPreflights"),
    ),
    pair(
        "app-version-label",
        Field("kotsadm", "applicationVersionLabel"),
    ),
    word("yes", Variable("ASSUME_YES")),
    word(
        "auto-upgrades-enabled",
        Notice("`auto-upgrades-enabled` is no longer supported by kURL and does nothing"),
    ),
    pair("primary-host", VariableList("PRIMARY_HOST")),
    pair("secondary-host", VariableList("SECONDARY_HOST")),
    word(
        "force-reapply-addons",
        Notice(
            "`force-reapply-addons` is deprecated in kURL and does nothing; Berth's `force-reapply` runs every add-on's hooks again",
        ),
    ),
    word("ipv6", Field("kurl", "ipv6")),
    pair("velero-restic-timeout", Field("velero", "resticTimeout")),
    pair("velero-server-flags", Append("velero", "serverFlags")),
    pair("ekco-address", VariableOnce("EKCO_ADDRESS")),
    pair("ekco-auth-token", VariableOnce("EKCO_AUTH_TOKEN")),
];

/// The names of every flag kURL's scripts take, for an error that lists them.
pub fn known_flags() -> Vec<&'static str> {
    FLAGS.iter().map(|flag| flag.name).collect()
}

/// Whether `name` is one of kURL's flags.
pub fn is_flag(name: &str) -> bool {
    find(name).is_some()
}

/// Whether one of kURL's flags sets the variable `variable` (`ASSUME_YES` by `yes`).
pub fn is_flag_variable(variable: &str) -> bool {
    FLAGS.iter().any(|flag| {
        matches!(
            flag.effect,
            Variable(name) | VariableList(name) | VariableOnce(name) if name == variable
        )
    })
}

fn find(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|flag| flag.name == name)
}

/// A flag refused, as kURL refuses it or where Berth does the work otherwise.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    #[error("unknown argument `{word}`; kURL's scripts take: {}", known_flags().join(", "))]
    Unknown { word: String },
    #[error("flag {name} does not have a value; give {name}=VALUE")]
    NoValue { name: String },
    #[error("flag {name}: `{value}` is not a whole number")]
    NotANumber { name: String, value: String },
    #[error("flag {name} is kURL's, and Berth does not take it: {instead}")]
    Refused { name: String, instead: &'static str },
}

/// Checks a bare word the way kURL's `get_patch_yaml` and `bashmerge` do: one of kURL's flags,
/// and one that needs no value.
pub fn check_word(word: &str) -> Result<(), FlagError> {
    let flag = find(word).ok_or_else(|| FlagError::Unknown {
        word: word.to_string(),
    })?;
    if flag.takes_value {
        return Err(FlagError::NoValue {
            name: word.to_string(),
        });
    }
    Ok(())
}

/// How a field's value changes.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Set(Value),
    Append(Vec<String>),
}

/// One change a flag makes to the spec.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldChange {
    /// kURL's spec key (`kubernetes`, `kurl`, `firewalldConfig`, …).
    pub key: &'static str,
    pub field: &'static str,
    pub change: Change,
    /// Only when the spec installs the add-on (kURL's `if installer.Spec.Ekco != nil`).
    pub only_if_present: bool,
}

/// One variable a flag sets itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagVariable {
    pub name: &'static str,
    pub value: String,
    /// The flag that set it.
    pub flag: &'static str,
}

/// What a run's script arguments mean, read as kURL reads them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptFlags {
    /// Changes to merge into the spec, in the order given.
    pub changes: Vec<FieldChange>,
    /// Variables set by flags that do not change the spec.
    pub variables: Vec<FlagVariable>,
    /// The `key=value` pairs that are not kURL's flags: Berth's and the add-ons'.
    pub others: Vec<(String, String)>,
    /// What a flag that does nothing says.
    pub notices: Vec<&'static str>,
    /// `installer-spec-file=`: the spec to merge over the installer's (the last one given).
    pub spec_file: Option<String>,
}

impl ScriptFlags {
    /// Reads the arguments, each `(key, value)`: a bare word has an empty value, and was
    /// checked with [`check_word`] where the distinction was still known.
    pub fn read(arguments: &[(String, String)]) -> Result<Self, FlagError> {
        let mut flags = Self::default();
        for (key, value) in arguments {
            let Some(flag) = find(key) else {
                flags.others.push((key.clone(), value.clone()));
                continue;
            };
            flags.add(flag, value)?;
        }
        Ok(flags)
    }

    fn add(&mut self, flag: &'static Flag, value: &str) -> Result<(), FlagError> {
        let set = |key, field, value| FieldChange {
            key,
            field,
            change: Change::Set(value),
            only_if_present: false,
        };
        match flag.effect {
            Field(key, field) => {
                let value = field_value(flag.name, key, field, value)?;
                self.changes.push(set(key, field, value));
            }
            Append(key, field) => self.changes.push(FieldChange {
                key,
                field,
                change: Change::Append(value.split(',').map(str::to_string).collect()),
                only_if_present: false,
            }),
            FieldOfPresent(key, field) => self.changes.push(FieldChange {
                only_if_present: true,
                ..set(key, field, Value::Bool(true))
            }),
            MasterAddress => {
                self.changes.push(set(
                    "kubernetes",
                    "masterAddress",
                    Value::String(value.to_string()),
                ));
                if value == "localhost:6444" {
                    self.changes.push(FieldChange {
                        only_if_present: true,
                        ..set("ekco", "enableInternalLoadBalancer", Value::Bool(true))
                    });
                }
            }
            Variable(name) => {
                let value = if flag.takes_value { value } else { "1" };
                self.variables.retain(|variable| variable.name != name);
                self.variables.push(FlagVariable {
                    name,
                    value: value.to_string(),
                    flag: flag.name,
                });
            }
            VariableList(name) => {
                match self
                    .variables
                    .iter_mut()
                    .find(|variable| variable.name == name)
                {
                    Some(variable) => {
                        variable.value.push(',');
                        variable.value.push_str(value);
                    }
                    None => self.variables.push(FlagVariable {
                        name,
                        value: value.to_string(),
                        flag: flag.name,
                    }),
                }
            }
            VariableOnce(name) => {
                if !self.variables.iter().any(|variable| variable.name == name) {
                    self.variables.push(FlagVariable {
                        name,
                        value: value.to_string(),
                        flag: flag.name,
                    });
                }
            }
            Nothing => {}
            Notice(text) => self.notices.push(text),
            SpecFile => self.spec_file = Some(value.to_string()),
            Refused(instead) => {
                return Err(FlagError::Refused {
                    name: flag.name.to_string(),
                    instead,
                });
            }
        }
        Ok(())
    }

    /// The flags' value of a variable (`ASSUME_YES`), if a flag sets it.
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.variables
            .iter()
            .find(|variable| variable.name == name)
            .map(|variable| variable.value.as_str())
    }
}

/// The value a flag gives a field, of the field's type: `true` for a boolean, a number for
/// a whole number (kURL's `strconv.Atoi`), the text otherwise; `kubernetes-version` without
/// its leading `v`s (kURL's `strings.TrimLeft`).
fn field_value(name: &str, key: &str, field: &str, value: &str) -> Result<Value, FlagError> {
    let kind = fields_of(key)
        .find(|known| known.field == field)
        .map(|known| known.kind);
    Ok(match kind {
        Some(FieldKind::Bool | FieldKind::BoolDefaultTrue | FieldKind::BoolOneOrZero) => {
            Value::Bool(true)
        }
        Some(FieldKind::Integer) => {
            let number: i64 = value.parse().map_err(|_| FlagError::NotANumber {
                name: name.to_string(),
                value: value.to_string(),
            })?;
            Value::from(number)
        }
        _ if field == "version" => Value::String(value.trim_start_matches('v').to_string()),
        _ => Value::String(value.to_string()),
    })
}

impl InstallerSpec {
    /// The script flags applied as kURL applies them: the `installer-spec-file=` spec merged
    /// over this one (kURL's `merge_yaml_specs`), then every other flag (`bashmerge`).
    pub fn apply_script_flags(&mut self, flags: &ScriptFlags) -> Result<(), super::SpecError> {
        if let Some(file) = &flags.spec_file {
            self.merge_spec_file(std::path::Path::new(file))?;
        }
        self.merge_flags(flags);
        Ok(())
    }

    /// Merges the Installer spec at `path` over this one as kURL's `installermerge` does:
    /// its fields replace these, mappings merge key by key, a field it leaves empty keeps this
    /// one's value, and Docker's `daemonConfig` JSON merges key by key.
    pub fn merge_spec_file(&mut self, path: &std::path::Path) -> Result<(), super::SpecError> {
        let error = |problem: String| super::SpecError {
            path: path.to_path_buf(),
            line: None,
            problem,
            hint: None,
        };
        let text = crate::files::read_to_string_at_most(path, super::MAX_SPEC_BYTES as u64)
            .map_err(|io| error(io.to_string()))?;
        if let Some(index) = text.lines().position(|line| line.starts_with('\u{a0}')) {
            return Err(super::SpecError {
                line: Some(index + 1),
                hint: Some("convert the non-breaking spaces to normal spaces".into()),
                ..error("a line starts with a non-breaking space".into())
            });
        }
        // kURL's patch spec may leave out what it does not change (an add-on's version):
        // it is checked as a whole once merged.
        let overlay: Value = serde_norway::from_str(&text)
            .map_err(|problem| error(format!("not a valid Installer spec: {problem}")))?;
        let api_version = overlay.get("apiVersion").and_then(Value::as_str);
        if overlay.get("kind").and_then(Value::as_str) != Some(super::KIND)
            || !api_version.is_some_and(|version| super::API_VERSIONS.contains(&version))
        {
            return Err(error(
                "not an Installer spec: give `apiVersion: cluster.kurl.sh/v1beta1` and `kind: Installer`"
                    .into(),
            ));
        }
        let overlay = match overlay.get("spec") {
            Some(Value::Object(spec)) => spec.clone(),
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(_) => return Err(error("its `spec` is not a mapping".into())),
        };
        let mut merged = self.spec_map();
        merge_maps(&mut merged, overlay);
        // Fields for one of kURL's add-ons the spec does not install (`kubernetes:
        // {loadBalancerAddress: …}` with no version) are settings for the hooks' variables, as
        // the flags' are: kept beside the spec's add-ons.
        let mut settings_only = Vec::new();
        for (key, value) in &merged {
            let versionless = value
                .as_object()
                .is_some_and(|fields| !fields.contains_key("version"));
            if versionless
                && key != INSTALLER_SETTINGS_KEY
                && !SETTINGS_SECTIONS.contains(&key.as_str())
                && super::kurl_type::is_kurl_key(key)
            {
                settings_only.push(key.clone());
            }
        }
        let mut kept = Vec::new();
        for key in settings_only {
            if let Some(Value::Object(fields)) = merged.remove(&key) {
                for (field, value) in &fields {
                    super::kurl_type::check_field(&key, field, value).map_err(error)?;
                }
                kept.push((key, fields));
            }
        }
        let document = serde_json::json!({
            "apiVersion": self.api_version,
            "kind": super::KIND,
            "metadata": {"name": self.name},
            "spec": merged,
        });
        let yaml =
            serde_norway::to_string(&document).map_err(|problem| error(problem.to_string()))?;
        *self = InstallerSpec::parse(path, &yaml)?;
        for (key, fields) in kept {
            self.sections.entry(key).or_default().extend(fields);
        }
        Ok(())
    }

    /// The spec's `spec` mapping as written: each add-on under its spec key with its
    /// version, s3Override and fields, then the settings sections.
    fn spec_map(&self) -> serde_json::Map<String, Value> {
        let mut spec = serde_json::Map::new();
        for (folder, addon) in &self.addons {
            let mut fields = addon.config.clone();
            fields.insert("version".into(), Value::String(addon.version.clone()));
            if let Some(s3_override) = &addon.s3_override {
                fields.insert("s3Override".into(), Value::String(s3_override.clone()));
            }
            spec.insert(super::spec_key(folder).to_string(), Value::Object(fields));
        }
        for (key, fields) in self.settings_sections() {
            if !fields.is_empty() || key != INSTALLER_SETTINGS_KEY {
                spec.insert(key, Value::Object(fields));
            }
        }
        spec
    }

    /// Merges the flags' changes into the spec as kURL's `bashmerge` does: a field of the
    /// installer's settings or of a settings section is set there; a field of an add-on the
    /// spec installs is set in its configuration (`kubernetes-version` sets its version); a
    /// field of one it does not install is kept in a section of its own, for the variables
    /// kURL gives hooks (`ha` is `HA_CLUSTER=1` whether or not the spec names kubernetes).
    pub fn merge_flags(&mut self, flags: &ScriptFlags) {
        for change in &flags.changes {
            let folder = addon_folder(change.key);
            if let Some(addon) = self.addons.get_mut(folder) {
                match (&change.change, change.field) {
                    (Change::Set(Value::String(version)), "version") => {
                        addon.version = version.clone();
                    }
                    (other, _) => apply(&mut addon.config, change.field, other),
                }
                continue;
            }
            if change.only_if_present {
                continue;
            }
            let section = if change.key == INSTALLER_SETTINGS_KEY {
                &mut self.settings
            } else {
                debug_assert!(
                    SETTINGS_SECTIONS.contains(&change.key)
                        || super::kurl_type::is_kurl_key(change.key)
                );
                self.sections.entry(change.key.to_string()).or_default()
            };
            apply(section, change.field, &change.change);
        }
    }
}

/// kURL's `mergeYAMLMaps`: `overlay`'s values over `base`'s, mappings merged, a null keeping
/// the base's value, `daemonConfig` (Docker's JSON) merged as JSON (`mergeJSONMaps`).
fn merge_maps(base: &mut serde_json::Map<String, Value>, overlay: serde_json::Map<String, Value>) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(_), Value::Null) => {}
            (Some(Value::Object(old)), Value::Object(new)) => merge_maps(old, new),
            (Some(Value::String(old)), Value::String(new)) if key == "daemonConfig" => {
                let parsed =
                    |text: &str| serde_json::from_str::<serde_json::Map<String, Value>>(text);
                match (parsed(old), parsed(&new)) {
                    (Ok(mut old_json), Ok(new_json)) => {
                        merge_json(&mut old_json, new_json);
                        *old = serde_json::to_string_pretty(&old_json).unwrap_or(new);
                    }
                    _ => *old = new,
                }
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// kURL's `mergeJSONMaps`: objects merged key by key, anything else replaced.
fn merge_json(base: &mut serde_json::Map<String, Value>, overlay: serde_json::Map<String, Value>) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(Value::Object(old)), Value::Object(new)) => merge_json(old, new),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn apply(fields: &mut serde_json::Map<String, Value>, field: &str, change: &Change) {
    match change {
        Change::Set(value) => {
            fields.insert(field.to_string(), value.clone());
        }
        Change::Append(items) => {
            let list = fields
                .entry(field.to_string())
                .or_insert_with(|| Value::Array(Vec::new()));
            if !list.is_array() {
                *list = Value::Array(Vec::new());
            }
            if let Value::Array(list) = list {
                list.extend(items.iter().cloned().map(Value::String));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::kurl_type::{KURL_FIELDS, kurl_environment};
    use std::path::Path;

    fn arguments(words: &[&str]) -> Vec<(String, String)> {
        words
            .iter()
            .map(|word| match word.split_once('=') {
                Some((key, value)) => (key.to_string(), value.to_string()),
                None => {
                    check_word(word).unwrap();
                    (word.to_string(), String::new())
                }
            })
            .collect()
    }

    fn spec(text: &str) -> InstallerSpec {
        InstallerSpec::parse(Path::new("spec.yaml"), text).unwrap()
    }

    /// The variables hooks would see, from a spec merged with flags.
    fn variables(spec_text: &str, words: &[&str]) -> std::collections::BTreeMap<String, String> {
        let mut spec = spec(spec_text);
        let flags = ScriptFlags::read(&arguments(words)).unwrap();
        spec.merge_flags(&flags);
        let mut sections = spec.settings_sections();
        for (name, addon) in &spec.addons {
            let mut config = addon.config.clone();
            config.insert("version".into(), Value::String(addon.version.clone()));
            sections.insert(crate::spec::spec_key(name).to_string(), config);
        }
        let mut variables: std::collections::BTreeMap<String, String> =
            kurl_environment(|key| sections.get(key))
                .into_iter()
                .map(|variable| (variable.variable, variable.value))
                .collect();
        for variable in flags.variables {
            variables.insert(variable.name.to_string(), variable.value);
        }
        variables
    }

    const BASE: &str = "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata:\n  name: t\nspec:\n  containerd:\n    version: 1.6.33\n";

    /// Every flag that changes the spec names a field of kURL's type (bashmerge's targets).
    #[test]
    fn every_flag_names_a_field_of_kurls_type() {
        for flag in FLAGS {
            let target = match flag.effect {
                Field(key, field) | Append(key, field) | FieldOfPresent(key, field) => {
                    Some((key, field))
                }
                MasterAddress => Some(("kubernetes", "masterAddress")),
                _ => None,
            };
            if let Some((key, field)) = target {
                assert!(
                    KURL_FIELDS
                        .iter()
                        .any(|known| known.key == key && known.field == field),
                    "{}: spec.{key}.{field}",
                    flag.name
                );
            }
        }
    }

    /// kURL's `parseBashFlags` and yamltobash: the words the issue names reach hooks under
    /// kURL's names, with kURL's derived values.
    #[test]
    fn words_reach_hooks_under_kurls_names() {
        let seen = variables(
            BASE,
            &[
                "ha",
                "ipv6",
                "preserve-selinux-config",
                "preserve-firewalld-config",
                "preserve-iptables-config",
                "preserve-docker-config",
                "skip-system-package-install",
                "kubernetes-cis-compliance",
                "exclude-builtin-host-preflights",
                "host-preflight-enforce-warnings",
                "kubernetes-master-address=10.0.0.9:6443",
                "yes",
                "labels=zone=edge",
            ],
        );
        for (name, value) in [
            ("HA_CLUSTER", "1"),
            ("IPV6_ONLY", "1"),
            ("PRESERVE_SELINUX_CONFIG", "1"),
            ("PRESERVE_FIREWALLD_CONFIG", "1"),
            ("PRESERVE_IPTABLES_CONFIG", "1"),
            ("PRESERVE_DOCKER_CONFIG", "1"),
            ("SKIP_SYSTEM_PACKAGE_INSTALL", "1"),
            ("KUBERNETES_CIS_COMPLIANCE", "1"),
            ("EXCLUDE_BUILTIN_HOST_PREFLIGHTS", "1"),
            ("HOST_PREFLIGHT_ENFORCE_WARNINGS", "1"),
            ("KUBERNETES_MASTER_ADDR", "10.0.0.9:6443"),
            ("ASSUME_YES", "1"),
            ("NODE_LABELS", "zone=edge"),
            // kURL's derived values: preserving the config leaves them alone.
            ("DISABLE_SELINUX", ""),
            ("DISABLE_FIREWALLD", ""),
        ] {
            assert_eq!(seen.get(name).map(String::as_str), Some(value), "{name}");
        }
        // Without the words, kURL's defaults.
        let plain = variables(BASE, &[]);
        assert_eq!(plain["HA_CLUSTER"], "");
        assert_eq!(plain["IPV6_ONLY"], "");
        assert_eq!(plain["KUBERNETES_CLUSTER_NAME"], "kubernetes");
    }

    /// `load-balancer-address=` gives HA_CLUSTER=1 as kURL's conversion does.
    #[test]
    fn a_load_balancer_address_makes_the_cluster_ha() {
        let seen = variables(BASE, &["load-balancer-address=10.0.0.5:6443"]);
        assert_eq!(seen["LOAD_BALANCER_ADDRESS"], "10.0.0.5:6443");
        assert_eq!(seen["HA_CLUSTER"], "1");
    }

    /// The flags win over the spec, as kURL merges them after the vendor's spec.
    #[test]
    fn flags_win_over_the_spec_and_lists_grow() {
        let text = format!(
            "{BASE}  kurl:\n    privateAddress: 10.0.0.1\n    additionalNoProxyAddresses: [a.example]\n  velero:\n    version: 1.9.0\n    serverFlags: [--one]\n"
        );
        let seen = variables(
            &text,
            &[
                "private-address=10.0.0.2",
                "additional-no-proxy-addresses=b.example,c.example",
                "velero-server-flags=--two=2,--three",
            ],
        );
        assert_eq!(seen["PRIVATE_ADDRESS"], "10.0.0.2");
        assert_eq!(
            seen["ADDITIONAL_NO_PROXY_ADDRESSES"],
            "a.example,b.example,c.example"
        );
        assert_eq!(seen["VELERO_SERVER_FLAGS"], "--one,--two=2,--three");
    }

    #[test]
    fn kubernetes_version_drops_its_v_and_changes_the_planned_version() {
        let text = format!("{BASE}  kubernetes:\n    version: 1.29.x\n");
        let mut spec = spec(&text);
        let flags = ScriptFlags::read(&arguments(&["kubernetes-version=v1.30.4"])).unwrap();
        spec.merge_flags(&flags);
        assert_eq!(spec.addons["kubernetes"].version, "1.30.4");
    }

    /// kURL's `bashmerge`: ekco's internal load balancer follows `localhost:6444`, and only
    /// when the spec installs ekco.
    #[test]
    fn ekco_flags_touch_ekco_only_when_the_spec_installs_it() {
        let with_ekco = format!("{BASE}  ekco:\n    version: 0.28.14\n");
        let seen = variables(&with_ekco, &["kubernetes-master-address=localhost:6444"]);
        assert_eq!(seen["EKCO_ENABLE_INTERNAL_LOAD_BALANCER"], "1");
        let seen = variables(&with_ekco, &["ekco-enable-internal-load-balancer"]);
        assert_eq!(seen["EKCO_ENABLE_INTERNAL_LOAD_BALANCER"], "1");
        let seen = variables(BASE, &["ekco-enable-internal-load-balancer"]);
        assert_eq!(seen["EKCO_ENABLE_INTERNAL_LOAD_BALANCER"], "");
    }

    /// kURL's `get_patch_yaml`: repeats of primary-host join with commas; ekco-address keeps
    /// the first.
    #[test]
    fn variable_flags_repeat_as_kurl_repeats_them() {
        let flags = ScriptFlags::read(&arguments(&[
            "primary-host=10.0.0.1",
            "primary-host=10.0.0.2",
            "ekco-address=a",
            "ekco-address=b",
        ]))
        .unwrap();
        assert_eq!(flags.variable("PRIMARY_HOST"), Some("10.0.0.1,10.0.0.2"));
        assert_eq!(flags.variable("EKCO_ADDRESS"), Some("a"));
    }

    #[test]
    fn bad_words_and_values_are_refused_with_kurls_reasons() {
        let unknown = check_word("preserve-everything").unwrap_err().to_string();
        assert!(
            unknown.contains("unknown argument `preserve-everything`"),
            "{unknown}"
        );
        assert!(unknown.contains("preserve-selinux-config"), "{unknown}");
        assert_eq!(
            check_word("public-address").unwrap_err(),
            FlagError::NoValue {
                name: "public-address".into()
            }
        );
        assert!(matches!(
            ScriptFlags::read(&arguments(&["container-log-max-files=three"])),
            Err(FlagError::NotANumber { .. })
        ));
        assert!(matches!(
            ScriptFlags::read(&arguments(&["kurl-install-directory=/opt"])),
            Err(FlagError::Refused { .. })
        ));
        assert!(matches!(
            check_word("installer-spec-file"),
            Err(FlagError::NoValue { .. })
        ));
        // Not kURL's: Berth's and the add-ons' pairs pass through.
        let flags = ScriptFlags::read(&arguments(&["demo-port=8080"])).unwrap();
        assert_eq!(
            flags.others,
            [("demo-port".to_string(), "8080".to_string())]
        );
    }

    /// kURL's `installermerge`: the file's fields over the spec's, mappings merged, nulls
    /// keeping the spec's value, Docker's daemonConfig merged as JSON; then the other flags.
    #[test]
    fn a_spec_file_merges_over_the_spec_as_kurls_installermerge_does() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("patch.yaml");
        fs_err::write(
            &file,
            "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata:\n  name: patch\nspec:\n  kubernetes:\n    loadBalancerAddress: 10.0.0.100\n  kurl:\n    privateAddress: 10.0.0.9\n  containerd:\n    version: null\n    preserveConfig: true\n  docker:\n    version: 20.10.17\n    daemonConfig: |\n      {\"log-opts\": {\"max-size\": \"20m\"}, \"debug\": true}\n",
        )
        .unwrap();
        let text = format!(
            "{BASE}  kurl:\n    privateAddress: 10.0.0.1\n    publicAddress: 1.2.3.4\n  docker:\n    version: 20.10.17\n    daemonConfig: |\n      {{\"log-driver\": \"json-file\", \"log-opts\": {{\"max-size\": \"10m\", \"max-file\": \"3\"}}}}\n"
        );
        let mut spec = spec(&text);
        let id = spec.id();
        let words = [
            format!("installer-spec-file={}", file.display()),
            "private-address=10.0.0.7".into(),
        ];
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let flags = ScriptFlags::read(&arguments(&words)).unwrap();
        spec.apply_script_flags(&flags).unwrap();
        assert_eq!(
            spec.addons["containerd"].version, "1.6.33",
            "a null keeps the spec's"
        );
        assert_eq!(spec.addons["containerd"].config["preserveConfig"], true);
        // The flag comes after the file, as kURL applies it.
        assert_eq!(spec.settings["privateAddress"], "10.0.0.7");
        assert_eq!(spec.settings["publicAddress"], "1.2.3.4");
        // Kubernetes is not installed by this spec: its field is a setting for the variables.
        assert!(!spec.addons.contains_key("kubernetes"));
        assert_eq!(
            spec.sections["kubernetes"]["loadBalancerAddress"],
            "10.0.0.100"
        );
        let daemon: serde_json::Value = serde_json::from_str(
            spec.addons["docker"].config["daemonConfig"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            daemon,
            serde_json::json!({"log-driver": "json-file", "debug": true, "log-opts": {"max-size": "20m", "max-file": "3"}})
        );
        assert_ne!(
            spec.id(),
            id,
            "the merged spec is another spec; the installer keeps its id"
        );
        // A file that is not an Installer is refused, naming it.
        fs_err::write(&file, "kind: Other\n").unwrap();
        let mut again = self::spec(&text);
        assert!(again.apply_script_flags(&flags).is_err());
    }
}
