//! Ports and connections: whether this host can listen on a port and reach itself there, a
//! UDP port is free, an address answers, a load balancer comes back to this host, and an
//! HTTP endpoint's status.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{
    Collected, Compare, Kind, Limits, Matched, analyze_status, duration_field, first_match,
    text_field, words,
};
use crate::document::Item;
use crate::support_bundle::paths::ResultFile;

/// An HTTP body Berth keeps at most.
const MAX_BODY_BYTES: u64 = 1 << 20;
/// How long tcpPortStatus tries to reach its own listener, as troubleshoot does.
const PORT_STATUS_TIMEOUT: Duration = Duration::from_secs(10);

pub const TCP_PORT_STATUS: Kind = Kind {
    binds_port: true,
    ..Kind::new(
        "tcpPortStatus",
        "TCP Port Status",
        ResultFile::named("tcpPortStatus", "tcpPortStatus"),
        collect_tcp_port_status,
        analyze_status,
    )
};

pub const UDP_PORT_STATUS: Kind = Kind {
    binds_port: true,
    ..Kind::new(
        "udpPortStatus",
        "UDP Port Status",
        ResultFile::named("udpPortStatus", "udpPortStatus"),
        collect_udp_port_status,
        analyze_status,
    )
};

pub const TCP_CONNECT: Kind = Kind::new(
    "tcpConnect",
    "TCP Connection Attempt",
    ResultFile::named("connect", "connect"),
    collect_tcp_connect,
    analyze_status,
);

pub const TCP_LOAD_BALANCER: Kind = Kind {
    binds_port: true,
    ..Kind::new(
        "tcpLoadBalancer",
        "TCP Load Balancer",
        ResultFile::named("tcpLoadBalancer", "tcpLoadBalancer"),
        collect_tcp_load_balancer,
        analyze_status,
    )
};

pub const HTTP: Kind = Kind::new(
    "http",
    "HTTP Request",
    ResultFile::named("http", "result"),
    collect_http,
    analyze_http,
);

fn status(word: &str, message: impl Into<String>) -> Collected {
    Ok(json!({ "status": word, "message": message.into() }))
}

fn port(fields: &Map<String, Value>) -> Result<u16, String> {
    fields
        .get("port")
        .and_then(Value::as_u64)
        .and_then(|port| u16::try_from(port).ok())
        .filter(|port| *port > 0)
        .ok_or_else(|| "`port` is not a port number (1-65535)".to_string())
}

/// The first IPv4 address of `interface`, or of the first interface that is up and not
/// loopback: where the listener listens and where the dial goes.
fn host_address(interface: &str) -> Result<Ipv4Addr, String> {
    use nix::net::if_::InterfaceFlags;
    let addresses = nix::ifaddrs::getifaddrs().map_err(|error| format!("interfaces: {error}"))?;
    for address in addresses {
        let Some(ip) = address
            .address
            .as_ref()
            .and_then(|address| address.as_sockaddr_in())
            .map(|address| address.ip())
        else {
            continue;
        };
        if interface.is_empty() {
            if address.flags.contains(InterfaceFlags::IFF_UP)
                && !address.flags.contains(InterfaceFlags::IFF_LOOPBACK)
            {
                return Ok(ip);
            }
        } else if address.interface_name == interface {
            return Ok(ip);
        }
    }
    Err(if interface.is_empty() {
        "this host has no IPv4 address on an interface that is up, other than loopback".into()
    } else {
        format!("interface `{interface}` has no IPv4 address")
    })
}

fn bind_status(error: &std::io::Error) -> Collected {
    match error.kind() {
        std::io::ErrorKind::AddrInUse => status("address-in-use", error.to_string()),
        _ => status("error", error.to_string()),
    }
}

/// Listens on the port (all addresses, or the interface's), then dials the host's own address
/// and passes a token through, so `connected` means a connection from outside could reach a
/// process listening there.
fn collect_tcp_port_status(fields: &Map<String, Value>, _: &Limits) -> Collected {
    let port = port(fields)?;
    let interface = text_field(fields, "interface");
    let ip = host_address(interface)?;
    let listen = if interface.is_empty() {
        Ipv4Addr::UNSPECIFIED
    } else {
        ip
    };
    let listener = match TcpListener::bind((listen, port)) {
        Ok(listener) => listener,
        Err(error) => return bind_status(&error),
    };
    reach_listener(
        &listener,
        &[SocketAddr::new(IpAddr::V4(ip), port)],
        PORT_STATUS_TIMEOUT,
    )
}

