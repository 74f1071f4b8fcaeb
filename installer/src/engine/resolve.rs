//! From a spec, or from the records for a rollback, to a plan: versions resolved, overrides
//! applied, a decision per add-on.

use std::collections::BTreeMap;
use std::path::Path;

use berth_formats::Sha256Digest;
use berth_formats::compression::Compression;
use berth_formats::package_index::package_file_name;
use berth_formats::spec::{InstallerSpec, SpecError};
use berth_formats::versions::{VERSIONS_FILE, VersionsError, VersionsFile, compare_versions};
use serde_json::{Map, Value};

use super::flag_inputs;
use super::{
    ENGINE_GENERATION, EngineError, Plan, PlannedAddon, RunSettings, SpecSource, first_line,
    kept_compression, kept_packages,
};
use crate::node::last_installer::LastInstaller;
use crate::node::layout::Layout;
use crate::node::state::{Applied, Reason, StateStore, Target};
use crate::plan::{Decision, decide};
use berth_formats::spec::flags::ScriptFlags;

/// The run's script arguments read as kURL reads them.
pub fn script_flags(params: &[(String, String)]) -> Result<ScriptFlags, EngineError> {
    Ok(ScriptFlags::read(params)?)
}

/// Resolves the spec and decides for each add-on. Reads state; changes nothing.
pub fn plan(source: &SpecSource, settings: &RunSettings) -> Result<Plan, EngineError> {
    let mut spec = InstallerSpec::load(&source.spec_path)?;
    // The installer's id is the spec's as written (the lock's); kURL's script flags are then
    // merged into it, as kURL merges them before it reads the spec.
    let id = spec.id();
    let flags = script_flags(&settings.params)?;
    for notice in &flags.notices {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "berth: {notice}");
    }
    spec.apply_script_flags(&flags)?;
    let inputs = flag_inputs::flag_inputs(&flags, &spec.settings_sections());
    let versions_bytes = settings
        .dist
        .read(VERSIONS_FILE)
        .map_err(EngineError::VersionsFetch)?;
    if settings.trust.is_empty() {
        // Said, not required: a closed standard error never stops a run.
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "berth: {}", settings.trust.describe());
    }
    // Signed by a trusted key before anything is read from it.
    settings
        .trust
        .check_dist_file(&settings.dist, VERSIONS_FILE, &versions_bytes)?;
    let versions_location = settings.dist.location(VERSIONS_FILE);
    let versions = VersionsFile::parse(&versions_location, &versions_bytes).map_err(|source| {
        EngineError::Versions {
            location: versions_location.clone(),
            source,
        }
    })?;
    let versions_error = |error| EngineError::Versions {
        location: source.spec_path.display().to_string(),
        source: error,
    };

    let mut requested: BTreeMap<String, (String, Map<String, Value>)> = spec
        .addons
        .iter()
        .map(|(name, addon)| (name.clone(), (addon.version.clone(), addon.config.clone())))
        .collect();
    // Which fields came from the node's configuration, so that a refused one is blamed on
    // the file it came from (and one from --set on --set), not on the spec.
    let mut from_node_config = std::collections::BTreeSet::new();
    for (name, fields) in node_overrides(&settings.layout.node_config())? {
        if let Some((version, config)) = requested.get_mut(&name) {
            from_node_config.extend(fields.keys().map(|field| (name.clone(), field.clone())));
            apply_fields(version, config, fields);
        }
    }
    for (addon, field, value) in &source.overrides {
        let Some((version, config)) = requested.get_mut(addon) else {
            return Err(EngineError::BadOverride {
                text: format!("{addon}.{field}"),
                problem: format!("the spec has no add-on `{addon}`"),
            });
        };
        apply_fields(
            version,
            config,
            Map::from_iter([(field.clone(), value.clone())]),
        );
    }

    let store = StateStore::new(settings.layout.state_dir());
    let lock = source
        .lock_path
        .as_deref()
        .map(|path| settings.trust.read_lock(&settings.dist, path))
        .transpose()?;
    if let Some(lock) = &lock
        && lock.id != id
    {
        return Err(EngineError::LockMismatch {
            lock: lock.id.clone(),
            spec: id,
        });
    }
    // A lock pins each add-on's version and package digest as they were when the installer's
    // scripts were rendered; without one, versions.json and the dist's `.sha256` files decide.
    let pinned: Vec<Pinned> = match &lock {
        Some(lock) => {
            let mut pinned = Vec::new();
            for name in requested.keys() {
                let position = versions.position_of(name).map_err(versions_error)?;
                let locked = lock.addon(name).ok_or_else(|| EngineError::NotLocked {
                    name: name.clone(),
                    id: lock.id.clone(),
                })?;
                pinned.push((position, locked));
            }
            pinned.sort_by_key(|(position, _)| *position);
            pinned
                .into_iter()
                .map(|(_, locked)| Pinned {
                    name: locked.name.clone(),
                    version: locked.version.clone(),
                    package_digest: locked.sha256,
                    bundled_index: locked.index_sha256,
                    compression: locked.compression,
                })
                .collect()
        }
        None => versions
            .resolve_all(
                requested
                    .iter()
                    .map(|(name, (version, _))| (name.as_str(), version.as_str())),
            )
            .map_err(versions_error)?
            .into_iter()
            .map(|addon| {
                let file = package_file_name(&addon.name, &addon.version, addon.compression);
                // From its `.sha256`, whose signature is checked first when keys are trusted.
                let digest = settings
                    .trust
                    .package_digest(&settings.dist, &file)
                    .map_err(|error| match error {
                        crate::dist::trust::TrustError::Fetch { source, .. } => {
                            EngineError::Fetch {
                                name: addon.name.clone(),
                                version: addon.version.clone(),
                                source,
                            }
                        }
                        error => EngineError::Trust(error),
                    })?;
                Ok(Pinned {
                    name: addon.name,
                    version: addon.version,
                    package_digest: digest,
                    bundled_index: None,
                    compression: addon.compression,
                })
            })
            .collect::<Result<_, EngineError>>()?,
    };
    let mut planned = Vec::with_capacity(pinned.len());
    for pinned in pinned {
        let Pinned {
            name,
            version,
            package_digest,
            bundled_index,
            compression,
        } = pinned;
        let (_, mut config) = requested
            .remove(&name)
            .expect("every pinned add-on was requested");
        // The add-on version's declared fields: unknown or mistyped ones refused, defaults
        // filled in, so that they count in the configuration hash.
        versions
            .apply_fields(&name, &version, &mut config)
            .map_err(|error| match (error, spec.addons.get(&name)) {
                (VersionsError::Fields(refused), _)
                    if source
                        .overrides
                        .iter()
                        .any(|(addon, field, _)| *addon == name && *field == refused.field) =>
                {
                    EngineError::BadOverride {
                        text: format!("{name}.{}", refused.field),
                        problem: refused.message,
                    }
                }
                (VersionsError::Fields(refused), _)
                    if from_node_config.contains(&(name.clone(), refused.field.clone())) =>
                {
                    EngineError::Spec(SpecError {
                        path: settings.layout.node_config(),
                        line: None,
                        problem: refused.message,
                        hint: None,
                    })
                }
                // A field refused is named by its line, as a YAML error is.
                (VersionsError::Fields(refused), Some(addon)) => EngineError::Field {
                    addon: name.clone(),
                    requested: addon.version.clone(),
                    refused: SpecError {
                        path: source.spec_path.clone(),
                        line: addon.lines.get(&refused.field).copied(),
                        problem: refused.message,
                        hint: None,
                    },
                },
                (error, _) => versions_error(error),
            })?;
        let config_hash =
            Sha256Digest::of(&serde_json::to_vec(&Value::Object(config.clone())).expect("JSON"));
        let target = Target {
            version: version.clone(),
            id: id.clone(),
            package_digest,
            config_hash: config_hash.to_string(),
            generation: ENGINE_GENERATION,
        };
        let s3_override = spec
            .addons
            .get(&name)
            .and_then(|addon| addon.s3_override.clone());
        let (record, damage) = store.load_or_blank(&name)?;
        let mut decision = decide(&record, &target, source.permissions);
        let applied_inputs = record
            .current
            .as_ref()
            .map(|current| current.flag_inputs.clone())
            .unwrap_or_default();
        if decision == Decision::AlreadyApplied {
            let read = flag_inputs::read_by(&settings.layout.addon_dir(&name, &version), &inputs);
            let changed = flag_inputs::changed(&read, &inputs, &applied_inputs);
            if !changed.is_empty() {
                decision = Decision::Reapply {
                    because: format!(
                        "its hooks read {}, which this run's flags set anew",
                        changed.join(", ")
                    ),
                };
            }
        }
        let mut flag_inputs = applied_inputs;
        flag_inputs.extend(inputs.clone());
        planned.push(PlannedAddon {
            flag_inputs,
            reason: match &damage {
                Some(damage) => format!("{decision}; {}", first_line(&damage.to_string())),
                None => decision.to_string(),
            },
            name,
            version,
            decision,
            target,
            config,
            record,
            record_damaged: damage.is_some(),
            bundled_index,
            s3_override,
            compression,
        });
    }
    repair_unhealthy(&settings.layout, &mut planned);
    Ok(Plan {
        id,
        addons: planned,
        airgap: spec.airgap(),
        settings: spec.settings_sections(),
    })
}

