//! The node's network interfaces as kURL's `kurl netutil` reports them to hooks: the interface
//! holding an address, and the interface of the default route. Both read the network namespace
//! the process runs in, as the kernel shows it (`getifaddrs`, `/proc/net/route`).

use std::net::IpAddr;

#[derive(Debug, thiserror::Error)]
pub enum InterfaceError {
    #[error("no interface with given IP address found")]
    NoInterfaceWithAddress,
    #[error("unable to find default route")]
    NoDefaultRoute,
    #[error("unable to find default v6 route")]
    NoDefaultV6Route,
    #[error("reading the node's interfaces")]
    Interfaces(#[source] nix::Error),
    #[error("reading the routing table")]
    Routes(#[source] std::io::Error),
}

/// The name of the interface that holds `address` (an IPv4 address given as IPv6-mapped
/// matches too, as in kURL).
pub fn interface_with_address(address: IpAddr) -> Result<String, InterfaceError> {
    let wanted = match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(address),
        IpAddr::V4(_) => address,
    };
    for interface in nix::ifaddrs::getifaddrs().map_err(InterfaceError::Interfaces)? {
        let Some(held) = interface.address else {
            continue;
        };
        let held = if let Some(v4) = held.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = held.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        if held == wanted {
            return Ok(interface.interface_name);
        }
    }
    Err(InterfaceError::NoInterfaceWithAddress)
}

/// The node's addresses as `ip -o addr` lists them, one per line (`2: eth0    inet
/// 192.0.2.2/24`), IPv4 then IPv6, each in the kernel's order: what the helper library's
/// address discovery reads, given it without starting `ip` for it. Empty where the kernel
/// does not answer.
pub fn address_listing() -> String {
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return String::new();
    };
    let (mut inet, mut inet6) = (String::new(), String::new());
    for interface in interfaces {
        let (Some(address), Some(netmask)) = (interface.address, interface.netmask) else {
            continue;
        };
        let index = nix::net::if_::if_nametoindex(interface.interface_name.as_str()).unwrap_or(0);
        let name = &interface.interface_name;
        if let (Some(held), Some(mask)) = (address.as_sockaddr_in(), netmask.as_sockaddr_in()) {
            let prefix = u32::from(mask.ip()).count_ones();
            inet.push_str(&format!("{index}: {name}    inet {}/{prefix}\n", held.ip()));
        } else if let (Some(held), Some(mask)) =
            (address.as_sockaddr_in6(), netmask.as_sockaddr_in6())
        {
            let prefix = u128::from(mask.ip()).count_ones();
            inet6.push_str(&format!(
                "{index}: {name}    inet6 {}/{prefix}\n",
                held.ip()
            ));
        }
    }
    inet + &inet6
}

/// The name of the interface the default IPv4 (or IPv6) route leaves by.
pub fn default_route_interface(ipv6: bool) -> Result<String, InterfaceError> {
    if ipv6 {
        let table = read_routes("/proc/net/ipv6_route")?;
        default_v6_route(&table).ok_or(InterfaceError::NoDefaultV6Route)
    } else {
        let table = read_routes("/proc/net/route")?;
        default_v4_route(&table).ok_or(InterfaceError::NoDefaultRoute)
    }
}

fn read_routes(path: &str) -> Result<String, InterfaceError> {
    fs_err::read_to_string(path).map_err(InterfaceError::Routes)
}

/// `/proc/net/route`: a heading, then `Iface Destination Gateway Flags RefCnt Use Metric Mask
/// …` per route, addresses in hex; the default route has destination and mask 0.
fn default_v4_route(table: &str) -> Option<String> {
    table.lines().skip(1).find_map(|line| {
        let columns: Vec<&str> = line.split_whitespace().collect();
        let (interface, destination, mask) = (columns.first()?, columns.get(1)?, columns.get(7)?);
        (*destination == "00000000" && *mask == "00000000").then(|| interface.to_string())
    })
}

/// `/proc/net/ipv6_route`: `destination prefix source prefix next-hop metric refcount use
/// flags interface` per route; the default route is `::/0`. The kernel lists its
/// unreachable `::/0` on `lo`, which is no gateway.
fn default_v6_route(table: &str) -> Option<String> {
    const RTF_REJECT: u32 = 0x0200;
    table.lines().find_map(|line| {
        let columns: Vec<&str> = line.split_whitespace().collect();
        let (destination, prefix) = (columns.first()?, columns.get(1)?);
        let flags = u32::from_str_radix(columns.get(8)?, 16).ok()?;
        let interface = columns.get(9)?;
        let default = destination.bytes().all(|byte| byte == b'0') && *prefix == "00";
        (default && flags & RTF_REJECT == 0).then(|| interface.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_v4_route_is_the_one_with_destination_and_mask_zero() {
        let table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
            eth1\t0064A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
            eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n";
        assert_eq!(default_v4_route(table).as_deref(), Some("eth0"));
        let without = "Iface\tDestination\tGateway\n\
            eth1\t0064A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(default_v4_route(without), None);
    }

    #[test]
    fn the_kernels_unreachable_v6_default_on_lo_is_no_gateway() {
        let zero = "00000000000000000000000000000000";
        let table = format!(
            "{zero} 00 {zero} 00 {zero} ffffffff 00000001 00000000 00200200       lo\n\
             {zero} 00 {zero} 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003     eth0\n"
        );
        assert_eq!(default_v6_route(&table).as_deref(), Some("eth0"));
        let only_lo =
            format!("{zero} 00 {zero} 00 {zero} ffffffff 00000001 00000000 00200200       lo\n");
        assert_eq!(default_v6_route(&only_lo), None);
    }

    #[test]
    fn the_listing_holds_what_ip_lists() {
        let listing = address_listing();
        assert!(listing.contains(": lo    inet 127.0.0.1/8\n"), "{listing}");
        let Ok(output) = std::process::Command::new("ip")
            .args(["-o", "addr"])
            .output()
        else {
            panic!("ip (iproute2) is needed to compare the listing with");
        };
        let text = String::from_utf8_lossy(&output.stdout);
        let first_words = |line: &str| {
            line.split_whitespace()
                .take(4)
                .collect::<Vec<_>>()
                .join(" ")
        };
        let ours: Vec<String> = listing.lines().map(first_words).collect();
        let theirs: Vec<String> = text
            .lines()
            .filter(|line| line.contains(" inet "))
            .chain(text.lines().filter(|line| line.contains(" inet6 ")))
            .map(first_words)
            .collect();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn loopback_holds_its_address() {
        assert_eq!(
            interface_with_address("127.0.0.1".parse().unwrap()).unwrap(),
            "lo"
        );
        assert!(matches!(
            interface_with_address("192.0.2.77".parse().unwrap()),
            Err(InterfaceError::NoInterfaceWithAddress)
        ));
    }
}
