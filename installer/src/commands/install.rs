//! `berth install`, `berth plan` and `berth join`: one flow, from the spec (or the join
//! command's parameters) to a plan, carried out unless only the plan was asked for.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use berth::dist::Dist;
use berth::engine::{self, EngineError, Mode, Plan, RunSettings, SpecSource};
use berth::kubernetes::join::{JoinStore, check_expiry};
use berth::node::last_installer::LastInstaller;
use berth::node::layout::Layout;
use berth::node::lock::NodeLock;
use berth::plan::Permissions;
use berth_formats::output::{ApiVersion, Format, OutputArgs, PlanDocument, PlanKind};
use berth_formats::spec::flags::check_word;
use berth_formats::spec::parse_scalar;
use berth_formats::table::{self, Align};
use berth_formats::versions::VersionsError;

use crate::commands::RootArgs;
use crate::commands::{HealthTimeout, HookTimeout, Stderr};

/// The installer a command works on: its spec, its dist and lock, and what this run adds.
#[derive(clap::Args, Clone)]
pub struct SpecArgs {
    /// The Installer spec (kind: Installer) [default: the installer this node ran last, with
    /// its lock].
    #[arg(long, value_name = "FILE")]
    pub(crate) spec: Option<PathBuf>,
    /// Where packages and versions.json are: a folder or an http(s):// URL [default: where
    /// the node's last installer came from].
    #[arg(long, env = "BERTH_DIST", value_name = "DIR|URL")]
    dist: Option<String>,
    /// An airgap bundle to install from as a stream: its `.tar.gz` (a file, a mounted disk) or
    /// `-` for standard input. Its packages go straight into place, the bundle is never
    /// extracted; the spec and lock are the bundle's unless given.
    #[arg(long, value_name = "FILE|-", conflicts_with = "dist")]
    pub(crate) bundle: Option<PathBuf>,
    /// The installer's lock (lock.json): each add-on's version and package digest, pinned
    /// when its scripts were rendered; a package with another digest is refused.
    #[arg(long, env = "BERTH_LOCK", value_name = "FILE")]
    lock: Option<PathBuf>,
    /// A vendor's public key (PEM) this run trusts, besides those kept in
    /// /etc/berth/trusted-keys/ (repeatable): versions.json, each package's .sha256 and the
    /// lock must then carry a signature of one of them.
    #[arg(long = "trust-key", value_name = "FILE", visible_alias = "key")]
    trust_keys: Vec<PathBuf>,
    /// Override an add-on field for this node: `addon.field=value` (repeatable).
    #[arg(long = "set", value_name = "ADDON.FIELD=VALUE")]
    set: Vec<String>,
    /// A kURL script argument (repeatable): one of kURL's flags, merged into the spec as kURL
    /// merges it (`ha`, `public-address=10.0.0.1`), or another `key=value` that hooks see as
    /// an environment variable (`demo-port=8080` as `DEMO_PORT=8080`).
    #[arg(long = "param", value_name = "KEY=VALUE|WORD")]
    params: Vec<String>,
    /// Read more `key=value` arguments from standard input, each ended by a NUL byte: the
    /// served scripts pass them so, since a command line is every user's to read and the
    /// arguments may hold join secrets.
    #[arg(long)]
    params_from_stdin: bool,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
    #[command(flatten)]
    pub(crate) root: RootArgs,
}

/// What a plan may decide beyond the rule.
#[derive(clap::Args, Clone, Copy, Default)]
pub struct DecisionArgs {
    /// Reapply every add-on, even those already applied as asked and healthy.
    #[arg(long)]
    force_reapply: bool,
    /// Allow an add-on to go back to an older version.
    #[arg(long)]
    allow_downgrade: bool,
}

