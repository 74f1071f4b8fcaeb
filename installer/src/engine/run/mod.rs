//! Carrying a plan out: fetch and verify, load images, run the hooks phase by phase in one
//! session, record state as each add-on finishes.

mod host_preflights;
mod imports;
mod log;
mod prepare;
mod record;
mod start;

pub use host_preflights::{PreflightRecord, file_documents};
pub use start::SessionStart;

use std::time::{Duration, Instant, SystemTime};

use log::{HookRun, HooksLog};

use berth_formats::Sha256Digest;
use berth_formats::health::{HooksRan, NodeRole};
use berth_formats::package_index::PackageIndex;
use berth_formats::spec::kurl_type::kurl_environment;
use berth_formats::spec::{spec_key, upper_snake};

use super::{
    EngineError, Mode, Plan, PlannedAddon, Reporter, RunSettings, cached_digest, check_interrupt,
    first_line, io_error,
};
use crate::dist::Dist;
use crate::hooks::environment::HookEnvironment;
use crate::images::{ImageError, Runtime};
use crate::node::last_installer::LastInstaller;
use berth_formats::release::checksum_file;

use crate::dist::unpack::{bundled_package, read_unpacked, unpack, unpack_bundled};
use crate::hooks::session::HookError;
use crate::node::lock::NodeLock;
use crate::node::state::{AddonState, Applied, Attempt, Outcome, Reason, StateStore};
use crate::phase::{Phase, Step, hook_functions, installs_runtime, joins_last};
use crate::plan::Decision;

/// Carries out `plan` on the node in `session`, begun once the caller held the node lock.
pub fn apply(
    settings: &RunSettings,
    plan: &Plan,
    _lock: &NodeLock,
    session: SessionStart,
    reporter: &dyn Reporter,
) -> Result<(), EngineError> {
    let refused = plan.refused();
    if !refused.is_empty() {
        return Err(EngineError::Refused {
            lines: refused
                .iter()
                .map(|addon| format!("{} {}: {}", addon.name, addon.version, addon.reason))
                .collect(),
        });
    }
    let layout = &settings.layout;
    let run_id = run_id(settings.mode.run_name(plan));
    let mut run = Run::new(settings, plan, &run_id, false)?;
    let result = run.execute(session, reporter);
    if let Err(error) = &result {
        run.record_imports_ahead();
        run.fail_unfinished(error)?;
    }
    // A run that stopped before any hook ran has no log.
    let log = layout.log_dir().join(format!("{run_id}.log"));
    if log.exists() {
        reporter.step(&format!("log: {}", log.display()));
    }
    result
}

/// Fetches and verifies the plan's packages and runs the host preflights alone, as `berth
/// preflight` does: no record changes and no hook runs. The caller holds the node lock.
pub fn preflight(
    settings: &RunSettings,
    plan: &Plan,
    _lock: &NodeLock,
    reporter: &dyn Reporter,
) -> Result<berth_preflight::Report, EngineError> {
    let run_id = run_id("preflight");
    let mut run = Run::new(settings, plan, &run_id, true)?;
    run.fetch_all(reporter)?;
    run.host_preflights(reporter)
}

/// Packages fetched, checked and unpacked at once: as many as the cores (two at most, a
/// download or a gunzip each), taken in the add-ons' order. After a failure no package is
/// begun; each outcome is in its add-on's place, `None` for one never begun.
#[allow(clippy::type_complexity)]
fn fetch_in_parallel(
    settings: &RunSettings,
    planned: &[&PlannedAddon],
) -> Vec<Option<(Result<PackageIndex, EngineError>, Duration)>> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, 2)
        .min(planned.len());
    let next = AtomicUsize::new(0);
    let stopped = AtomicBool::new(false);
    let outcomes: Vec<Mutex<Option<(Result<PackageIndex, EngineError>, Duration)>>> =
        planned.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    if stopped.load(Ordering::SeqCst) {
                        return;
                    }
                    let position = next.fetch_add(1, Ordering::SeqCst);
                    let Some(addon) = planned.get(position) else {
                        return;
                    };
                    let started = Instant::now();
                    let result = check_interrupt().and_then(|()| prepare::fetch(settings, addon));
                    if result.is_err() {
                        stopped.store(true, Ordering::SeqCst);
                    }
                    if let Ok(mut slot) = outcomes[position].lock() {
                        *slot = Some((result, started.elapsed()));
                    }
                }
            });
        }
    });
    outcomes
        .into_iter()
        .map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