/// An add-on applied as asked whose components are probed now and found down (not
/// Available, or Degraded) is repaired: its hooks run again. Probes read; they change nothing.
fn repair_unhealthy(layout: &Layout, planned: &mut [PlannedAddon]) {
    let applied: Vec<_> = planned
        .iter()
        .filter(|addon| addon.decision == Decision::AlreadyApplied)
        .map(|addon| addon.record.clone())
        .collect();
    if applied.is_empty() {
        return;
    }
    let health = crate::health::check_all(layout, &applied, &crate::health::RuntimeOnce::new());
    for addon in planned.iter_mut() {
        let Some(record) = health.get(&addon.name) else {
            continue;
        };
        if addon.decision != Decision::AlreadyApplied || (record.available() && !record.degraded())
        {
            continue;
        }
        let because = record
            .trouble()
            .map(str::to_string)
            .unwrap_or_else(|| "not healthy: its components do not answer".to_string());
        addon.decision = Decision::Repair { because };
        addon.reason = addon.decision.to_string();
    }
}

/// An add-on's exact version and package digest, from the lock or from versions.json.
struct Pinned {
    name: String,
    version: String,
    package_digest: Sha256Digest,
    bundled_index: Option<Sha256Digest>,
    compression: Compression,
}

/// The plan of `berth rollback`: `name` back to the version it had before (or to `to`, a
/// version whose package this node keeps), with the configuration that version was applied
/// with. The packages come from this node's cache; nothing is fetched.
pub fn rollback_plan(layout: &Layout, name: &str, to: Option<&str>) -> Result<Plan, EngineError> {
    let problem = |problem: String| EngineError::Rollback {
        name: name.to_string(),
        problem,
    };
    let record = StateStore::new(layout.state_dir()).load(name)?;
    // The hooks see the settings of the installer the node runs (its addresses, airgap, …),
    // as they did when it was applied; a node whose installer cannot be read goes on without.
    let spec = LastInstaller::load(layout)
        .ok()
        .flatten()
        .and_then(|last| InstallerSpec::load(&last.spec).ok());
    let Some(current) = &record.current else {
        return Err(problem(format!(
            "is not installed on this node; {}",
            StateStore::new(layout.state_dir()).not_installed_hint(name)
        )));
    };
    let from = current.target.version.clone();
    let applied = match (to, &record.last) {
        (None, Some(last)) => last.clone(),
        (None, None) => {
            return Err(problem(format!(
                "{from} is the only version applied on this node; there is nothing to roll back to"
            )));
        }
        (Some(version), _) if version == from => {
            return Err(problem(format!("{version} is already in place")));
        }
        (Some(version), Some(last)) if last.target.version == version => last.clone(),
        (Some(version), _) => {
            // Another version whose package this node keeps, applied with today's settings.
            let Some((_, digest)) = kept_packages(layout, name, version).next() else {
                return Err(problem(format!(
                    "no package of version {version} is kept on this node; kept: {}",
                    kept_versions(layout, name).join(", ")
                )));
            };
            Applied {
                target: Target {
                    version: version.to_string(),
                    package_digest: digest,
                    ..current.target.clone()
                },
                applied_at: String::new(),
                config: current.config.clone(),
                role: current.role,
                hooks_ran: current.hooks_ran,
                flag_inputs: current.flag_inputs.clone(),
            }
        }
    };
    // The package rolled back to, in the compression this node keeps it in.
    let compression = kept_compression(
        layout,
        name,
        &applied.target.version,
        &applied.target.package_digest,
    )
    .unwrap_or_default();
    Ok(Plan {
        id: applied.target.id.clone(),
        addons: vec![PlannedAddon {
            name: name.to_string(),
            version: applied.target.version.clone(),
            decision: Decision::Rollback { from: from.clone() },
            reason: Decision::Rollback { from }.to_string(),
            target: applied.target,
            config: applied.config,
            record,
            record_damaged: false,
            bundled_index: None,
            compression,
            flag_inputs: applied.flag_inputs,
            s3_override: spec
                .as_ref()
                .and_then(|spec| spec.addons.get(name))
                .and_then(|addon| addon.s3_override.clone()),
        }],
        airgap: spec.as_ref().is_some_and(InstallerSpec::airgap),
        settings: spec
            .as_ref()
            .map(InstallerSpec::settings_sections)
            .unwrap_or_default(),
    })
}

