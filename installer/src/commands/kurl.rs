//! kURL's utility program as hooks call it (`"$BIN_KURL" netutil iface-from-ip "$PRIVATE_ADDRESS"`):
//! `$DIR/bin/kurl` is a link to `berth`, which answers to that name with these commands.

use std::net::IpAddr;
use std::process::ExitCode;

use berth::network_interfaces::{default_route_interface, interface_with_address};

#[derive(clap::Subcommand)]
pub enum KurlCommand {
    /// Networking utility commands.
    #[command(subcommand)]
    Netutil(NetutilCommand),
}

#[derive(clap::Subcommand)]
pub enum NetutilCommand {
    /// Print the name of the interface that holds IP.
    #[command(name = "iface-from-ip")]
    InterfaceFromAddress {
        /// The address to look for.
        ip: IpAddr,
    },
    /// Print the name of the interface of the default gateway.
    #[command(name = "default-gateway-iface")]
    DefaultGatewayInterface {
        /// The default IPv6 route's interface instead.
        #[arg(long)]
        ipv6: bool,
    },
}

pub fn run(command: KurlCommand) -> anyhow::Result<ExitCode> {
    let KurlCommand::Netutil(command) = command;
    let interface = match command {
        NetutilCommand::InterfaceFromAddress { ip } => interface_with_address(ip)?,
        NetutilCommand::DefaultGatewayInterface { ipv6 } => default_route_interface(ipv6)?,
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