/// `<what>-<UTC time>-<pid>`: the run's log file name, and its mark in the records.
fn run_id(name: &str) -> String {
    let stamp = berth_formats::time::now().replace([':', '-'], "");
    format!(
        "{name}-{}-{}",
        stamp.trim_end_matches('Z'),
        std::process::id()
    )
}

/// One add-on as the run carries it.
struct Member<'a> {
    planned: &'a PlannedAddon,
    state: AddonState,
    /// The function that is its hook in each phase of the run (by the phase's place), where
    /// its install.sh defines one; known once the script is sourced.
    hooks: Vec<Option<String>>,
    index: Option<PackageIndex>,
    finished: bool,
    /// Which of its hooks that make things ran in this run: its main hook, its `_join`.
    hooks_ran: HooksRan,
}

struct Run<'a> {
    settings: &'a RunSettings,
    plan: &'a Plan,
    run_id: String,
    store: StateStore,
    members: Vec<Member<'a>>,
    /// `berth preflight`: the host preflights alone, no add-on record changed.
    preflight_only: bool,
    /// Image imports started ahead of the hooks.
    imports: imports::Imports,
}

impl<'a> Run<'a> {
    fn new(
        settings: &'a RunSettings,
        plan: &'a Plan,
        run_id: &str,
        preflight_only: bool,
    ) -> Result<Self, EngineError> {
        let store = StateStore::new(settings.layout.state_dir());
        let mut members = Vec::new();
        for planned in &plan.addons {
            if planned.record_damaged && !preflight_only {
                store.set_aside(&planned.name)?;
            }
            let mut state = planned.record.clone();
            state.desired = Some(planned.version.clone());
            if planned.decision.applies() {
                state.attempt = Some(Attempt {
                    target: planned.target.clone(),
                    config: planned.config.clone(),
                    outcome: Outcome::Running,
                    phase: Step::Fetch,
                    run: run_id.to_string(),
                });
                state.set_progressing(
                    true,
                    planned.decision.progressing_reason(),
                    format!(
                        "{} {}: {}",
                        planned.decision.name(),
                        planned.version,
                        planned.reason
                    ),
                );
            } else if planned.decision == Decision::AlreadyApplied {
                given_up_attempt(&mut state, planned.record.desired.as_deref());
            }
            if state != planned.record && !preflight_only {
                store.save(&state)?;
            }
            members.push(Member {
                planned,
                state,
                hooks: Vec::new(),
                index: None,
                finished: !planned.decision.applies(),
                hooks_ran: HooksRan::Nothing,
            });
        }
        Ok(Self {
            settings,
            plan,
            run_id: run_id.to_string(),
            store,
            members,
            preflight_only,
            imports: imports::Imports::default(),
        })
    }

    /// fetch: every package is verified and in place before any hook runs.
    fn fetch_all(&mut self, reporter: &dyn Reporter) -> Result<(), EngineError> {
        self.receive_bundle(reporter)?;
        let needed = |member: &Member| self.needs_package(member);
        // With signing keys trusted, every package is fetched and checked against its signed
        // digest before any is unpacked: a tampered package leaves the add-ons' folders as
        // they were (a bundle received as a stream was checked so as it came in).
        if self.settings.trust.checks_before_unpacking() {
            for index in 0..self.members.len() {
                check_interrupt()?;
                if needed(&self.members[index]) {
                    self.fetch_checked(index)?;
                }
            }
        }
        let wanted: Vec<usize> = (0..self.members.len())
            .filter(|&index| needed(&self.members[index]))
            .collect();
        let planned: Vec<&PlannedAddon> = wanted
            .iter()
            .map(|&index| self.members[index].planned)
            .collect();
        // The add-ons' order is kept for what is reported and for which failure is the run's.
        for (position, outcome) in fetch_in_parallel(self.settings, &planned)
            .into_iter()
            .enumerate()
        {
            let Some((result, took)) = outcome else {
                break;
            };
            let package_index = result?;
            let member = &mut self.members[wanted[position]];
            reporter.step(&format!(
                "{} {}: fetched, {} ({:.1}s)",
                member.planned.name,
                member.planned.version,
                if self.settings.trust.is_empty() {
                    "its digest matching the dist's own (no key checked it)"
                } else {
                    "its digest signed by a trusted key"
                },
                took.as_secs_f64()
            ));
            member.index = Some(package_index);
        }
        Ok(())
    }