fn collect_tcp_load_balancer(fields: &Map<String, Value>, limits: &Limits) -> Collected {
    let port = port(fields)?;
    let timeout = duration_field(fields, "timeout", Duration::from_secs(3600))?
        .min(limits.network_timeout_cap);
    let address = text_field(fields, "address");
    let Some(targets) = resolve(address) else {
        return status(
            "invalid-address",
            format!("`{address}` is not an address such as lb.example.com:6443"),
        );
    };
    let listener = match TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)) {
        Ok(listener) => listener,
        Err(error) => return bind_status(&error),
    };
    reach_listener(&listener, &targets, timeout)
}

/// `host:port` as addresses; None when it is not one.
fn resolve(address: &str) -> Option<Vec<SocketAddr>> {
    let (host, port) = address.rsplit_once(':')?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return None;
    }
    let addresses: Vec<SocketAddr> = address.to_socket_addrs().ok()?.collect();
    (!addresses.is_empty()).then_some(addresses)
}

/// Dials `targets` until a connection carries a token to `listener` and back, or `timeout`.
fn reach_listener(listener: &TcpListener, targets: &[SocketAddr], timeout: Duration) -> Collected {
    let deadline = Instant::now() + timeout;
    listener
        .set_nonblocking(true)
        .map_err(|error| format!("listener: {error}"))?;
    let token = format!(
        "berth-preflight-{}-{:?}",
        std::process::id(),
        Instant::now()
    );
    let mut last = String::from("no attempt finished");
    while Instant::now() < deadline {
        for target in targets {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let mut stream =
                match TcpStream::connect_timeout(target, left.min(Duration::from_secs(5))) {
                    Ok(stream) => stream,
                    Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
                        return status("connection-refused", error.to_string());
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                        last = error.to_string();
                        continue;
                    }
                    Err(error) => return status("error", error.to_string()),
                };
            let _ = stream.write_all(token.as_bytes());
            if let Some(mut accepted) = received_token(listener, &token, deadline) {
                // The dialing end closes first, so TIME_WAIT stays on its ephemeral port, not
                // on the port checked: a service that binds it next without SO_REUSEADDR
                // would fail for a minute.
                drop(stream);
                let _ = accepted.read(&mut [0u8; 1]);
                return status("connected", format!("reached this host through {target}"));
            }
            last = format!("{target} answered, but the connection did not reach this host");
        }
        // Between rounds, as troubleshoot retries every second.
        let pause = deadline
            .saturating_duration_since(Instant::now())
            .min(Duration::from_secs(1));
        std::thread::sleep(pause);
    }
    status("connection-timeout", last)
}