/// How a run that applies add-ons goes.
#[derive(clap::Args, Clone)]
pub struct RunArgs {
    /// Print the plan and stop (the same as `berth plan`).
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    hook_timeout: HookTimeout,
    #[command(flatten)]
    health_timeout: HealthTimeout,
    /// How long the join secrets hooks publish stay valid (`24h`, `90m`, `30s`).
    #[arg(long, env = "BERTH_JOIN_TTL", value_name = "DURATION", default_value = "24h", value_parser = berth::kubernetes::join::parse_ttl)]
    join_ttl: Duration,
    /// Where this installer's scripts are served (`<server>/<id>`); install.sh passes it, and
    /// `berth join-command` prints a join command that fetches join.sh from there.
    #[arg(long, value_name = "URL")]
    scripts_url: Option<String>,
}

impl Default for RunArgs {
    fn default() -> Self {
        Self {
            dry_run: false,
            hook_timeout: HookTimeout::default(),
            health_timeout: HealthTimeout::default(),
            join_ttl: berth::kubernetes::join::DEFAULT_TTL,
            scripts_url: None,
        }
    }
}

/// `berth plan`: the installer, and what its decisions may do.
#[derive(clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    spec: SpecArgs,
    #[command(flatten)]
    decisions: DecisionArgs,
}

/// `berth install`: the installer (its spec and dist required), its decisions, its run.
#[derive(clap::Args)]
pub struct InstallArgs {
    #[command(flatten)]
    spec: SpecArgs,
    #[command(flatten)]
    decisions: DecisionArgs,
    #[command(flatten)]
    run: RunArgs,
}

impl InstallArgs {
    /// The run's settings from these arguments.
    fn settings(&self, mode: Mode) -> anyhow::Result<(SpecSource, RunSettings, ReceivedBundle)> {
        settings(
            &self.spec,
            self.decisions,
            &self.run,
            mode,
            self.run.dry_run,
        )
    }

    /// Plans, and carries the plan out unless only the plan was asked for.
    fn execute(
        &self,
        source: &SpecSource,
        settings: RunSettings,
        received: &mut ReceivedBundle,
    ) -> anyhow::Result<ExitCode> {
        execute(&self.spec, &self.run, source, settings, false, received)
    }
}

/// `berth join`: the install arguments, and the join command's `key=value` words.
#[derive(clap::Args)]
pub struct JoinArgs {
    #[command(flatten)]
    install: InstallArgs,
    /// The join parameters the first node printed (`key=value`), `control-plane` for a node
    /// that joins the control plane, and kURL's other flags.
    #[arg(value_name = "KEY=VALUE|WORD")]
    words: Vec<String>,
}

/// `--spec` and `--dist` are required where a command applies add-ons: only a plan or a
/// preflight takes the installer the node ran last.
pub fn require_spec_and_dist(command: clap::Command) -> clap::Command {
    let name = command.get_name().to_string();
    command
        .override_usage(format!(
            "berth {name} --spec <SPEC> --dist <DIST> [OPTIONS]\n       berth {name} --bundle <FILE|-> [OPTIONS]"
        ))
        .mut_arg("spec", |arg| {
            arg.required_unless_present("bundle")
                .help("The Installer spec (kind: Installer) [default with --bundle: the bundle's]")
        })
        .mut_arg("dist", |arg| {
            arg.required_unless_present("bundle")
                .help("Where packages and versions.json are: a folder or an http(s):// URL")
        })
}

pub fn plan(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let (source, settings, mut received) = settings(
        &args.spec,
        args.decisions,
        &RunArgs::default(),
        Mode::Install,
        true,
    )?;
    execute(
        &args.spec,
        &RunArgs::default(),
        &source,
        settings,
        true,
        &mut received,
    )
}

pub fn run(args: InstallArgs) -> anyhow::Result<ExitCode> {
    let (source, settings, mut received) = args.settings(Mode::Install)?;
    args.execute(&source, settings, &mut received)
}