    fn execute(
        &mut self,
        mut start: SessionStart,
        reporter: &dyn Reporter,
    ) -> Result<(), EngineError> {
        let layout = self.settings.layout.clone();
        self.fetch_all(reporter)?;
        check_interrupt()?;
        crate::hooks::helpers::link_programs(&layout).map_err(io_error(&layout.programs_dir()))?;
        crate::hooks::helpers::fresh_kubeadm_patches(&layout)
            .map_err(io_error(&layout.kustomize_dir("kubeadm")))?;

        let log_path = layout.log_dir().join(format!("{}.log", self.run_id));
        let log = start.log().clone();
        log.name(log_path.clone());
        let work = start.work().to_path_buf();
        // kURL's MERGED_YAML_SPEC: the spec with the script flags merged, as hooks and
        // get_addon_config read it.
        let merged_spec = work.join("merged-spec.yaml");
        fs_err::write(&merged_spec, self.merged_spec_yaml()).map_err(io_error(&merged_spec))?;
        // The session has been starting (bash, the helper library's definitions) since the
        // lock was taken, and takes the run's variables and sets kURL's globals while the
        // host preflights run: it only reads the host. Only Berth's own folders have changed
        // when the preflights run, and a run they stop leaves no log and no work folder.
        start.set_variables(self.environment(&merged_spec)?);
        let preflights = self.host_preflights(reporter);
        if preflights.is_ok() {
            self.import_ahead();
        }
        let started = start.join();
        if let Err(error) = preflights {
            drop(started);
            log.discard();
            let _ = fs_err::remove_dir_all(&work);
            return Err(error);
        }
        log.open().map_err(io_error(&log_path))?;
        let mut hooks_log = HooksLog::open(&layout.log_dir().join(HOOKS_LOG));
        let mut session = started.map_err(|(what, source)| self.hook_error(None, what, source))?;

        let phases = self.settings.mode.phases();
        // Each add-on's hooks into the session. Its images load later, just before its main
        // hook: an add-on earlier in the order may be the one that installs the runtime.
        let mut runtime: Option<Runtime> = None;
        let mode = self.settings.mode;
        let mut scripts = Vec::new();
        let mut candidates: Vec<Vec<Vec<String>>> = Vec::new();
        for member in &self.members {
            let script = layout
                .addon_dir(&member.planned.name, &member.planned.version)
                .join("install.sh");
            let is_runtime = installs_runtime(&member.planned.name);
            let looked_for: Vec<Vec<String>> = phases
                .iter()
                .map(|phase| {
                    mode.hook_suffix(*phase, &member.planned.decision, is_runtime)
                        .map(|suffix| hook_functions(&member.planned.name, &suffix))
                        .unwrap_or_default()
                })
                .collect();
            scripts.push(script.exists().then_some(script));
            candidates.push(looked_for);
        }
        // Every install.sh sourced in turn, and asked which hooks it defines, in one exchange
        // with bash.
        let files: Vec<(Option<&std::path::Path>, Vec<String>)> = scripts
            .iter()
            .zip(&candidates)
            .map(|(script, looked_for)| (script.as_deref(), looked_for.concat()))
            .collect();
        let defined = session
            .source_each(&files, self.settings.hook_timeout)
            .map_err(|(index, source)| self.hook_error(Some(index), "install.sh", source))?;
        for (index, (defined, candidates)) in defined.into_iter().zip(candidates).enumerate() {
            // kURL calls an applied add-on's install hook unguarded: one that is not there is
            // a broken add-on, not one with nothing to do.
            let member = &self.members[index];
            let main = mode.main_phase(installs_runtime(&member.planned.name));
            if main == Phase::Install && member.planned.decision.applies() {
                let main = phases.iter().position(|phase| *phase == main);
                if let Some(looked_for) = main.map(|main| &candidates[main])
                    && !looked_for.iter().any(|function| defined.contains(function))
                {
                    return Err(EngineError::NoMainHook {
                        name: member.planned.name.clone(),
                        version: member.planned.version.clone(),
                        script: layout
                            .addon_dir(&member.planned.name, &member.planned.version)
                            .join("install.sh"),
                        looked_for: looked_for.clone(),
                    });
                }
            }
            self.members[index].hooks = candidates
                .into_iter()
                .map(|functions| functions.into_iter().find(|f| defined.contains(f)))
                .collect();
        }

        let runtime_first: Vec<usize> = {
            let mut order: Vec<usize> = (0..self.members.len()).collect();
            order.sort_by_key(|&index| !installs_runtime(&self.members[index].planned.name));
            order
        };
        let in_order: Vec<usize> = (0..self.members.len()).collect();
        // Kubernetes joins last: kURL's join.sh runs every add-on's `_join` (which drop their
        // kubeadm patches in join-patches) before `kubeadm join`.
        let kubernetes_last: Vec<usize> = {
            let mut order = in_order.clone();
            order.sort_by_key(|&index| joins_last(&self.members[index].planned.name));
            order
        };
        for (phase_number, phase) in phases.iter().enumerate() {
            let order = match phase {
                Phase::Install => &runtime_first,
                Phase::Join => &kubernetes_last,
                _ => &in_order,
            };
            // On a joining node, add-ons are judged (their health waited for) once every
            // `_join` has run, Kubernetes' last: what runs on the node's cluster credentials
            // can only become healthy after `kubeadm join`.
            let mut joined = Vec::new();
            for &index in order {
                check_interrupt()?;
                let member = &self.members[index];
                let applies = member.planned.decision.applies();
                let hook = member.hooks[phase_number].clone();
                let kustomize = layout.kustomize_dir(&member.planned.name);
                let installs_runtime = installs_runtime(&member.planned.name);
                let main_phase = self.settings.mode.main_phase(installs_runtime);
                let main = *phase == main_phase && applies;
                if main {
                    // The runtime's own images wait for the runtime its hook installs.
                    if !installs_runtime {
                        self.enter_phase(index, Step::Load)?;
                        self.load_images(index, &mut runtime, reporter)?;
                    }
                    let _ = fs_err::remove_dir_all(&kustomize);
                    fs_err::create_dir_all(&kustomize).map_err(io_error(&kustomize))?;
                }
                if let Some(hook) = hook {
                    if applies {
                        self.enter_phase(index, Step::Hook(*phase))?;
                    }
                    let member = &self.members[index];
                    reporter.step(&format!(
                        "{} {}: {hook}",
                        member.planned.name, member.planned.version
                    ));
                    let started = Instant::now();
                    let started_at = SystemTime::now();
                    let result = session.hook(&hook, self.settings.hook_timeout);
                    let member = &self.members[index];
                    hooks_log.record(&HookRun {
                        run: &self.run_id,
                        addon: &member.planned.name,
                        version: &member.planned.version,
                        hook: &hook,
                        started: started_at,
                        succeeded: result.is_ok(),
                    });
                    result.map_err(|source| self.hook_error(Some(index), &hook, source))?;
                    report_duration(reporter, &hook, started.elapsed());
                    if main {
                        self.members[index].hooks_ran = match phase {
                            Phase::Join => HooksRan::Join,
                            _ => HooksRan::Install,
                        };
                    }
                }
                if main && installs_runtime {
                    self.enter_phase(index, Step::Load)?;
                    self.load_images(index, &mut runtime, reporter)?;
                }
                // An add-on is applied once its main phase (its images) is behind it and no
                // later phase defines a hook for it.
                let member = &self.members[index];
                let remaining = member.hooks[phase_number + 1..].iter().any(Option::is_some);
                let main_done = phases
                    .iter()
                    .position(|phase| *phase == main_phase)
                    .is_none_or(|main| phase_number >= main);
                if applies && !member.finished && main_done && !remaining {
                    if *phase == Phase::Join {
                        joined.push(index);
                    } else {
                        self.succeed(index, reporter)?;
                    }
                }
            }
            for index in joined {
                self.succeed(index, reporter)?;
            }
        }
        session
            .finish()
            .map_err(|source| self.hook_error(None, "the hook session", source))?;
        let _ = fs_err::remove_dir_all(&work);
        Ok(())
    }

