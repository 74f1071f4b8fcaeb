//! kURL's utility program as hooks call it (`"$BIN_KURL" netutil iface-from-ip "$PRIVATE_ADDRESS"`):
//! `$DIR/bin/kurl` is a link to `berth`, which answers to that name with these commands.

use std::net::IpAddr;
use std::process::ExitCode;

use std::time::Duration;

use anyhow::Context as _;
use berth::hooks::kurl_programs::{longhorn, rook};
use berth::hooks::network_interfaces::{default_route_interface, interface_with_address};

#[derive(clap::Subcommand)]
pub enum KurlCommand {
    /// Networking utility commands.
    #[command(subcommand)]
    Netutil(NetutilCommand),
    /// Rook's Ceph, as kURL's hooks ask about it.
    #[command(subcommand)]
    Rook(RookCommand),
    /// Longhorn's volumes, before a migration off it.
    #[command(subcommand)]
    Longhorn(LonghornCommand),
    /// Sets KEY of the JSON object in FILE to the string VALUE (the helper
    /// insertOrReplaceJsonParam); a missing FILE is made.
    #[command(name = "json-param", hide = true)]
    JsonParam {
        /// The JSON file (Docker's daemon.json, say).
        file: std::path::PathBuf,
        /// The top-level key.
        key: String,
        /// Its value, written as a JSON string.
        value: String,
    },
}

#[derive(clap::Subcommand)]
pub enum RookCommand {
    /// Wait for Ceph to be healthy (five readings in a row of `ceph status` in the
    /// rook-ceph-tools pod), printing what it waits for; fails after TIMEOUT seconds.
    #[command(name = "wait-for-health")]
    WaitForHealth {
        /// Seconds to wait at most (no bound when left out).
        timeout: Option<u64>,
        /// Ceph health checks to ignore (their codes, as MON_CLOCK_SKEW), comma-separated or
        /// given again.
        #[arg(long, value_delimiter = ',')]
        ignore_checks: Vec<String>,
    },
}

#[derive(clap::Subcommand)]
pub enum LonghornCommand {
    /// Check Longhorn's volumes and nodes are healthy before a migration; on a one-node
    /// cluster, first scale every volume to one replica (its count kept to roll back).
    #[command(name = "prepare-for-migration")]
    PrepareForMigration,
    /// Scale Longhorn's volumes, and the Deployments and StatefulSets scaled down for a
    /// migration, back to the replica counts they kept.
    #[command(name = "rollback-migration-replicas")]
    RollbackMigrationReplicas,
}

#[derive(clap::Subcommand)]
pub enum NetutilCommand {
    /// Print the name of the interface that holds IP.
    #[command(name = "iface-from-ip")]
    InterfaceFromAddress {
        /// The address to look for.
        ip: IpAddr,
    },
    /// Print the address with brackets around an IPv6 one (kURL's init and join use it to
    /// build host:port).
    #[command(name = "format-ip-address", alias = "format-address")]
    FormatIpAddress {
        /// The address.
        address: String,
    },
    /// Print the name of the interface of the default gateway.
    #[command(name = "default-gateway-iface")]
    DefaultGatewayInterface {
        /// The default IPv6 route's interface instead.
        #[arg(long)]
        ipv6: bool,
    },
}

/// The largest JSON file json-param rewrites.
const MAX_JSON_BYTES: u64 = 1 << 20;

pub fn run(command: KurlCommand) -> anyhow::Result<ExitCode> {
    let command = match command {
        KurlCommand::Netutil(command) => command,
        KurlCommand::Rook(RookCommand::WaitForHealth {
            timeout,
            ignore_checks,
        }) => {
            let mut say = |line: &str| show!("{line}");
            rook::wait_for_health(timeout.map(Duration::from_secs), &ignore_checks, &mut say)
                .context("failed to check rook health")?;
            show!("Rook is healthy");
            return Ok(ExitCode::SUCCESS);
        }
        KurlCommand::Longhorn(command) => {
            let mut say = |line: &str| show!("{line}");
            match command {
                LonghornCommand::PrepareForMigration => longhorn::prepare_for_migration(&mut say)?,
                LonghornCommand::RollbackMigrationReplicas => {
                    longhorn::rollback_migration_replicas(&mut say)?
                }
            }
            return Ok(ExitCode::SUCCESS);
        }
        KurlCommand::JsonParam { file, key, value } => {
            set_json_param(&file, &key, &value)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let interface = match command {
        NetutilCommand::InterfaceFromAddress { ip } => interface_with_address(ip)?,
        NetutilCommand::DefaultGatewayInterface { ipv6 } => default_route_interface(ipv6)?,
        // kURL's formatAddress: brackets around anything with a colon.
        NetutilCommand::FormatIpAddress { address } if address.contains(':') => {
            format!("[{address}]")
        }
        NetutilCommand::FormatIpAddress { address } => address,
    };
    show!("{interface}");
    Ok(ExitCode::SUCCESS)
}

/// The arguments as `berth` takes them when it was started under kURL's name (`kurl netutil
/// …` becomes `berth kurl netutil …`); others unchanged.
pub fn arguments_under_kurls_name(arguments: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let called = arguments
        .first()
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name);
    if called != Some(std::ffi::OsStr::new("kurl")) {
        return arguments;
    }
    let mut rewritten = vec!["berth".into(), "kurl".into()];
    rewritten.extend(arguments.into_iter().skip(1));
    rewritten
}

/// Sets `key` in the JSON object in `file` (made, with its folder, when missing; an empty file
/// is an empty object); anything but an object is refused and the file left as it was.
fn set_json_param(file: &std::path::Path, key: &str, value: &str) -> anyhow::Result<()> {
    let mut object = match berth::files::read_to_string_at_most(file, MAX_JSON_BYTES) {
        Ok(text) => {
            if text.trim().is_empty() {
                serde_json::Map::new()
            } else {
                match serde_json::from_str(&text)
                    .with_context(|| format!("{} is not JSON", file.display()))?
                {
                    serde_json::Value::Object(object) => object,
                    _ => anyhow::bail!("{} holds no JSON object", file.display()),
                }
            }
        }
        // Written below with its folder, as kURL makes both.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => serde_json::Map::new(),
        Err(error) => return Err(error.into()),
    };
    object.insert(
        key.to_string(),
        serde_json::Value::String(value.to_string()),
    );
    let mut text = serde_json::to_string_pretty(&object)?;
    text.push('\n');
    berth::files::write_atomically(file, text.as_bytes())
        .with_context(|| format!("failed to write {}", file.display()))?;
    Ok(())
}
