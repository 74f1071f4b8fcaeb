//! The checks kURL writes itself for a joining node, from the cluster's hosts it is given
//! (`primary-host=` and `secondary-host=` on the join command): the API server on every
//! primary; and, for a node joining the control plane, etcd on every primary and the
//! kubelet on every other node. Each is a `tcpConnect` that warns when it cannot connect.

use serde_json::json;

use crate::{Document, Origin, PreflightError, TemplateContext};

/// At most this many hosts of each kind are checked; a cluster has fewer nodes than this.
pub const MAX_HOSTS: usize = 256;

/// The document of remote-host checks for `context`, if its role and hosts call for any.
pub fn remote_host_checks(context: &TemplateContext) -> Result<Option<Document>, PreflightError> {
    let role = context.role;
    let primaries = hosts(&context.primary_hosts);
    let secondaries = hosts(&context.secondary_hosts);
    let mut targets = Vec::new();
    if role.join && role.primary && !role.upgrade {
        for host in primaries.iter().chain(&secondaries) {
            targets.push(("kubelet", host.clone(), 10250));
        }
        for host in &primaries {
            targets.push(("etcd peer", host.clone(), 2379));
            targets.push(("etcd peer", host.clone(), 2380));
        }
    }
    if role.join && !role.upgrade {
        for host in &primaries {
            targets.push(("api-server", host.clone(), 6443));
        }
    }
    if targets.is_empty() {
        return Ok(None);
    }
    let mut collectors = Vec::new();
    let mut analyzers = Vec::new();
    for (service, host, port) in targets {
        let name = format!("{service} {host}:{port}");
        collectors.push(json!({"tcpConnect": {
            "collectorName": name,
            "address": format!("{host}:{port}"),
            "timeout": "5s",
        }}));
        let warn =
            |when: &str, message: String| json!({"warn": {"when": when, "message": message}});
        analyzers.push(json!({"tcpConnect": {
            "checkName": format!("{name} TCP connection status"),
            "collectorName": name,
            "outcomes": [
                warn("connection-refused", format!("Connection to {name} was refused")),
                warn("connection-timeout", format!("Timed out connecting to {name}")),
                warn("error", format!("Unexpected error connecting to {name}")),
                {"pass": {"when": "connected", "message": format!("Successfully connected to {name}")}},
            ],
        }}));
    }
    let value = json!({
        "apiVersion": "troubleshoot.sh/v1beta2",
        "kind": "HostPreflight",
        "metadata": {"name": "remote-hosts"},
        "spec": {"collectors": collectors, "analyzers": analyzers},
    });
    // As text, so that each check has a line to tell it by.
    let origin = Origin::new("built-in remote hosts", None);
    let text = serde_norway::to_string(&value).map_err(|error| PreflightError::Invalid {
        at: origin.at(None),
        message: error.to_string(),
    })?;
    Document::from_value(origin, &text, value).map(Some)
}

/// The hosts as kURL formats them for an address: IPv6 in brackets; the first
/// [`MAX_HOSTS`], each once.
fn hosts(given: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    for host in given {
        let host = host.trim();
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        if !host.is_empty() && !hosts.contains(&host) && hosts.len() < MAX_HOSTS {
            hosts.push(host);
        }
    }
    hosts
}

/// Splits kURL's `primary-host` and `secondary-host` words (each repeatable, each a
/// comma-separated list, as kURL's scripts gather them) into the context's hosts.
pub fn hosts_from_params(params: &[(String, String)]) -> (Vec<String>, Vec<String>) {
    let mut primaries = Vec::new();
    let mut secondaries = Vec::new();
    for (key, value) in params {
        let list = match key.as_str() {
            "primary-host" => &mut primaries,
            "secondary-host" => &mut secondaries,
            _ => continue,
        };
        list.extend(
            value
                .split(',')
                .map(str::trim)
                .filter(|host| !host.is_empty())
                .map(String::from),
        );
    }
    (primaries, secondaries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    fn titles(context: &TemplateContext) -> Vec<String> {
        remote_host_checks(context)
            .unwrap()
            .map(|document| {
                document
                    .analyzers
                    .iter()
                    .map(|item| item.check_name().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn a_joining_node_checks_what_kurl_checks_for_its_role() {
        let params: Vec<(String, String)> = [
            ("primary-host", "10.0.0.1,fd00::1"),
            ("secondary-host", "10.0.0.2"),
            ("primary-host", "10.0.0.1"),
            ("other", "x"),
        ]
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
        let (primary_hosts, secondary_hosts) = hosts_from_params(&params);
        assert_eq!(primary_hosts, ["10.0.0.1", "fd00::1", "10.0.0.1"]);
        let mut context = TemplateContext {
            role: Role {
                primary: false,
                join: true,
                upgrade: false,
            },
            primary_hosts,
            secondary_hosts,
            ..TemplateContext::default()
        };
        assert_eq!(
            titles(&context),
            [
                "api-server 10.0.0.1:6443 TCP connection status",
                "api-server [fd00::1]:6443 TCP connection status"
            ]
        );
        context.role.primary = true;
        let control_plane = titles(&context);
        assert_eq!(control_plane.len(), 3 + 4 + 2, "{control_plane:?}");
        assert_eq!(
            control_plane[2],
            "kubelet 10.0.0.2:10250 TCP connection status"
        );
        assert!(control_plane.contains(&"etcd peer [fd00::1]:2380 TCP connection status".into()));
        context.role.upgrade = true;
        assert!(remote_host_checks(&context).unwrap().is_none());
        context.role = Role::INSTALL;
        assert!(remote_host_checks(&context).unwrap().is_none());
    }
}
