//! `berth rollout`: on the first node, move an add-on across the fleet by a rollout file, and
//! watch, pause, resume, abort or roll back what it does. The serving first node (`berth
//! fleet serve`) carries each rollout out; these commands change its records under their lock.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context as _;
use berth::fleet::{Node, paths};
use berth::node::layout::Layout;
use berth_fleet::first_node;
use berth_fleet::log::escape;
use berth_fleet::rollouts::{self, Rollouts};
use berth_formats::Sha256Digest;
use berth_formats::package_index::package_file_name;
use berth_formats::rollout::{Control, Direction, Rollout, RolloutRecord, TargetState};
use berth_formats::table::{self, Align};

use crate::commands::RootArgs;

#[derive(clap::Subcommand)]
pub enum RolloutCommand {
    /// Start a rollout (a `kind: Rollout` file) over the registered nodes. Refused when this
    /// node's dist does not offer the add-on or version, or when it would move a node to an
    /// older version without `allowDowngrade: true`.
    Apply {
        /// The rollout file.
        file: PathBuf,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Where each rollout, or the one named, stands: the strategy in force, and per node its
    /// state and times.
    #[command(
        after_help = "Output: a table per rollout (-o json|yaml prints the RolloutList document, docs/schemas/rollout-list.v1.json)."
    )]
    Status {
        /// A rollout's name (all of them unless given).
        name: Option<String>,
        #[command(flatten)]
        output: berth_formats::output::OutputArgs,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Start no further node until resumed; nodes already running finish.
    Pause {
        /// The rollout's name (its `metadata.name`).
        name: String,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Let a paused rollout start nodes again.
    Resume {
        /// The rollout's name (its `metadata.name`).
        name: String,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Stop for good: no further node starts; nodes already running finish.
    Abort {
        /// The rollout's name (its `metadata.name`).
        name: String,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Send the nodes the rollout reached back to what they ran before it, by its strategy.
    Rollback {
        /// The rollout's name (its `metadata.name`).
        name: String,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Forget a finished rollout.
    Delete {
        /// The rollout's name (its `metadata.name`).
        name: String,
        #[command(flatten)]
        root: RootArgs,
    },
}

pub fn run(command: RolloutCommand) -> anyhow::Result<ExitCode> {
    let now = SystemTime::now();
    match command {
        RolloutCommand::Apply { file, root } => {
            let layout = Layout::new(&root.root);
            let fleet = paths(&layout);
            require_serving(&fleet, "apply the rollout")?;
            let text = read_bounded(&file)?;
            let rollout = Rollout::parse(&file.display().to_string(), &text)?;
            let (versions, dist, trust) = offered_versions(&layout)?;
            rollouts::check_offered(&rollout, &versions, &dist.argument())?;
            let packages = pinned_packages(&trust, &rollout, &versions, &dist)?;
            let nodes = first_node::nodes(&fleet, &Node::new(&layout))?;
            let uid = berth_fleet::random_hex(4)?;
            let record = Rollouts::new(&fleet).update(|records| {
                let record = rollouts::plan(rollout, records, &nodes, uid, packages, now)?;
                records.retain(|old| old.rollout.metadata.name != record.rollout.metadata.name);
                records.push(record.clone());
                Ok(record)
            })?;
            show!(
                "rollout {} applied: {} {} to {} node(s); `berth rollout status {}` follows it",
                record.work_id(),
                record.rollout.spec.addon,
                record.rollout.spec.version,
                record.targets.len(),
                record.rollout.metadata.name
            );
            Ok(ExitCode::SUCCESS)
        }
        RolloutCommand::Status { name, output, root } => {
            let layout = Layout::new(&root.root);
            if first_node::check_first_node(&paths(&layout))? == first_node::Serving::Stopped {
                eprintln!("{}", crate::commands::fleet::NOT_SERVING);
            }
            let mut records = Rollouts::new(&paths(&layout)).load_all()?;
            if let Some(name) = &name {
                let record = rollouts::find(&mut records, name)?.clone();
                records = vec![record];
            }
            if output.format().is_document() {
                let list = berth_formats::output::RolloutList {
                    api_version: berth_formats::output::ApiVersion::V1,
                    kind: berth_formats::output::RolloutListKind::RolloutList,
                    items: records,
                };
                let _ = berth_formats::output::write_document(
                    output.format(),
                    &list,
                    &mut std::io::stdout(),
                );
            } else if records.is_empty() {
                show!("no rollouts; `berth rollout apply FILE` starts one");
            } else {
                for record in &records {
                    show!("{}", render(record, now));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        RolloutCommand::Pause { name, root } => set(&root, &name, Control::Paused, now),
        RolloutCommand::Resume { name, root } => set(&root, &name, Control::Running, now),
        RolloutCommand::Abort { name, root } => set(&root, &name, Control::Aborted, now),
        RolloutCommand::Rollback { name, root } => {
            let layout = Layout::new(&root.root);
            require_serving(&paths(&layout), "roll back")?;
            let record = Rollouts::new(&paths(&layout)).update(|records| {
                let record = rollouts::find(records, &name)?;
                let back = rollouts::rollback(record, now)?;
                *record = back.clone();
                Ok(back)
            })?;
            show!(
                "rollout {} rolls back {} node(s): {}",
                record.work_id(),
                record.targets.len(),
                record
                    .targets
                    .iter()
                    .map(|target| format!("{} to {}", target.node, target.version))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Ok(ExitCode::SUCCESS)
        }
        RolloutCommand::Delete { name, root } => {
            let layout = Layout::new(&root.root);
            first_node::check_first_node(&paths(&layout))?;
            let rollouts = Rollouts::new(&paths(&layout));
            let records = rollouts.load_all()?;
            if let Some(record) = records
                .iter()
                .find(|record| record.rollout.metadata.name == name)
                && rollouts::unfinished(record)
            {
                anyhow::bail!(
                    "rollout {name} is {:?}; abort it first (`berth rollout abort {name}`)",
                    record.state
                );
            }
            if !rollouts.delete(&name)? {
                anyhow::bail!("no rollout named {name}");
            }
            show!("rollout {name} deleted");
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn set(root: &RootArgs, name: &str, control: Control, now: SystemTime) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&root.root);
    if control == Control::Running {
        require_serving(&paths(&layout), "resume the rollout")?;
    } else {
        // Holding or stopping a rollout needs no server: it is on record for when one runs.
        first_node::check_first_node(&paths(&layout))?;
    }
    let state = Rollouts::new(&paths(&layout)).update(|records| {
        let record = rollouts::find(records, name)?;
        rollouts::control(record, control, now)?;
        Ok(record.state)
    })?;
    show!("rollout {name}: {state:?}");
    Ok(ExitCode::SUCCESS)
}

/// Refuses what would need the first node's server to move nodes while it is not running.
fn require_serving(fleet: &berth_fleet::FleetPaths, what: &str) -> anyhow::Result<()> {
    if first_node::check_first_node(fleet)? == first_node::Serving::Stopped {
        anyhow::bail!(
            "`berth fleet serve` is not running on this node: no node would move\nhint: start `berth fleet serve`, then {what} again"
        );
    }
    Ok(())
}

/// What this node's dist offers (the dist of the installer it ran last), the dist, and the
/// keys kept for it, with which `versions.json` is checked against its signature.
fn offered_versions(
    layout: &Layout,
) -> anyhow::Result<(
    berth_formats::versions::VersionsFile,
    berth::dist::Dist,
    berth::dist::trust::Trust,
)> {
    let last = berth::node::last_installer::LastInstaller::load(layout)?.context(
        "this node has run no installer, so there is no dist to check the rollout against; install it first",
    )?;
    let dist = berth::dist::Dist::parse(&last.dist)?;
    // The keys kept for that dist: those an install was given, or a served script carried.
    let trust = berth::dist::trust::Trust::load(layout, &[], Some(&dist))?;
    let location = dist.location(berth_formats::versions::VERSIONS_FILE);
    let bytes = dist
        .read(berth_formats::versions::VERSIONS_FILE)
        .with_context(|| format!("failed to read what the dist offers ({location})"))?;
    trust.check_dist_file(&dist, berth_formats::versions::VERSIONS_FILE, &bytes)?;
    let versions = berth_formats::versions::VersionsFile::parse(&location, &bytes)?;
    Ok((versions, dist, trust))
}

/// The sha256 of each package the rollout installs, as this node's dist publishes it now (its
/// `.sha256` checked against its signature with keys kept in /etc/berth/trusted-keys/):
/// pinned in the rollout's record, so that no node installs other bytes.
fn pinned_packages(
    trust: &berth::dist::trust::Trust,
    rollout: &Rollout,
    versions: &berth_formats::versions::VersionsFile,
    dist: &berth::dist::Dist,
) -> anyhow::Result<BTreeMap<String, Sha256Digest>> {
    let addon = &rollout.spec.addon;
    rollouts::wanted_versions(rollout)
        .into_iter()
        .map(|version| {
            let compression = versions
                .entry(addon, version)
                .map(|entry| entry.compression)
                .unwrap_or_default();
            let file = package_file_name(addon, version, compression);
            let digest = trust.package_digest(dist, &file).with_context(|| {
                format!(
                    "failed to pin the package of {addon} {version} (its .sha256 in {})",
                    dist.argument()
                )
            })?;
            Ok((version.to_string(), digest))
        })
        .collect()
}

/// Reads a rollout file, refusing one larger than a rollout can be.
fn read_bounded(path: &std::path::Path) -> anyhow::Result<String> {
    use std::io::Read as _;
    let file = fs_err::File::open(path)?;
    let mut text = String::new();
    file.take(berth_formats::rollout::MAX_ROLLOUT_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("{} is not UTF-8 text", path.display()))?;
    Ok(text)
}

/// A rollout as a heading and a table of its nodes.
fn render(record: &RolloutRecord, now: SystemTime) -> String {
    let count = |state| {
        record
            .targets
            .iter()
            .filter(|target| target.state == state)
            .count()
    };
    let version = match record.direction {
        Direction::Forward => record.rollout.spec.version.clone(),
        Direction::Rollback => format!(
            "back to what each node ran before {}",
            record.work_id_of(record.generation.saturating_sub(1))
        ),
    };
    let strategy = record
        .rollout
        .strategy()
        .map_or_else(|error| error, |strategy| strategy.to_string());
    let mut text = format!(
        "{} ({:?}): {} {version} — {:?}; {} succeeded, {} soaking, {} running, {} failed, {} to apply\nstrategy: {strategy}\n",
        record.work_id(),
        record.direction,
        record.rollout.spec.addon,
        record.state,
        count(TargetState::Succeeded),
        count(TargetState::Soaking),
        count(TargetState::Running),
        count(TargetState::Failed),
        count(TargetState::ToApply),
    );
    if !record.reason.is_empty() {
        text.push_str(&format!("{}\n", escape(&record.reason)));
    }
    let ago = |time: &Option<String>| {
        time.as_deref()
            .and_then(|time| humantime::parse_rfc3339_weak(time).ok())
            .and_then(|then| now.duration_since(then).ok())
            .map_or_else(|| "-".to_string(), |age| format!("{}s ago", age.as_secs()))
    };
    let rows: Vec<[String; 8]> = record
        .targets
        .iter()
        .map(|target| {
            [
                escape(&target.node),
                target.machine_id.chars().take(12).collect(),
                format!("{:?}", target.role).to_lowercase(),
                escape(target.group.as_deref().unwrap_or("-")),
                format!(
                    "{} -> {}",
                    target.previous_version.as_deref().unwrap_or("-"),
                    target.version
                ),
                format!("{:?}", target.state),
                ago(&target.finished_at.clone().or(target.started_at.clone())),
                escape(&summary(&target.message)),
            ]
        })
        .collect();
    text.push_str(
        table::render(
            [
                "NODE", "MACHINE", "ROLE", "GROUP", "VERSION", "STATE", "SINCE", "MESSAGE",
            ],
            [Align::Left; 8],
            &rows,
        )
        .trim_end_matches('\n'),
    );
    text
}

/// A failure message in a line: its first, and its last when there are more (for a hook, the
/// error, then the last thing the hook printed).
fn summary(message: &str) -> String {
    let lines: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    // A short message whole (its reason is often in the middle of an error chain); a long
    // one's first line and last two (for a hook, the error, then what it printed last).
    if lines.len() <= 4 {
        lines.join(": ")
    } else {
        format!("{}: …: {}", lines[0], lines[lines.len() - 2..].join(": "))
    }
}

#[cfg(test)]
mod tests {
    use berth_formats::Sha256Digest;
    use berth_formats::fleet::{NodeInfo, NodeRecord, Role};

    use super::*;

    /// What a node sends (its run's failure message) reaches the table escaped: no byte of a
    /// terminal escape, a bidirectional override or a line break of its own.
    #[test]
    fn the_status_table_escapes_what_nodes_sent() {
        let rollout = Rollout::parse(
            "rollout.yaml",
            "apiVersion: berth/v1alpha1\nkind: Rollout\nmetadata: {name: demo-2}\nspec: {addon: demo, version: 2.0.0}\n",
        )
        .unwrap();
        let node = NodeRecord {
            info: NodeInfo {
                name: "node-2".into(),
                machine_id: "m2".into(),
                role: Role::Secondary,
                labels: Default::default(),
                address: String::new(),
            },
            pin: String::new(),
            seen_from: String::new(),
            registered_at: String::new(),
            last_contact: String::new(),
            addons: Vec::new(),
        };
        let packages = BTreeMap::from([("2.0.0".to_string(), Sha256Digest::of(b"2.0.0"))]);
        let mut record = rollouts::plan(
            rollout,
            &[],
            &[node],
            "u".into(),
            packages,
            SystemTime::now(),
        )
        .unwrap();
        record.targets[0].state = TargetState::Failed;
        record.targets[0].message =
            "hook failed\u{1b}[2J\u{1b}]0;owned\u{7}\nlast line \u{9b}31m\u{202e}txt.exe".into();
        let table = render(&record, SystemTime::now());
        assert!(crate::commands::terminal_safe(&table), "{table:?}");
        assert!(table.contains("hook failed\\u{1b}[2J"), "{table}");
        assert_eq!(table.lines().count(), 4, "{table}");
    }
}