    /// The spec the hooks act on, as YAML: each of its keys' sections with the resolved
    /// versions, the flags merged (kURL's merged spec).
    fn merged_spec_yaml(&self) -> String {
        let document = serde_json::json!({
            "apiVersion": berth_formats::spec::API_VERSIONS[0],
            "kind": berth_formats::spec::KIND,
            "metadata": {"name": self.plan.id},
            "spec": self.spec_sections(),
        });
        serde_norway::to_string(&document).expect("a JSON value writes as YAML")
    }

    fn environment(
        &self,
        merged_spec: &std::path::Path,
    ) -> Result<Vec<(String, String)>, EngineError> {
        let mut environment = HookEnvironment::for_node(&self.settings.layout);
        environment.berth("MERGED_YAML_SPEC", merged_spec.display().to_string())?;
        environment.berth("INSTALLER_ID", &self.plan.id)?;
        environment.berth(
            "BERTH_JOIN_TTL",
            self.settings.join_ttl.as_secs().to_string(),
        )?;
        if self.plan.airgap {
            environment.berth("AIRGAP", "1")?;
        }
        let (master, _) = self.node_role();
        environment.berth("MASTER", if master { "1" } else { "" })?;
        for member in &self.members {
            let planned = member.planned;
            environment.addon(&planned.name, &planned.version, &planned.config)?;
            // What the run does to the add-on, and the version on the node before it, for
            // hooks that act on an upgrade (`Upgrade`, `2.8.1`).
            let prefix = format!("BERTH_{}", upper_snake(&planned.name));
            environment.berth(&format!("{prefix}_DECISION"), planned.decision.name())?;
            let current = planned.record.current.as_ref();
            environment.berth(
                &format!("{prefix}_CURRENT_VERSION"),
                current.map_or("", |applied| applied.target.version.as_str()),
            )?;
        }
        let sections = self.spec_sections();
        environment.kurl(kurl_environment(|key| sections.get(key)))?;
        // kURL's flags are merged into the plan's spec; those that set a variable of their own
        // (`labels=` is NODE_LABELS) set it here, and the other pairs are Berth's and the
        // add-ons' (`demo-port=` is DEMO_PORT).
        let flags = super::resolve::script_flags(&self.settings.params)?;
        for variable in &flags.variables {
            environment.flag(variable.name, &variable.value, variable.flag)?;
        }
        for (key, value) in &flags.others {
            // Berth's own (a node registering with the first node, under a name), read by
            // Berth, not by hooks.
            if berth_formats::fleet::FLEET_PARAMS.contains(&key.as_str()) || key == "node-name" {
                continue;
            }
            environment.param(key, value)?;
        }
        Ok(environment.into_vec())
    }