/// Accepts on the listener until a connection carries `token` (a connection that is not ours
/// is dropped), for at most two seconds or until `deadline`; gives that connection.
fn received_token(listener: &TcpListener, token: &str, deadline: Instant) -> Option<TcpStream> {
    let until = deadline.min(Instant::now() + Duration::from_secs(2));
    while Instant::now() < until {
        match listener.accept() {
            Ok((mut stream, _)) => {
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                let mut buffer = vec![0u8; token.len()];
                if stream.read_exact(&mut buffer).is_ok() && buffer == token.as_bytes() {
                    return Some(stream);
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return None,
        }
    }
    None
}

/// Whether the UDP port can be bound (troubleshoot sends nothing).
fn collect_udp_port_status(fields: &Map<String, Value>, _: &Limits) -> Collected {
    let port = port(fields)?;
    let interface = text_field(fields, "interface");
    let listen = if interface.is_empty() {
        Ipv4Addr::UNSPECIFIED
    } else {
        host_address(interface)?
    };
    match UdpSocket::bind((listen, port)) {
        Ok(_) => status("connected", format!("bound UDP {listen}:{port}")),
        Err(error) => bind_status(&error),
    }
}

fn collect_tcp_connect(fields: &Map<String, Value>, limits: &Limits) -> Collected {
    let timeout =
        duration_field(fields, "timeout", Duration::from_secs(10))?.min(limits.network_timeout_cap);
    let address = text_field(fields, "address");
    let Some(targets) = resolve(address) else {
        return status(
            "error",
            format!("`{address}` is not an address such as 10.0.0.1:6443"),
        );
    };
    let mut last = status("connection-timeout", "no address answered");
    for target in targets {
        match TcpStream::connect_timeout(&target, timeout) {
            Ok(_) => return status("connected", format!("connected to {target}")),
            Err(error) => {
                last = match error.kind() {
                    std::io::ErrorKind::ConnectionRefused => {
                        status("connection-refused", error.to_string())
                    }
                    std::io::ErrorKind::TimedOut => status("connection-timeout", error.to_string()),
                    _ => status("error", error.to_string()),
                }
            }
        }
    }
    last
}

/// One request, `get`, `post` or `put`; the response's status, headers and (bounded) body,
/// or the error.
fn collect_http(fields: &Map<String, Value>, limits: &Limits) -> Collected {
    let (method, request) = ["get", "post", "put"]
        .iter()
        .find_map(|method| {
            fields
                .get(*method)
                .and_then(Value::as_object)
                .map(|request| (*method, request))
        })
        .ok_or("http names none of get, post or put")?;
    let url = text_field(request, "url");
    let timeout = duration_field(request, "timeout", Duration::from_secs(60))?
        .min(limits.network_timeout_cap);
    let mut client = reqwest::blocking::Client::builder()
        .timeout(timeout)
        .danger_accept_invalid_certs(
            request
                .get("insecureSkipVerify")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        );
    if let Some(cacert) = request
        .get("tls")
        .and_then(|tls| tls.get("cacert"))
        .and_then(Value::as_str)
    {
        let certificate = reqwest::Certificate::from_pem(cacert.as_bytes())
            .map_err(|error| format!("tls.cacert: {error}"))?;
        client = client.add_root_certificate(certificate);
    }
    let client = client.build().map_err(|error| error.to_string())?;
    let mut builder = match method {
        "post" => client.post(url),
        "put" => client.put(url),
        _ => client.get(url),
    };
    for (name, value) in request
        .get("headers")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        builder = builder.header(name, value.as_str().unwrap_or_default());
    }
    if method != "get" {
        builder = builder.body(text_field(request, "body").to_string());
    }
    match builder.send() {
        Ok(response) => {
            let code = response.status().as_u16();
            let headers: Map<String, Value> = response
                .headers()
                .iter()
                .map(|(name, value)| {
                    (
                        name.to_string(),
                        String::from_utf8_lossy(value.as_bytes())
                            .into_owned()
                            .into(),
                    )
                })
                .collect();
            let mut body = Vec::new();
            let _ = response.take(MAX_BODY_BYTES).read_to_end(&mut body);
            Ok(json!({"response": {
                "status": code,
                "body": String::from_utf8_lossy(&body),
                "headers": headers,
            }}))
        }
        Err(error) => Ok(json!({"error": {"message": berth_formats::report::chain(&error)}})),
    }
}

/// `error` when the request failed; otherwise comparisons of `statusCode`, joined by `&&`
/// and `||` (troubleshoot evaluates the same with govaluate).
fn analyze_http(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let result = data;
    let failed = result.get("error").is_some();
    let code = result
        .get("response")
        .and_then(|response| response.get("status"))
        .and_then(Value::as_i64);
    first_match(item, |when| {
        if when == "error" {
            return Ok(failed);
        }
        let mut any = false;
        for alternative in when.split("||") {
            let mut all = true;
            for comparison in alternative.split("&&") {
                let words: Vec<&str> = comparison.split_whitespace().collect();
                let [name, operator, value] = words[..] else {
                    return Err(
                        "expected `error` or `statusCode == 200` (joined by && or ||)".into(),
                    );
                };
                if name != "statusCode" {
                    return Err(format!("`{name}` is not statusCode"));
                }
                let wanted: i64 = value
                    .parse()
                    .map_err(|_| format!("`{value}` is not a status code"))?;
                let operator = Compare::parse(operator)?;
                all &= code.is_some_and(|code| operator.holds(code, wanted));
            }
            any |= all;
        }
        Ok(any)
    })
}

pub const IPV4_INTERFACES: Kind = Kind::new(
    "ipv4Interfaces",
    "IPv4 Interfaces",
    ResultFile::System("ipv4Interfaces.json"),
    collect_ipv4_interfaces,
    analyze_ipv4_interfaces,
);

fn collect_ipv4_interfaces(_: &Map<String, Value>, _: &Limits) -> Collected {
    use nix::net::if_::InterfaceFlags;
    let addresses =
        nix::ifaddrs::getifaddrs().map_err(|error| format!("listing interfaces: {error}"))?;
    let mut interfaces = BTreeMap::new();
    for address in addresses {
        let up = address.flags.contains(InterfaceFlags::IFF_UP);
        let loopback = address.flags.contains(InterfaceFlags::IFF_LOOPBACK);
        let ipv4 = address
            .address
            .as_ref()
            .and_then(|address| address.as_sockaddr_in())
            .is_some();
        if up && !loopback && ipv4 {
            interfaces.insert(
                address.interface_name.clone(),
                json!({"Name": address.interface_name, "Flags": address.flags.bits()}),
            );
        }
    }
    Ok(Value::Array(interfaces.into_values().collect()))
}

fn analyze_ipv4_interfaces(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let count = data.as_array().map_or(0, Vec::len) as u64;
    first_match(item, |when| match words(when).as_slice() {
        ["count", operator, value] => {
            let wanted: u64 = value
                .parse()
                .map_err(|_| format!("`{value}` is not a whole number"))?;
            Ok(Compare::parse(operator)?.holds(count, wanted))
        }
        _ => Err("expected `count <op> <n>`, e.g. `count == 0`".into()),
    })
}
