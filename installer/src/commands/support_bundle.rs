//! `berth support-bundle`: this node's bundle, as troubleshoot.sh's `support-bundle` writes a
//! host bundle, redacted; its analysis summed up on the terminal.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use berth::node::layout::Layout;
use berth::support_bundle::{self, Options};
use berth_preflight::support_bundle::BundleLimits;

use crate::commands::RootArgs;

#[derive(clap::Args)]
pub struct SupportBundleArgs {
    /// SupportBundle, HostCollector, HostPreflight or Redactor files (troubleshoot.sh/v1beta2)
    /// to collect besides Berth's built-in spec and the add-ons' own.
    #[arg(value_name = "SPEC")]
    specs: Vec<PathBuf>,
    /// Where to write the bundle (a .tar.gz); `support-bundle-<UTC time>.tar.gz` here if not given.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    no_format: berth_formats::output::NoOutputFormat,
    /// Journals and log files of this long ago at most (`2h`, `30m`, `3d`; a bare number is
    /// seconds).
    #[arg(long, value_name = "DURATION", value_parser = berth_formats::duration::a_second_to_a_year)]
    since: Option<Duration>,
    /// troubleshoot Redactor files, applied besides the default redactors.
    #[arg(long = "redact", value_name = "FILE")]
    redactors: Vec<PathBuf>,
    /// The longest one program collector runs (`60s`, `5m`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = berth_formats::duration::a_second_to_a_day)]
    collector_timeout: Duration,
    /// The most MiB the bundle's files hold together (one file keeps at most 64 MiB).
    #[arg(long, value_name = "MIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=65536))]
    max_size: u64,
    /// Run filesystemPerformance collectors (they write to the disk; off by default).
    #[arg(long)]
    filesystem_performance: bool,
    /// On the fleet's first node: the other nodes' bundles too (`all`, or names), each
    /// asked through its agent, in one archive with a folder per node.
    #[arg(long, value_name = "all|NAME", num_args = 1..)]
    nodes: Vec<String>,
    /// With --nodes: how long to wait for the nodes' bundles (`90s`, `5m`; a bare number is
    /// seconds); a node that has not sent its bundle by then is listed as missing.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = berth_formats::duration::a_second_to_a_day)]
    wait: Duration,
    #[command(flatten)]
    root: RootArgs,
}

impl SupportBundleArgs {
    fn options(&self) -> Options {
        Options {
            specs: self.specs.clone(),
            redactors: self.redactors.clone(),
            since: self.since,
            limits: BundleLimits {
                collector_timeout: self.collector_timeout,
                total_bytes: self.max_size << 20,
                filesystem_performance: self.filesystem_performance,
                ..BundleLimits::default()
            },
        }
    }
}

pub fn run(args: SupportBundleArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.root.root);
    let output = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(support_bundle::default_name()));
    let terminal = std::io::stderr().is_terminal();
    let progress = |what: &str| {
        if terminal {
            say!("berth: collecting {what}");
        }
    };
    if !args.nodes.is_empty() {
        return fleet_bundle(&args, &layout, &output, &progress);
    }
    // Ctrl-C stops the collectors' programs (in process groups of their own, which the
    // terminal's signal misses) and writes no bundle: one cut short would read as whole.
    berth::interrupt::install()?;
    let collected = support_bundle::collect(&layout, &args.options(), &progress)?;
    if let Some(signal) = berth::interrupt::received() {
        anyhow::bail!(
            "interrupted ({signal}): the collectors were stopped and no bundle was written"
        );
    }
    support_bundle::write(&collected, &output)?;
    let files = collected.staging.files();
    let bytes: u64 = files.values().map(|file| file.bytes).sum();
    let redactions = collected.staging.redactions();
    say!(
        "berth: {} files ({} KiB before compression); {} values hidden by {} redactors, {} of them secrets Berth knows on this node",
        files.len(),
        bytes / 1024,
        redactions.count(),
        redactions.by_redactor.len(),
        collected.secrets
    );
    for left_out in collected.staging.left_out() {
        say!("berth: left out {left_out}: the bundle reached --max-size");
    }
    for result in &collected.report.results {
        if matches!(
            result.outcome,
            berth_preflight::Outcome::Fail | berth_preflight::Outcome::Warn
        ) {
            say!(
                "{} {}: {}",
                result.outcome.word(),
                result.title,
                result.message
            );
        }
    }
    show!("{}", output.display());
    Ok(ExitCode::SUCCESS)
}

/// The fleet's bundle: the nodes asked first (they collect while this node does), then this
/// node's own, then each node's as it arrives, until every one answered or --wait passed.
fn fleet_bundle(
    args: &SupportBundleArgs,
    layout: &Layout,
    output: &std::path::Path,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<ExitCode> {
    use berth_fleet::first_node::bundles::{self, Gathered};
    let paths = berth::fleet::paths(layout);
    let started = std::time::Instant::now();
    let asked = bundles::ask(&paths, &args.nodes, args.since, args.wait)?;
    say!(
        "berth: asked {} nodes for their bundles ({}); waiting up to {}s",
        asked.nodes.len(),
        asked.id,
        args.wait.as_secs()
    );
    let result = (|| {
        let own = support_bundle::collect(layout, &args.options(), progress)?;
        let gathered = bundles::wait(
            &paths,
            &asked,
            started + args.wait,
            // What a node sent reaches the terminal escaped.
            &|name, gathered| match gathered {
                Gathered::Collected(_) => {
                    say!(
                        "berth: {}",
                        support_bundle::fleet::said(name, "bundle received")
                    )
                }
                Gathered::Failed(message) => say!(
                    "berth: {}",
                    support_bundle::fleet::said(name, &format!("no bundle: {message}"))
                ),
                Gathered::Missing => {}
            },
        );
        support_bundle::fleet::write(
            &own,
            &asked.own_name,
            &gathered,
            args.wait,
            output,
            args.max_size << 20,
        )
    })();
    bundles::close(&paths, &asked.id);
    let lines = result?;
    let mut complete = true;
    for line in &lines {
        if line.bundle != "collected" {
            complete = false;
            say!(
                "berth: {}",
                support_bundle::fleet::said(
                    &line.name,
                    &format!("{}: {}", line.bundle, line.message)
                )
            );
        }
    }
    show!("{}", output.display());
    // Every bundle that came is in the archive; one that did not is a failure to say.
    Ok(if complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