/// The versions of `name` whose packages this node keeps, newest first.
fn kept_versions(layout: &Layout, name: &str) -> Vec<String> {
    let prefix = format!("{name}-");
    let mut versions: Vec<String> = fs_err::read_dir(layout.package_cache())
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let file = entry.file_name().to_string_lossy().into_owned();
            let (version, _) = Compression::split_tar_name(file.strip_prefix(&prefix)?)?;
            Some(version.to_string())
        })
        .collect();
    versions.sort_by(|a, b| compare_versions(b, a));
    // A version kept in both formats (the dist changed its compression) is named once.
    versions.dedup();
    versions
}

/// Records on an installed add-on that the run asking for `version` stopped before touching
/// it (an unknown version, say): `Progressing` turns Failed with the reason; what is in place
/// stays in place and Available.
pub fn record_refusal(
    layout: &Layout,
    name: &str,
    version: &str,
    message: &str,
) -> Result<(), EngineError> {
    let store = StateStore::new(layout.state_dir());
    let mut record = store.load(name)?;
    if record.current.is_none() && record.attempt.is_none() {
        return Ok(());
    }
    record.desired = Some(version.to_string());
    record.set_progressing(false, Reason::Failed, message.to_string());
    store.save(&record)?;
    Ok(())
}

fn apply_fields(version: &mut String, config: &mut Map<String, Value>, fields: Map<String, Value>) {
    for (field, value) in fields {
        if field == "version" {
            *version = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
        } else {
            config.insert(field, value);
        }
    }
}

/// An add-on's name and some of its fields.
pub type FieldsOfAddon = (String, Map<String, Value>);

/// `/etc/berth/node.yaml`: per-node fields by add-on, e.g. `containerd: {tomlConfig: …}`.
pub fn node_overrides(path: &Path) -> Result<Vec<FieldsOfAddon>, EngineError> {
    let problem = |problem: String| EngineError::NodeConfig {
        path: path.to_path_buf(),
        problem,
    };
    // No file is no settings; a file that cannot be read is a setting lost, so it stops the run.
    let text = match fs_err::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(problem(format!("cannot be read: {error}"))),
    };
    let value: Value = serde_norway::from_str(&text).map_err(|e| problem(e.to_string()))?;
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Object(addons) => addons
            .into_iter()
            .map(|(name, fields)| match fields {
                Value::Object(fields) => Ok((name, fields)),
                _ => Err(problem(format!("`{name}` is not a mapping of fields"))),
            })
            .collect(),
        _ => Err(problem(
            "expected a mapping of add-on names to their fields".into(),
        )),
    }
}
