//! Host preflights, after every package is fetched and verified and before any hook changes
//! the node: Berth's built-in checks, each add-on's `host-preflight.yaml`, and the spec's
//! `kurl.hostPreflights`, run as kURL runs them (its ignore, enforce and exclude settings,
//! as spec fields or script words).

use std::io::IsTerminal as _;

use berth_formats::spec::{InstallerSpec, spec_key};
use berth_preflight::{Document, Limits, Outcome, Report, Role, TemplateContext};
use serde_json::Value;

use super::*;

/// What a run's host preflights came to, kept for `berth status`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreflightRecord {
    pub run: String,
    /// `primary, install`, `secondary, join, install`, …
    pub role: String,
    /// What the run did with the results: `passed`, `continued`, `stopped`, `ignored`, or
    /// `checked` (`berth preflight`).
    pub decision: String,
    pub report: Report,
}

impl PreflightRecord {
    pub fn load(layout: &crate::node::layout::Layout) -> Option<Self> {
        let text = fs_err::read_to_string(layout.host_preflights_file()).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// HostPreflight files as `berth preflight FILE…` runs them: each templated for `role`, the
/// spec's sections as it asks for them and the hosts of the script words, then the checks of
/// those hosts that kURL adds for a joining node.
pub fn file_documents(
    spec: Option<&InstallerSpec>,
    role: Role,
    params: &[(String, String)],
    files: &[std::path::PathBuf],
) -> Result<Vec<Document>, berth_preflight::PreflightError> {
    let context = spec_template_context(spec, role, params);
    let mut documents = Vec::new();
    for path in files {
        let name = path.display().to_string();
        documents.push(berth_preflight::load_file(&name, path, &context)?);
    }
    documents.extend(berth_preflight::remote_host_checks(&context)?);
    Ok(documents)
}

/// The template context for `role`: the hosts of kURL's `primary-host=` and `secondary-host=`
/// words, and the spec's sections with the versions it asks for (nothing is resolved; a run
/// puts its resolved sections in their place).
fn spec_template_context(
    spec: Option<&InstallerSpec>,
    role: Role,
    params: &[(String, String)],
) -> TemplateContext {
    let (primary_hosts, secondary_hosts) = berth_preflight::hosts_from_params(params);
    let mut context = TemplateContext {
        role,
        primary_hosts,
        secondary_hosts,
        ..TemplateContext::default()
    };
    if let Some(spec) = spec {
        context.installer_name = spec.name.clone().unwrap_or_default();
        context.sections = spec.settings_sections();
        for (folder, addon) in &spec.addons {
            context.sections.insert(
                spec_key(folder).to_string(),
                addon_section(&addon.config, &addon.version, addon.s3_override.as_deref()),
            );
        }
    }
    context
}

/// The run's kURL settings for host preflights, from `spec.kurl` and the script's words.
struct Settings {
    ignore: bool,
    enforce_warnings: bool,
    exclude_builtin: bool,
    assume_yes: bool,
}

impl Run<'_> {
    fn preflight_settings(&self) -> Settings {
        // kURL's flags (`host-preflight-ignore`, …) are merged into the plan's settings.
        let kurl = self.plan.settings.get("kurl");
        let field = |name: &str| kurl.and_then(|kurl| kurl.get(name)) == Some(&Value::Bool(true));
        let assume_yes = self.settings.params.iter().any(|(key, value)| {
            key == "yes" || (key == "assume-yes" && !matches!(value.as_str(), "" | "0" | "false"))
        });
        Settings {
            ignore: field("hostPreflightIgnore"),
            enforce_warnings: field("hostPreflightEnforceWarnings"),
            exclude_builtin: field("excludeBuiltinHostPreflights"),
            assume_yes,
        }
    }

    /// The template context: the node's role as kURL's scripts pass it, and the spec.
    fn preflight_context(&self) -> TemplateContext {
        let (master, joined) = self.node_role();
        let airgap_bytes_needed = if self.plan.airgap {
            // Unpacked packages and imported images take about twice the packages' size.
            self.members
                .iter()
                .filter(|member| member.planned.decision.applies())
                .filter_map(|member| {
                    let file = member.planned.package_file();
                    fs_err::metadata(self.settings.layout.package_cache().join(file)).ok()
                })
                .map(|metadata| metadata.len() * 2)
                .sum()
        } else {
            0
        };
        let role = Role {
            primary: master,
            join: joined,
            upgrade: self.plan.upgrades_node(),
        };
        TemplateContext {
            sections: self.spec_sections(),
            airgap_bytes_needed,
            ..spec_template_context(None, role, &self.settings.params)
        }
    }

    /// The documents of the run, in kURL's order: built-in, the spec's, each add-on's, then
    /// the checks of the cluster's other hosts that kURL adds for a joining node.
    fn preflight_documents(
        &self,
        settings: &Settings,
        context: &TemplateContext,
    ) -> Result<Vec<Document>, EngineError> {
        let mut documents = Vec::new();
        let error = |source| EngineError::HostPreflightSpec { source };
        if !settings.exclude_builtin {
            documents.push(
                berth_preflight::load_text(
                    berth_preflight::Origin::new("built-in", None),
                    berth_preflight::BUILTIN,
                    context,
                )
                .map_err(error)?,
            );
        }
        if let Some(spec) = self
            .plan
            .settings
            .get("kurl")
            .and_then(|kurl| kurl.get("hostPreflights"))
            .filter(|spec| !spec.is_null())
        {
            documents.push(
                berth_preflight::load_value("spec kurl.hostPreflights", spec, context)
                    .map_err(error)?,
            );
        }
        // kURL's excludeBuiltinHostPreflights leaves out the add-ons' files too.
        if !settings.exclude_builtin {
            for member in &self.members {
                let planned = member.planned;
                let path = self
                    .settings
                    .layout
                    .addon_dir(&planned.name, &planned.version)
                    .join("host-preflight.yaml");
                if path.is_file() {
                    let name = format!("{} {}", planned.name, planned.version);
                    documents
                        .push(berth_preflight::load_file(&name, &path, context).map_err(error)?);
                }
            }
        }
        documents.extend(berth_preflight::remote_host_checks(context).map_err(error)?);
        Ok(documents)
    }

    /// Runs the host preflights, prints them, records them, and stops the run where kURL
    /// would: on a failure (unless ignored), on a warning when warnings are enforced or the
    /// user answers no.
    pub(super) fn host_preflights(&self, reporter: &dyn Reporter) -> Result<Report, EngineError> {
        let settings = self.preflight_settings();
        let context = self.preflight_context();
        let documents = self.preflight_documents(&settings, &context)?;
        reporter.step(&format!(
            "host preflights ({}): {} documents",
            context.role.describe(),
            documents.len()
        ));
        let mut report = berth_preflight::run(&documents, &Limits::default())
            .map_err(|source| EngineError::HostPreflightSpec { source })?;
        let worst = report.worst();
        if settings.ignore {
            for result in &mut report.results {
                result.ignored = matches!(result.outcome, Outcome::Fail | Outcome::Warn);
            }
        }
        // `berth preflight` prints the results itself, as a table or JSON.
        if !self.preflight_only {
            // A closed standard error must not stop the run (nor panic it).
            use std::io::Write as _;
            let _ = write!(
                std::io::stderr(),
                "{}",
                report.table(std::io::stderr().is_terminal())
            );
            reporter.step(&format!("host preflights: {}", report.summary()));
        }
        let decision = match worst {
            _ if settings.ignore && worst >= Outcome::Warn => {
                reporter.step("host preflights: hostPreflightIgnore is set; going on");
                "ignored"
            }
            Outcome::Fail => "stopped",
            Outcome::Warn if settings.enforce_warnings => "stopped",
            _ if self.preflight_only => "checked",
            Outcome::Warn if settings.assume_yes || !confirm(reporter) => "continued",
            Outcome::Warn => "stopped",
            _ => "passed",
        };
        let record = PreflightRecord {
            run: self.run_id.clone(),
            role: context.role.describe(),
            decision: decision.to_string(),
            report: report.clone(),
        };
        let file = self.settings.layout.host_preflights_file();
        let text = serde_json::to_string_pretty(&record).unwrap_or_default();
        // Written on every run, and what `berth status` shows of the last one: not worth
        // waiting for the disk (right after an install, for all it still has to write).
        crate::files::replace_unsynced(&file, text.as_bytes()).map_err(io_error(&file))?;
        if decision == "stopped" {
            // What stopped the run, and where each check comes from.
            let mut summary = report.summary();
            for result in report
                .results
                .iter()
                .filter(|result| result.outcome == worst)
            {
                summary.push_str(&format!(
                    "\n  {} {}: {} (from {})",
                    result.outcome.word(),
                    result.title,
                    result.message,
                    result.origin
                ));
            }
            return Err(EngineError::HostPreflights {
                summary,
                warnings_only: worst == Outcome::Warn,
            });
        }
        Ok(report)
    }
}

/// kURL's `confirmY` on warnings: asks on the terminal, yes by default. Returns whether the
/// user declined; without a terminal nothing is asked and the run goes on.
fn confirm(reporter: &dyn Reporter) -> bool {
    match crate::terminal::ask(
        "Host preflights have warnings; going on may fail later. Continue? (Y/n) ",
    ) {
        Some(answer) => matches!(answer.as_str(), "n" | "N"),
        None => {
            reporter.step(
                "host preflights have warnings; no terminal to ask on, going on (to silence them: spec.kurl.excludeBuiltinHostPreflights: true leaves out the host preflights, the built-in checks of CPUs, memory and clock among them, as kURL's does)",
            );
            false
        }
    }
}
