//! `berth preflight`: the host preflights alone. With FILEs, those HostPreflight files as an
//! add-on author writes them (templated for the role the flags choose); without, what
//! `berth install` (or `join`) would run before its hooks, packages fetched and verified.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use berth::engine::{self, Mode};
use berth::node::lock::NodeLock;
use berth_formats::spec::InstallerSpec;
use berth_preflight::{Limits, Report, Role, report};

use crate::commands::Stderr;
use crate::commands::install::{DecisionArgs, RunArgs, SpecArgs};

#[derive(clap::Args)]
pub struct PreflightArgs {
    /// HostPreflight files to run (troubleshoot.sh/v1beta2); without them, the host
    /// preflights of --spec as `berth install` runs them.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Template the files as for a control-plane node (the default unless --join).
    #[arg(long)]
    primary: bool,
    /// Template the files (or plan the run) as for a node joining a cluster.
    #[arg(long)]
    join: bool,
    /// Template the files as for a node that is already installed.
    #[arg(long)]
    upgrade: bool,
    /// Leave out filesystemPerformance benchmarks (files only).
    #[arg(long)]
    skip_filesystem_performance: bool,
    #[command(flatten)]
    install: SpecArgs,
}

/// Exit codes as troubleshoot's `preflight`: 0 passed, 3 a check failed, 4 one warned, 2 a
/// spec could not be read.
pub fn run(args: PreflightArgs) -> anyhow::Result<ExitCode> {
    let report = if args.files.is_empty() {
        from_spec(&args)?
    } else {
        match from_files(&args) {
            Ok(report) => report,
            Err(error) => {
                crate::commands::print_error(&error);
                return Ok(ExitCode::from(report::EXIT_SPEC_ISSUES as u8));
            }
        }
    };
    let format = args.install.output.format();
    if format.is_document() {
        let _ = berth_formats::output::write_document(
            format,
            &report.document(),
            &mut std::io::stdout(),
        );
    } else {
        show!(
            "{}",
            report.table(std::io::stdout().is_terminal()).trim_end()
        );
        say!(
            "berth: host preflights: {}; {}",
            report.summary(),
            report.exit_meaning()
        );
    }
    Ok(ExitCode::from(report.exit_code() as u8))
}

fn from_files(args: &PreflightArgs) -> anyhow::Result<Report> {
    let params = crate::commands::install::params(&args.install)?;
    let mut spec = args
        .install
        .spec
        .as_deref()
        .map(InstallerSpec::load)
        .transpose()?;
    if let Some(spec) = &mut spec {
        spec.apply_script_flags(&engine::script_flags(&params)?)?;
    }
    let role = Role {
        primary: args.primary || !args.join,
        join: args.join,
        upgrade: args.upgrade,
    };
    let documents = engine::file_documents(spec.as_ref(), role, &params, &args.files)?;
    let limits = Limits {
        filesystem_performance: !args.skip_filesystem_performance,
        ..Limits::default()
    };
    Ok(berth_preflight::run(&documents, &limits)?)
}

fn from_spec(args: &PreflightArgs) -> anyhow::Result<Report> {
    let mode = if args.join { Mode::Join } else { Mode::Install };
    // As a plan, it may take the installer the node ran last.
    let (source, settings, received) = crate::commands::install::settings(
        &args.install,
        DecisionArgs::default(),
        &RunArgs::default(),
        mode,
        true,
    )?;
    let lock = match NodeLock::acquire(
        &settings.layout.lock_file(),
        &format!("berth preflight --spec {}", source.spec_path.display()),
    ) {
        Ok(lock) => lock,
        Err(error) => {
            received.keep();
            return Err(error.into());
        }
    };
    let result = engine::plan(&source, &settings)
        .map_err(anyhow::Error::from)
        .and_then(|plan| {
            engine::preflight(&settings, &plan, &lock, &Stderr)
                .context("the host preflights could not run")
        });
    // A received bundle goes while the lock is held: no other run is receiving one.
    drop(received);
    result
}