/// `berth upgrade`, what upgrade.sh runs: as kURL's upgrade, an install on the node that
/// installed the cluster, and the join hooks on a node that joined it.
pub fn upgrade(args: JoinArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.install.spec.root.root);
    let joined = LastInstaller::load(&layout)?.is_some_and(|last| last.joined);
    if joined {
        return join(args);
    }
    let (source, mut settings, mut received) = args.install.settings(Mode::Install)?;
    for word in &args.words {
        settings.params.push(argument(word)?);
    }
    args.install.execute(&source, settings, &mut received)
}

pub fn join(args: JoinArgs) -> anyhow::Result<ExitCode> {
    let install = &args.install;
    let (source, mut settings, mut received) = install.settings(Mode::Join)?;
    for word in &args.words {
        settings.params.push(argument(word)?);
    }
    check_expiry(&mut settings.params)?;
    let (layout, params) = (settings.layout.clone(), settings.params.clone());
    let code = install.execute(&source, settings, &mut received)?;
    if code == ExitCode::SUCCESS && !install.run.dry_run {
        let registered =
            berth_fleet::node::register_after_join(&berth::fleet::paths(&layout), &params)
                .context(
                    "the node joined, but did not register with the first node\n\
             hint: run the same join command again to retry the registration",
                )?;
        if let Some(name) = registered {
            eprintln!("berth: registered with the first node as {name}");
        }
    }
    Ok(code)
}

