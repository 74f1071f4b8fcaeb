//! `berth fleet serve|register|report` and `berth nodes`: the first node serving the others,
//! a node registering with it and reporting its add-ons, and the first node's list of them.

use std::net::TcpListener;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use berth::fleet::{JoinFile, Node, paths};
use berth::node::layout::Layout;
use berth_fleet::channel::Pin;
use berth_fleet::log::escape;
use berth_fleet::{first_node, node};
use berth_formats::fleet::{NodeInfo, NodeRecord, Role};
use berth_formats::output::{AddonRollout, ApiVersion, FleetNode, NodeList, NodeListKind};
use berth_formats::rollout::{RolloutRecord, TargetRecord};
use berth_formats::table::{self, Align};

use crate::commands::RootArgs;

#[derive(clap::Subcommand)]
pub enum FleetCommand {
    /// On the first node: publish the fleet's join parameters and serve the other nodes.
    Serve {
        /// Where to listen.
        #[arg(long, default_value = "0.0.0.0:7433")]
        listen: String,
        /// Where the other nodes reach this one (the listening address unless given).
        #[arg(long)]
        advertise: Option<String>,
        /// How long the join token lasts (`24h`, `90m`; a bare number is seconds).
        #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = berth::kubernetes::join::parse_ttl)]
        token_ttl: Duration,
        /// This node's name in the fleet (its host name unless given).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Register this node with the first node of its join command.
    Register {
        /// The first node's `fleet-address`.
        #[arg(long)]
        first_node: String,
        /// The first node's `fleet-pin`: its key's hash, the only key this node trusts.
        #[arg(long)]
        pin: String,
        /// The join command's `fleet-token`.
        #[arg(long)]
        token: String,
        /// This node's name in the fleet: a label, which other nodes may share.
        #[arg(long)]
        name: String,
        /// The role the token was issued for: `primary` registers with the control-plane
        /// join command's `fleet-primary-token`, `secondary` with its `fleet-token`.
        #[arg(long, value_enum, default_value = "secondary")]
        role: RoleArg,
        /// A label, `key=value` (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Where the first node can reach this node.
        #[arg(long, default_value = "")]
        address: String,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Send this node's add-ons to the first node it registered with.
    Report {
        #[command(flatten)]
        root: RootArgs,
    },
    /// Until stopped: report this node's add-ons to the first node every interval, and in
    /// between hold a poll open with it, so rollout work starts the moment it is handed out.
    /// A failure is said and tried again at the next interval; the agent stops (exit 1) when
    /// the first node does not know this node.
    Agent {
        /// How long between reports (`30s`, `2m`; a bare number is seconds).
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = berth_formats::duration::a_second_to_a_day)]
        interval: Duration,
        #[command(flatten)]
        root: RootArgs,
    },
    /// On the first node: forget a node (gone, or to join again afresh) and its place in
    /// unfinished rollouts.
    Remove {
        /// The node's machine id (or its first characters, at least 6), or a name no other
        /// node has.
        node: String,
        #[command(flatten)]
        root: RootArgs,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum RoleArg {
    Primary,
    Secondary,
}

#[derive(clap::Args)]
pub struct NodesArgs {
    #[command(flatten)]
    output: berth_formats::output::OutputArgs,
    #[command(flatten)]
    root: RootArgs,
}

pub fn run(command: FleetCommand) -> anyhow::Result<ExitCode> {
    match command {
        FleetCommand::Serve {
            listen,
            advertise,
            token_ttl,
            name,
            root,
        } => {
            let layout = Layout::new(&root.root);
            let name = match name {
                Some(name) => name,
                None => node::host_name()?,
            };
            berth_formats::name::check_plain("node name", &name)?;
            let listener = TcpListener::bind(&listen)
                .with_context(|| format!("failed to listen on {listen}"))?;
            let bound = listener.local_addr()?.to_string();
            let fleet = paths(&layout);
            let pin = first_node::prepare(
                &fleet,
                &JoinFile::new(&layout),
                &name,
                advertise.as_deref().unwrap_or(&bound),
                token_ttl,
            )?;
            eprintln!("berth fleet: serving on {bound}, key {pin}");
            first_node::serve(
                &fleet,
                std::sync::Arc::new(JoinFile::new(&layout)),
                listener,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        FleetCommand::Register {
            first_node,
            pin,
            token,
            name,
            role,
            labels,
            address,
            root,
        } => {
            let layout = Layout::new(&root.root);
            let info = NodeInfo {
                name,
                machine_id: node::machine_id(&paths(&layout))?,
                role: match role {
                    RoleArg::Primary => Role::Primary,
                    RoleArg::Secondary => Role::Secondary,
                },
                labels: node::labels(&labels)?,
                address,
            };
            berth_formats::name::check_plain("node name", &info.name)?;
            let target = node::FirstNode {
                address: first_node,
                pin: Pin(pin),
            };
            let name = node::register(&paths(&layout), target, &token, info)?;
            show!("registered as {name}");
            Ok(ExitCode::SUCCESS)
        }
        FleetCommand::Report { root } => {
            let layout = Layout::new(&root.root);
            let count = node::report(&paths(&layout), &Node::new(&layout))?;
            show!("reported {count} add-on(s)");
            Ok(ExitCode::SUCCESS)
        }
        FleetCommand::Agent { interval, root } => {
            let layout = Layout::new(&root.root);
            let node = Node::new(&layout);
            berth_fleet::agent::run(&paths(&layout), &node, interval, |line| {
                eprintln!("berth fleet agent: {line}")
            })?;
            Ok(ExitCode::SUCCESS)
        }
        FleetCommand::Remove { node, root } => {
            let layout = Layout::new(&root.root);
            let (name, machine_id) = first_node::remove(&paths(&layout), &node)?;
            show!("removed {name} (machine {machine_id}); its join command registers it again");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Lists every node that registered with this one.
pub fn nodes(args: NodesArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.root.root);
    let fleet = paths(&layout);
    let serving = first_node::check_first_node(&fleet)?;
    let records = first_node::nodes(&fleet, &Node::new(&layout))?;
    let rollouts = berth_fleet::rollouts::Rollouts::new(&fleet).load_all()?;
    if serving == first_node::Serving::Stopped {
        eprintln!("{}", NOT_SERVING);
    }
    let format = args.output.format();
    if format.is_document() {
        let items = records
            .iter()
            .map(|record| {
                FleetNode::new(record, |addon| {
                    desired(&rollouts, record, addon).map(|(rollout, target)| AddonRollout {
                        name: rollout.rollout.metadata.name.clone(),
                        generation: rollout.generation,
                        desired_version: target.version.clone(),
                        desired_config_hash: target.config_hash.clone(),
                        state: target.state,
                    })
                })
            })
            .collect();
        let list = NodeList {
            api_version: ApiVersion::V1,
            kind: NodeListKind::NodeList,
            items,
        };
        let _ = berth_formats::output::write_document(format, &list, &mut std::io::stdout());
        return Ok(ExitCode::SUCCESS);
    }
    show!("{}", nodes_table(&records, &rollouts));
    Ok(ExitCode::SUCCESS)
}

/// What the newest rollout of `addon` wants of `node`: OCM's desired version and config hash,
/// beside the node's own current version and last-applied hash. Nodes are told apart by
/// machine id: two may share a name.
fn desired<'a>(
    rollouts: &'a [RolloutRecord],
    node: &NodeRecord,
    addon: &str,
) -> Option<(&'a RolloutRecord, &'a TargetRecord)> {
    rollouts
        .iter()
        .filter(|record| record.rollout.spec.addon == addon)
        .max_by(|left, right| left.applied_at.cmp(&right.applied_at))
        .and_then(|record| {
            let target = record
                .targets
                .iter()
                .find(|target| berth_fleet::rollouts::is_node(target, &node.info.machine_id))?;
            Some((record, target))
        })
}

/// The nodes as a table, one row each. What nodes sent is shown escaped: no terminal escape
/// of theirs reaches the screen.
fn nodes_table(records: &[NodeRecord], rollouts: &[RolloutRecord]) -> String {
    let rows: Vec<[String; 7]> = records
        .iter()
        .map(|record| {
            let labels: Vec<String> = record
                .info
                .labels
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect();
            let addons: Vec<String> = record
                .addons
                .iter()
                .map(|addon| {
                    let health = match (addon.available, addon.degraded) {
                        (_, Some(true)) => " Degraded",
                        (Some(true), _) => " Available",
                        _ => "",
                    };
                    let wanted = desired(rollouts, record, &addon.name)
                        .filter(|(_, target)| {
                            addon.current.as_deref() != Some(target.version.as_str())
                        })
                        .map(|(_, target)| format!(" (rollout: {})", target.version))
                        .unwrap_or_default();
                    format!(
                        "{} {} {}{health}{wanted}",
                        addon.name,
                        addon.current.as_deref().unwrap_or("-"),
                        addon.progressing,
                    )
                })
                .collect();
            let seen = first_node::age(&record.last_contact).map_or_else(
                || escape(&record.last_contact),
                |age| format!("{}s ago", age.as_secs()),
            );
            [
                escape(&record.info.name),
                escape(&record.info.machine_id.chars().take(12).collect::<String>()),
                format!("{:?}", record.info.role).to_lowercase(),
                escape(&record.info.address),
                escape(&labels.join(",")),
                seen,
                escape(&addons.join("; ")),
            ]
        })
        .collect();
    table::render(
        [
            "NAME",
            "MACHINE",
            "ROLE",
            "ADDRESS",
            "LABELS",
            "LAST CONTACT",
            "ADD-ONS",
        ],
        [Align::Left; 7],
        &rows,
    )
    .trim_end_matches('\n')
    .to_string()
}

/// Said on standard error where the first node's server is stopped.
pub const NOT_SERVING: &str = "warning: `berth fleet serve` is not running on this node: no rollout moves and no node is heard until it is started again";

#[cfg(test)]
mod tests {
    use berth_formats::fleet::AddonReport;

    use super::*;

    /// A node's labels, address and add-on report reach `berth nodes` escaped: no byte of a
    /// terminal escape, a bidirectional override or a line break of its own.
    #[test]
    fn the_nodes_table_escapes_what_nodes_sent() {
        let node = NodeRecord {
            info: NodeInfo {
                name: "node-2".into(),
                machine_id: "m2\u{1b}[8m".into(),
                role: Role::Secondary,
                labels: [("zone".to_string(), "edge\u{1b}[2J".to_string())].into(),
                address: "10.0.0.2\u{1b}]0;owned\u{7}".into(),
            },
            pin: String::new(),
            seen_from: String::new(),
            registered_at: String::new(),
            last_contact: "yesterday\r".into(),
            addons: vec![AddonReport {
                name: "demo".into(),
                desired: None,
                current: Some("1.0.0\n9.9.9".into()),
                last: None,
                progressing: "Succeeded\u{9b}31m\u{202e}".into(),
                available: None,
                degraded: None,
                config_hash: None,
                node_config: Default::default(),
            }],
        };
        let table = nodes_table(&[node], &[]);
        assert!(crate::commands::terminal_safe(&table), "{table:?}");
        assert_eq!(table.lines().count(), 2, "{table}");
        assert!(table.contains("edge\\u{1b}[2J"), "{table}");
    }
}
