//! `berth`, the node installer: plans, verifies, loads images, runs add-on hooks and records
//! what it applied. The commands are thin; the work is in the library.

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// `eprintln!` that never panics: a closed standard error (a terminal gone, a pipe whose
/// reader quit) must not stop an install half-way.
macro_rules! say {
    ($($argument:tt)*) => {{
        use std::io::Write as _;
        // One write: unbuffered, a line formatted into it would take one per part.
        let _ = std::io::stderr().write_all(format!("{}\n", format_args!($($argument)*)).as_bytes());
    }};
}

/// Prints to standard output; a reader that went away (`berth status | head`) is not an error.
macro_rules! show {
    ($($argument:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($argument)*);
    }};
}

mod commands;

#[derive(Parser)]
#[command(name = "berth", version, about = "The Berth node installer")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install or update the add-ons of an Installer spec on this node.
    #[command(
        after_help = "Output: the steps on standard error as they go; when the run ends, the node's status on standard output (the table, or with -o json|yaml the NodeStatus document, docs/schemas/node-status.v1.json).\nExit status: 0 when every add-on is applied; 1 when one is not (its record says which step failed and why; the same command again continues); 130 after Ctrl-C, 143 after SIGTERM."
    )]
    Install(commands::install::InstallArgs),
    /// Print what `install` would do for each add-on, and why; change nothing.
    #[command(
        after_help = "Output: a line per add-on (-o wide adds FROM and PACKAGE; -o json|yaml prints the Plan document, docs/schemas/plan.v1.json).\nExit status: 0 when every add-on can be applied; 1 when one is refused (a downgrade) or the spec, lock or dist cannot be read."
    )]
    Plan(commands::install::PlanArgs),
    /// Join this node to a cluster: fetch, load, preflight and each add-on's join hook, with
    /// the key=value parameters of the command the first node printed.
    #[command(
        after_help = "Output: the steps on standard error as they go; when the run ends, the node's status on standard output (the table, or with -o json|yaml the NodeStatus document, docs/schemas/node-status.v1.json).\nExit status: 0 when every add-on is applied; 1 when one is not (its record says which step failed and why; the same command again continues); 130 after Ctrl-C, 143 after SIGTERM."
    )]
    Join(commands::install::JoinArgs),
    /// Upgrade this node to the spec: as kURL's upgrade, an install on the node that installed
    /// the cluster, each add-on's join hook on a node that joined it.
    #[command(
        after_help = "Output: the steps on standard error as they go; when the run ends, the node's status on standard output (the table, or with -o json|yaml the NodeStatus document, docs/schemas/node-status.v1.json).\nExit status: 0 when every add-on is applied; 1 when one is not (its record says which step failed and why; the same command again continues); 130 after Ctrl-C, 143 after SIGTERM."
    )]
    Upgrade(commands::install::JoinArgs),
    /// Print the command that joins a new node to this one's cluster.
    #[command(name = "join-command")]
    JoinCommandLine(commands::join_command::JoinCommandArgs),
    /// Publish a join parameter (hooks call this through `berth_set_join_param`).
    #[command(subcommand, hide = true)]
    JoinParam(commands::join_command::JoinParamCommand),
    /// Run host preflights alone: HostPreflight FILEs, or those `install` would run for --spec.
    #[command(
        after_help = "Output: a line per check (-o json|yaml prints the PreflightReport document, docs/schemas/preflight-report.v1.json).\nExit status, as troubleshoot's preflight: 0 every check passed, 2 a file or spec could not be read, 3 a check failed, 4 a check warned and none failed."
    )]
    Preflight(commands::preflight::PreflightArgs),
    /// Go back to an add-on's previous version, from the packages kept on this node.
    Rollback(commands::rollback::RollbackArgs),
    /// Run each add-on's reset hook and remove what Berth placed on this node.
    #[command(
        after_help = "Output: what was reset and removed (-o json|yaml prints the ResetReport document, docs/schemas/reset-report.v1.json).\nExit status: 0 when the node is reset; 1 when it was not confirmed (nothing changed) or a step failed."
    )]
    Reset(commands::reset::ResetArgs),
    /// On a control-plane node: remove another node from the cluster for good (drained, its
    /// etcd member and Node object gone), as kURL's ekco-purge-node.
    #[command(name = "remove-node", visible_alias = "purge-node")]
    RemoveNode(commands::remove_node::RemoveNodeArgs),
    /// Show each add-on's desired, current and last version and its conditions, its
    /// components probed live.
    #[command(
        after_help = "Output: a line per add-on (-o wide adds APPLIED and COMPONENTS; -o json|yaml prints the NodeStatus document, docs/schemas/node-status.v1.json).\nExit status: 0; 1 when a record is damaged (the others are shown all the same)."
    )]
    Status(commands::status::StatusArgs),
    /// Probe an add-on's components once; exit non-zero when it is not Available.
    #[command(
        after_help = "Output: a line per component and the conditions (-o wide adds OBJECTS; -o json|yaml prints the AddonHealth document, docs/schemas/addon-health.v1.json).\nExit status: 0 when the add-on is Available; 1 when it is not, or is not installed."
    )]
    Health(commands::health::HealthArgs),
    /// Collect this node's support bundle: Berth's records, the host, the container runtime
    /// and the add-ons' own collectors, redacted, as troubleshoot.sh lays out a host bundle.
    #[command(
        after_help = "Output: the bundle's path on standard output.\nExit status: 0 when the bundle holds every node asked for; 1 when a node's bundle did not come (the archive names it) or none was written."
    )]
    SupportBundle(commands::support_bundle::SupportBundleArgs),
    /// On a control-plane node: the cluster's state in one archive (an etcd snapshot, the PKI,
    /// kubeadm's files, Berth's records), each file's digest in its manifest; or, with
    /// --verify, check an archive through without restoring it.
    #[command(
        after_help = "Output: what was backed up on standard error; the archive's path on standard output. With --verify: what it holds and who signed it.\nExit status: 0 when the backup is written (or whole); 1 when it is not (the reason is named; a backup not written leaves nothing behind)."
    )]
    Backup(commands::backup::BackupArgs),
    /// On a fresh node: bring a backup back: check it through, put the cluster's certificate
    /// authorities, Berth's records and the etcd snapshot in place, and install the installer it
    /// records, etcd's data made from the snapshot; then say what the other nodes need (at a
    /// new address, the join command run again on each).
    #[command(
        after_help = "Output: the steps on standard error, the install's among them, then what each other node needs and the join command.\nExit status: 0 when the node runs the restored cluster; 1 when the backup is refused (nothing changed) or the install did not finish (the same command again continues)."
    )]
    Restore(commands::restore::RestoreArgs),
    /// Check a whole dist or airgap bundle offline: signatures, digests, every package's files.
    #[command(
        after_help = "Exit status: 0 when every check passed; 1 when one failed (each is named)."
    )]
    Verify(commands::verify::VerifyArgs),
    /// The signing keys this node keeps, for every dist or one dist's origin; remove one.
    #[command(subcommand)]
    Trust(commands::trust::TrustCommand),
    /// Verify a package against its `.sha256` file and unpack it, refusing unsafe paths.
    Unpack(commands::unpack::UnpackArgs),
    /// Edit a kustomization.yaml (the insert_* helpers call this).
    #[command(subcommand, hide = true)]
    Kustomization(commands::kustomization::KustomizationCommand),
    /// kURL's utility commands hooks run as `$BIN_KURL` (a link to `berth` named `kurl`).
    #[command(subcommand, hide = true)]
    Kurl(commands::kurl::KurlCommand),
    /// kubeadm's configuration as kURL renders it, from a hook session's variables.
    #[command(name = "kubeadm-config", hide = true)]
    KubeadmConfig(commands::kubeadm_config::KubeadmConfigArgs),
    /// The fleet: the first node serving the others; a node registering and reporting.
    #[command(subcommand)]
    Fleet(commands::fleet::FleetCommand),
    /// On the first node: every node that registered, its role, labels and add-ons.
    #[command(
        after_help = "Output: a line per node (-o json|yaml prints the NodeList document, docs/schemas/node-list.v1.json)."
    )]
    Nodes(commands::fleet::NodesArgs),
    /// On the first node: move an add-on across the nodes by a rollout, and follow it.
    #[command(subcommand)]
    Rollout(commands::rollout::RolloutCommand),
    /// Print berth's version.
    Version,
    /// Print the completions of berth's commands and flags for SHELL, to source or to keep
    /// (bash: `berth completion bash > /etc/bash_completion.d/berth`).
    Completion {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let arguments: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Called as one of kURL's utility programs (`$DIR/bin/bcrypt`): that program's command line.
    if let Some(program) = berth::hooks::kurl_programs::called_as(&arguments) {
        let Some(words) = arguments[1..]
            .iter()
            .map(|word| word.to_str().map(str::to_string))
            .collect::<Option<Vec<String>>>()
        else {
            say!("{program}: an argument is not UTF-8 text");
            return ExitCode::from(2);
        };
        return berth::hooks::kurl_programs::run(program, &words);
    }
    let arguments = commands::kurl::arguments_under_kurls_name(arguments);
    // Only a plan or a preflight takes the installer the node ran last.
    let require = commands::install::require_spec_and_dist;
    let matches = Cli::command()
        .mut_subcommand("install", require)
        .mut_subcommand("join", require)
        .mut_subcommand("upgrade", require)
        .get_matches_from(arguments);
    let Cli { command } = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    let result = match command {
        Command::Install(args) => commands::install::run(args),
        Command::Plan(args) => commands::install::plan(args),
        Command::Join(args) => commands::install::join(args),
        Command::Upgrade(args) => commands::install::upgrade(args),
        Command::JoinCommandLine(args) => commands::join_command::run(args),
        Command::JoinParam(command) => commands::join_command::param_run(command),
        Command::Preflight(args) => commands::preflight::run(args),
        Command::Rollback(args) => commands::rollback::run(args),
        Command::Reset(args) => commands::reset::run(args),
        Command::RemoveNode(args) => commands::remove_node::run(args),
        Command::Status(args) => commands::status::run(args),
        Command::Health(args) => commands::health::run(args),
        Command::SupportBundle(args) => commands::support_bundle::run(args),
        Command::Unpack(args) => commands::unpack::run(args),
        Command::Verify(args) => commands::verify::run(args),
        Command::Backup(args) => commands::backup::run(args),
        Command::Restore(args) => commands::restore::run(args),
        Command::Trust(command) => commands::trust::run(command),
        Command::Kustomization(command) => commands::kustomization::run(command),
        Command::Kurl(command) => commands::kurl::run(command),
        Command::KubeadmConfig(args) => commands::kubeadm_config::run(args),
        Command::Fleet(command) => commands::fleet::run(command),
        Command::Nodes(args) => commands::fleet::nodes(args),
        Command::Rollout(command) => commands::rollout::run(command),
        Command::Version => {
            show!("berth {}", env!("CARGO_PKG_VERSION"));
            Ok(ExitCode::SUCCESS)
        }
        Command::Completion { shell } => {
            // Of the commands people run: clap_complete would offer the hidden ones too.
            let full = Cli::command();
            let mut shown = clap::Command::new("berth")
                .version(env!("CARGO_PKG_VERSION"))
                .subcommands(
                    full.get_subcommands()
                        .filter(|command| !command.is_hide_set())
                        .cloned(),
                );
            clap_complete::generate(shell, &mut shown, "berth", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            commands::print_error(&error);
            // As a shell reports a command a signal ended: 130 for Ctrl-C, 143 for SIGTERM.
            match berth::interrupt::received() {
                Some(signal) => ExitCode::from(128 + signal as u8),
                None => ExitCode::FAILURE,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    /// Every argument of every command, to the deepest subcommand, says what it is.
    #[test]
    fn every_argument_has_help() {
        let missing = berth_testkit::undocumented(&Cli::command());
        assert!(missing.is_empty(), "without help: {missing:#?}");
    }

    /// docs/cli/ holds this program's reference as its definitions say it.
    #[test]
    fn the_reference_is_the_command_lines_own() {
        berth_testkit::cli_docs::assert_reference(&Cli::command(), env!("CARGO_MANIFEST_DIR"));
    }
}