fn execute(
    args: &SpecArgs,
    run: &RunArgs,
    source: &SpecSource,
    settings: RunSettings,
    plan_only: bool,
    received: &mut ReceivedBundle,
) -> anyhow::Result<ExitCode> {
    if plan_only || run.dry_run {
        let plan = engine::plan(source, &settings)?;
        print_plan(&plan, args.output.format(), &mut std::io::stdout())?;
        return Ok(if plan.refused().is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let started = Instant::now();
    let command = settings.mode.command();
    let lock = NodeLock::acquire(
        &settings.layout.lock_file(),
        &format!("berth {command} --spec {}", source.spec_path.display()),
    )?;
    // Dropped before the lock, however the run ends: the received bundle goes while no other
    // run can be receiving one.
    let _received = received.take();
    // The hook session starts while the plan is made: bash and its helper library take
    // longer than the plan. A plan that fails or refuses ends it.
    let session = engine::SessionStart::begin(&settings, &lock)?;
    let plan = match engine::plan(source, &settings) {
        Ok(plan) => plan,
        Err(error) => {
            record_refusal(&settings, &error)?;
            return Err(error.into());
        }
    };
    // Shown as a step: a closed standard error must not stop the install.
    let _ = print_plan(&plan, Format::Table, &mut std::io::stderr());
    JoinStore::new(settings.layout.join_file())
        .record_installer(&plan.id, run.scripts_url.as_deref())?;
    // A plan that refuses to go on leaves the node on the installer it had.
    if plan.refused().is_empty() {
        // A bundle received as a stream does not stay: the installer's own folder keeps its
        // versions, as the dist later plans read.
        let dist = if settings.bundle.is_some() {
            keep_received_versions(&settings.layout, &plan.id)?
        } else {
            settings.dist.clone()
        };
        LastInstaller::record(
            &settings.layout,
            &plan.id,
            &source.spec_path,
            source.lock_path.as_deref(),
            &dist,
            settings.mode == Mode::Join,
            settings.mode == Mode::Join && settings.joins_control_plane(),
        )?;
    }
    engine::apply(&settings, &plan, &lock, session, &Stderr).with_context(|| {
        format!("the {command} did not finish; run the same command again to continue")
    })?;
    // The cluster's primary publishes each add-on's state as an Addon resource.
    berth::kubernetes::addon_resource::publish_and_say(&settings.layout);
    say!(
        "berth: done in {:.1}s; see `berth status`",
        started.elapsed().as_secs_f64()
    );
    // For a script: the node as the run left it, as `berth status -o json` prints it.
    let format = args.output.format();
    if format.is_document() {
        let status = berth::node::status::collect(&settings.layout)?;
        // A reader that went away (`| head`) does not undo a finished run.
        let _ = berth_formats::output::write_document(format, &status, &mut std::io::stdout());
    }
    Ok(ExitCode::SUCCESS)
}

/// An unknown version, or a field its version refuses, asked for an installed add-on stops
/// the run before it starts; the add-on's record says so, as a failed upgrade would.
fn record_refusal(settings: &RunSettings, error: &EngineError) -> anyhow::Result<()> {
    if let EngineError::Versions { source, .. } = error
        && let VersionsError::UnknownVersion {
            name, requested, ..
        }
        | VersionsError::NoneForKubernetes {
            name, requested, ..
        } = source
    {
        engine::record_refusal(&settings.layout, name, requested, &source.to_string())?;
    }
    if let EngineError::Field {
        addon,
        requested,
        refused,
    } = error
    {
        engine::record_refusal(&settings.layout, addon, requested, &refused.problem)?;
    }
    Ok(())
}

/// The run's settings from its arguments. A plan that changes nothing (`plan_only`) may leave
/// out the spec and dist: it takes the installer the node ran last.
pub(crate) fn settings(
    args: &SpecArgs,
    decisions: DecisionArgs,
    run: &RunArgs,
    mode: Mode,
    plan_only: bool,
) -> anyhow::Result<(SpecSource, RunSettings, ReceivedBundle)> {
    let mut overrides = Vec::new();
    for text in &args.set {
        let Some((key, value)) = text.split_once('=') else {
            bail!("--set {text}: expected addon.field=value");
        };
        let Some((addon, field)) = key.split_once('.') else {
            bail!("--set {text}: expected addon.field=value, e.g. containerd.preserveConfig=true");
        };
        overrides.push((addon.to_string(), field.to_string(), parse_scalar(value)));
    }
    let layout = Layout::new(&args.root.root);
    // A bundle's lock is checked with the keys given, or every key the node keeps: a bundle
    // has no origin of its own.
    let mut bundle_trust = None;
    // A bundle read as a stream: its packages land in a folder of the node's own, checked as
    // they come, and the run takes the spec, lock and dist from there.
    let mut args = args.clone();
    let mut received = ReceivedBundle {
        layout: None,
        lock: None,
    };
    let mut arriving = None;
    if let Some(bundle) = &args.bundle {
        let folder = received_bundle_dir(&layout);
        let trust = berth::dist::trust::Trust::load(&layout, &args.trust_keys, None)?;
        // Held while the bundle comes in: two runs never write the one folder. From here on,
        // what comes in is removed should these settings fail.
        received = ReceivedBundle {
            layout: Some(layout.clone()),
            lock: Some(berth::node::lock::NodeLock::acquire(
                &layout.lock_file(),
                &format!("berth receiving the bundle {}", bundle.display()),
            )?),
        };
        if bundle.as_os_str() == "-" && args.params_from_stdin {
            bail!("--bundle - reads the bundle on standard input, so --params-from-stdin cannot");
        }
        // Its head now, for the plan; the run receives the packages it needs.
        let reader: Box<dyn std::io::Read + Send> = if bundle.as_os_str() == "-" {
            Box::new(std::io::stdin())
        } else {
            Box::new(fs_err::File::open(bundle)?)
        };
        arriving = Some(berth::dist::bundle_stream::BundleArrival::new(
            berth::dist::bundle_stream::receive_head(reader, &folder, &trust)?,
        ));
        bundle_trust = Some(trust.checked_on_arrival());
        args.dist = Some(folder.display().to_string());
        args.spec = args
            .spec
            .or_else(|| Some(folder.join(berth_formats::bundle::SPEC_FILE)));
        args.lock = args
            .lock
            .or_else(|| Some(folder.join(berth_formats::lock::LOCK_FILE)));
    }
    let args = &args;
    // On an installed node, the installer it ran last is what a plan looks at by default.
    let last = match (&args.spec, &args.dist) {
        (Some(_), Some(_)) => None,
        _ if !plan_only => bail!(
            "give the Installer spec with --spec and the dist with --dist (or BERTH_DIST); only `berth plan` and `berth preflight` take the installer this node ran last"
        ),
        _ => LastInstaller::load(&layout)?,
    };
    let (spec_path, lock_path) = match (&args.spec, &last) {
        (Some(spec), _) => (spec.clone(), args.lock.clone()),
        (None, Some(last)) => (last.spec.clone(), args.lock.clone().or(last.lock.clone())),
        (None, None) => bail!(
            "give the Installer spec with --spec: this node has run no installer yet ({} is missing)",
            layout.last_installer_file().display()
        ),
    };
    let dist = match (&args.dist, &last) {
        (Some(dist), _) => dist.clone(),
        (None, Some(last)) => last.dist.clone(),
        (None, None) => bail!(
            "give the dist with --dist (or BERTH_DIST): this node has run no installer yet ({} is missing)",
            layout.last_installer_file().display()
        ),
    };
    let dist = Dist::parse(&dist)?;
    // A key given at install is kept for the dist's origin (not by a plan, which changes
    // nothing), so a later run for that dist — an upgrade by hand, a fleet rollout — checks
    // with it too; and a run given no key takes the keys kept for that origin.
    let trust = match bundle_trust {
        Some(trust) => trust,
        None => berth::dist::trust::Trust::for_dist(&layout, &args.trust_keys, &dist, !plan_only)?,
    };
    let source = SpecSource {
        spec_path,
        lock_path,
        overrides,
        permissions: Permissions {
            allow_downgrade: decisions.allow_downgrade,
            force_reapply: decisions.force_reapply,
        },
    };
    let settings = RunSettings {
        layout,
        dist,
        params: params(args)?,
        hook_timeout: run.hook_timeout.duration(),
        health_timeout: run.health_timeout.duration(),
        mode,
        join_ttl: run.join_ttl,
        reuse_unpacked: false,
        bundle: arriving,
        trust,
    };
    // The run takes the node lock itself; the received bundle goes when the command ends.
    received.hand_over();
    Ok((source, settings, received))
}

/// Where a bundle read as a stream is received: one folder, so a run that stops midway is
/// taken up by the next, beside the add-ons' folders (one filesystem: its files are moved
/// into place) and outside the runs' work folders (which each run clears).
fn received_bundle_dir(layout: &Layout) -> PathBuf {
    layout.install_dir().join("received-bundle")
}

/// A bundle received as a stream, removed when this is dropped: when its settings fail
/// (before the lock it was received under is let go), as the run ends (under the run's lock,
/// see `take`), or when a plan ends, however it ends. A run again reads the bundle whole.
pub(crate) struct ReceivedBundle {
    layout: Option<Layout>,
    lock: Option<berth::node::lock::NodeLock>,
}

impl ReceivedBundle {
    /// The settings are made: the lock goes, for the run to take; the bundle stays until the
    /// command ends.
    fn hand_over(&mut self) {
        self.lock = None;
    }

    /// The bundle's removal, moved to a guard the caller drops while it holds the node lock.
    fn take(&mut self) -> ReceivedBundle {
        ReceivedBundle {
            layout: self.layout.take(),
            lock: None,
        }
    }

    /// Leaves the bundle in place: another run holds the node lock, and may be using it.
    pub(crate) fn keep(mut self) {
        self.layout = None;
    }
}

impl Drop for ReceivedBundle {
    fn drop(&mut self) {
        if let Some(layout) = &self.layout {
            release_received_bundle(layout);
        }
    }
}

/// Removes what a bundle received as a stream left.
pub(crate) fn release_received_bundle(layout: &Layout) {
    let folder = received_bundle_dir(layout);
    if folder.is_dir() {
        let _ = berth::dist::bundle_stream::clear(&folder);
        // Unless it is a mount point of its own.
        let _ = fs_err::remove_dir(&folder);
    }
}

/// Copies the received bundle's `versions.json` (and its signature) into the installer's own
/// folder, and returns that folder as the dist to remember.
fn keep_received_versions(layout: &Layout, id: &str) -> anyhow::Result<Dist> {
    let from = received_bundle_dir(layout);
    let folder = layout.installer_dir(id);
    fs_err::create_dir_all(&folder)?;
    for name in [
        berth_formats::versions::VERSIONS_FILE.to_string(),
        format!("{}.sig", berth_formats::versions::VERSIONS_FILE),
    ] {
        if from.join(&name).is_file() {
            berth_formats::files::write_atomically(
                &folder.join(&name),
                &fs_err::read(from.join(&name))?,
            )?;
        }
    }
    Ok(Dist::Local(folder))
}

/// The NUL-ended `key=value` records on standard input (at most 1 MiB of them).
fn params_from_stdin() -> anyhow::Result<Vec<String>> {
    use std::io::Read as _;
    const LIMIT: u64 = 1 << 20;
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(LIMIT + 1)
        .read_to_end(&mut bytes)
        .context("failed to read the arguments on standard input")?;
    if bytes.len() as u64 > LIMIT {
        bail!("more than 1 MiB of arguments on standard input");
    }
    bytes
        .split(|byte| *byte == 0)
        .filter(|record| !record.is_empty())
        .map(|record| {
            String::from_utf8(record.to_vec())
                .context("an argument on standard input is not UTF-8 text")
        })
        .collect()
}

fn print_plan(plan: &Plan, format: Format, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    if format.is_document() {
        let document = PlanDocument {
            api_version: ApiVersion::V1,
            kind: PlanKind::Plan,
            installer: plan.id.clone(),
            addons: plan
                .addons
                .iter()
                .map(|addon| berth_formats::output::PlannedAddon {
                    name: addon.name.clone(),
                    version: addon.version.clone(),
                    decision: addon.decision.kind(),
                    from: addon.decision.from().map(str::to_string),
                    reason: addon.reason.clone(),
                })
                .collect(),
        };
        berth_formats::output::write_document(format, &document, out)?;
        return Ok(());
    }
    let wide = format == Format::Wide;
    let mut header = vec!["NAME", "VERSION", "DECISION", "REASON"];
    if wide {
        header.extend(["FROM", "PACKAGE"]);
    }
    let rows: Vec<Vec<String>> = plan
        .addons
        .iter()
        .map(|addon| {
            let mut row = vec![
                addon.name.clone(),
                addon.version.clone(),
                addon.decision.name().to_string(),
                addon.reason.clone(),
            ];
            if wide {
                row.push(addon.decision.from().unwrap_or("-").to_string());
                row.push(addon.target.package_digest.to_string());
            }
            row
        })
        .collect();
    write!(
        out,
        "{}",
        table::render_columns(&header, &[Align::Left], &rows)
    )?;
    Ok(())
}

/// The `--param` words, and those on standard input with `--params-from-stdin`: `key=value`
/// pairs and kURL's bare words.
pub(crate) fn params(args: &SpecArgs) -> anyhow::Result<Vec<(String, String)>> {
    args.params
        .iter()
        .cloned()
        .chain(if args.params_from_stdin {
            params_from_stdin()?
        } else {
            Vec::new()
        })
        .map(|text| argument(&text))
        .collect()
}

/// One script argument: a `key=value` pair, or one of kURL's bare words (`ha`), which reads as
/// the flag with an empty value.
fn argument(text: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some(("", _)) => bail!("argument `{text}`: expected KEY=VALUE or one of kURL's words"),
        Some((key, value)) => Ok((key.to_string(), value.to_string())),
        None => {
            check_word(text)?;
            Ok((text.to_string(), String::new()))
        }
    }
}