    /// What the spec holds under each of kURL's keys: a settings section, or an add-on's
    /// fields with its resolved version and its s3Override (which the plan keeps apart).
    fn spec_sections(
        &self,
    ) -> std::collections::BTreeMap<String, serde_json::Map<String, serde_json::Value>> {
        let mut sections = self.plan.settings.clone();
        for member in &self.members {
            let planned = member.planned;
            sections.insert(
                spec_key(&planned.name).to_string(),
                addon_section(
                    &planned.config,
                    &planned.version,
                    planned.s3_override.as_deref(),
                ),
            );
        }
        sections
    }

    /// `(master, joined)`: kURL's install.sh sets MASTER on the first node; a node that
    /// joined is one when it joined the control plane (now, or as its last installer
    /// records), or its spec says `kubernetes.controlPlane: true`.
    fn node_role(&self) -> (bool, bool) {
        let role = LastInstaller::load(&self.settings.layout).ok().flatten();
        let control_plane = self.settings.joins_control_plane()
            || role.as_ref().is_some_and(|role| role.control_plane)
            || self
                .member_config("kubernetes")
                .and_then(|kubernetes| kubernetes.get("controlPlane"))
                == Some(&serde_json::Value::Bool(true));
        let joined = self.settings.mode == Mode::Join || role.is_some_and(|role| role.joined);
        (!joined || control_plane, joined)
    }

    /// The node's part in the cluster, for where add-ons' components live.
    fn role(&self) -> NodeRole {
        match self.node_role() {
            (_, false) => NodeRole::Primary,
            (true, true) => NodeRole::ControlPlane,
            (false, true) => NodeRole::Worker,
        }
    }

    /// The configuration of the add-on in folder `name`, when the run has it.
    fn member_config(&self, name: &str) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.members
            .iter()
            .find(|member| member.planned.name == name)
            .map(|member| &member.planned.config)
    }

    /// A failure in the session: an add-on's (by index) or the engine's own.
    fn hook_error(&self, index: Option<usize>, hook: &str, source: HookError) -> EngineError {
        let planned = index
            .and_then(|index| self.members.get(index))
            .map(|m| m.planned);
        EngineError::Hook {
            name: planned.map_or_else(|| "berth".into(), |p| p.name.clone()),
            version: planned.map_or_else(String::new, |p| p.version.clone()),
            hook: hook.to_string(),
            source,
        }
    }
}

/// An add-on's kURL section: its fields, its version, and its s3Override (which the spec and
/// the plan keep apart from the fields).
fn addon_section(
    config: &serde_json::Map<String, serde_json::Value>,
    version: &str,
    s3_override: Option<&str>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut fields = config.clone();
    fields.insert("version".into(), version.into());
    if let Some(url) = s3_override {
        fields.insert("s3Override".into(), url.into());
    }
    fields
}

/// The error, its causes, and the tail of the hook's output.
fn error_message(error: &EngineError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    let mut tail: &[String] = &[];
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        if let Some(hook) = cause.downcast_ref::<HookError>() {
            tail = hook.tail();
        }
        source = cause.source();
    }
    if !tail.is_empty() {
        text.push_str("\noutput:\n");
        text.push_str(&tail.join("\n"));
    }
    text
}

/// The hooks' record, in the log folder.
pub const HOOKS_LOG: &str = "hooks.log";

fn report_duration(reporter: &dyn Reporter, hook: &str, elapsed: Duration) {
    if elapsed > Duration::from_secs(1) {
        reporter.step(&format!("{hook} took {:.1}s", elapsed.as_secs_f64()));
    }
}

/// An add-on that stays as it is while its last attempt at another version failed, or while
/// another version was asked for and refused (`asked_before`, the version its record wanted):
/// that was given up (a rollback or a spec put back), so the add-on no longer says Failed.
fn given_up_attempt(state: &mut AddonState, asked_before: Option<&str>) {
    let Some(current) = &state.current else {
        return;
    };
    let failed = state
        .progressing
        .as_ref()
        .is_some_and(|condition| matches!(condition.reason, Reason::Failed | Reason::Interrupted));
    if !failed {
        return;
    }
    let in_place = &current.target.version;
    let given_up = match &state.attempt {
        Some(attempt) if attempt.target.version != *in_place => Some(format!(
            "the failed attempt at {} was given up",
            attempt.target.version
        )),
        // A version asked for and refused before any attempt (one the dist does not have).
        _ => asked_before
            .filter(|asked| asked != in_place)
            .map(|asked| format!("the refused request for {asked} was given up")),
    };
    if let Some(given_up) = given_up {
        let message = format!("{in_place} in place; {given_up}");
        state.set_progressing(false, Reason::Succeeded, message);
    }
}
