//! The kubeadm configurations Berth's Kubernetes hooks render (`berth kubeadm-config init` on
//! the first node and `join` on a joining one, from the variables of real hook sessions),
//! against those kURL's own `init` and `join` render for the same variables
//! (`scripts/kurl-kubeadm-reference.sh`, which runs kURL's install.sh `init`, or join.sh's
//! `join_prompts` and `join`, its helper library and its `kustomize/kubeadm` templates up to
//! `kubeadm init` or `join`), for every spec of kURL's test grid in the fixtures.
//!
//! kURL's renderings are kept in `tests/it/kurl_kubeadm.json` (each distinct rendering once: its
//! documents, without the `metadata` kubeadm refuses, by kind; and for each spec which its
//! init and its join gave). With `BERTH_KURL_SOURCE` naming a kURL checkout's `scripts/`
//! folder, the test runs kURL's code again and writes them anew (then `git diff` shows what
//! kURL changed); without it, it compares with those kept. They were made from kURL's commit
//! 4cb650232b452ac9bee5e82ec377fb55ece5e2d4, as root with kubectl on the PATH:
//! `BERTH_KURL_SOURCE=/path/to/kURL/scripts cargo nextest run -p berth -E 'test(/^kurl_kubeadm::/)'`.
//!
//! Compared: the documents' values, not their bytes. kURL's output is what `kubectl kustomize`
//! prints; Berth's goes through the same kustomize on a node, which orders keys as it likes.
//! The certificate key, random on both sides, is masked, and so are kubeReserved's CPU and
//! memory, shares of the machine that rendered them.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{Node, kurl_specs, succeeded};

/// A certificate key for the runs: kURL makes a random one; Berth's hook asks kubeadm.
const CERT_KEY: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn kept() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/kurl_kubeadm.json")
}

/// kURL's renderings as kept: each distinct one once, by a digest of its text, and for each
/// spec the rendering its init and its join gave.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Kept {
    renderings: BTreeMap<String, Value>,
    specs: BTreeMap<String, BTreeMap<String, String>>,
}

impl Kept {
    fn add(&mut self, spec: &str, role: &str, rendering: Value) {
        let text = serde_json::to_string(&rendering).unwrap();
        let digest = berth_formats::Sha256Digest::of(text.as_bytes()).hex()[..12].to_string();
        self.renderings.insert(digest.clone(), rendering);
        self.specs
            .entry(spec.to_string())
            .or_default()
            .insert(role.to_string(), digest);
    }

    fn get(&self, spec: &str, role: &str) -> &Value {
        let digest = self
            .specs
            .get(spec)
            .and_then(|roles| roles.get(role))
            .unwrap_or_else(|| {
                panic!("{spec}: kURL's {role} rendering is not kept; run with BERTH_KURL_SOURCE")
            });
        &self.renderings[digest]
    }
}

/// Documents by kind, without `metadata`, the certificate key masked.
fn by_kind(text: &str) -> BTreeMap<String, Value> {
    use serde::Deserialize as _;
    serde_norway::Deserializer::from_str(text)
        .map(|document| Value::deserialize(document).unwrap())
        .filter(|document| !document.is_null())
        .map(|mut document| {
            let object = document.as_object_mut().unwrap();
            object.remove("metadata");
            if object.contains_key("certificateKey") {
                object.insert("certificateKey".into(), Value::String("<masked>".into()));
            }
            // kubeReserved's CPU and memory are shares of the machine that rendered them (the
            // unit tests pin kURL's tables); its other values are compared.
            if let Some(reserved) = object
                .get_mut("kubeReserved")
                .and_then(Value::as_object_mut)
            {
                for share in ["cpu", "memory"] {
                    if reserved.contains_key(share) {
                        reserved.insert(share.into(), Value::String("<this machine's>".into()));
                    }
                }
            }
            (object["kind"].as_str().unwrap().to_string(), document)
        })
        .collect()
}

/// The join command's values for a joining node (a control-plane one when the spec is HA).
const KUBEADM_TOKEN: &str = "abcdef.0123456789abcdef";
const CA_HASH: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

#[test]
fn berths_kubeadm_configuration_is_kurls_for_every_test_grid_spec() {
    let kurl_source = std::env::var_os("BERTH_KURL_SOURCE").map(PathBuf::from);
    let kept_renderings: Kept = match &kurl_source {
        Some(_) => Kept::default(),
        None => serde_json::from_str(&fs_err::read_to_string(kept()).unwrap()).unwrap(),
    };
    let mut made = Kept::default();
    let mut compared = 0;
    for (file, text) in kurl_specs::specs() {
        let name = file.file_stem().unwrap().to_string_lossy().to_string();
        let document: Value = serde_norway::from_str(&text).unwrap();
        let spec = document["spec"].as_object().unwrap();
        let out = tempfile::tempdir().unwrap();
        // Kubernetes' hooks render as the real ones do, with the values kURL would have made
        // or discovered (its token, its certificate key, its service range) fixed here.
        let (dist, _) = kurl_specs::dist_for(spec, |addon, _| {
            if addon == "kubernetes" {
                format!(
                    "function kubernetes() {{\n    BOOTSTRAP_TOKEN=\"${{BOOTSTRAP_TOKEN:-{KUBEADM_TOKEN}}}\"\n    [ \"$HA_CLUSTER\" != 1 ] || CERT_KEY={CERT_KEY}\n    SERVICE_CIDR=\"${{SERVICE_CIDR:-10.96.0.0/22}}\"\n    export BOOTSTRAP_TOKEN CERT_KEY SERVICE_CIDR\n    \"$BERTH_BIN\" kubeadm-config init > \"$OUT/init.yaml\"\n    env -0 > \"$OUT/init.environment\"\n}}\nfunction kubernetes_join() {{\n    \"$BERTH_BIN\" kubeadm-config join > \"$OUT/join.yaml\"\n    env -0 > \"$OUT/join.environment\"\n}}\n"
                )
            } else {
                format!("function {addon}() {{ :; }}\nfunction containerd_install() {{ :; }}\n")
            }
        });
        let spec_path = dist.addons.root().join("spec.yaml");
        fs_err::write(&spec_path, &text).unwrap();
        let written_address = spec
            .get("kurl")
            .and_then(|kurl| kurl.get("privateAddress"))
            .is_some();
        // Host preflights (a disk latency probe among them) are not what this compares.
        let mut arguments = vec!["--param", "exclude-builtin-host-preflights"];
        if !written_address {
            arguments.extend(["--param", "private-address=10.0.0.4"]);
        }
        let node = Node::new().env("OUT", out.path());
        succeeded(&node.install(&spec_path, &dist.url(), &arguments));

        // A joining node with the join command the first node prints (kURL's words): every
        // other spec's joins the control plane (with the certificate key), so both of kURL's
        // join configurations are compared.
        let control_plane = compared % 2 == 1;
        let token = format!("kubeadm-token={KUBEADM_TOKEN}");
        let hash = format!("kubeadm-token-ca-hash={CA_HASH}");
        let key = format!("cert-key={CERT_KEY}");
        let mut join = vec![
            "exclude-builtin-host-preflights",
            token.as_str(),
            hash.as_str(),
            "kubernetes-master-address=10.0.0.4",
        ];
        if !written_address {
            join.push("private-address=10.0.0.5");
        }
        if control_plane {
            join.extend(["control-plane", key.as_str()]);
        }
        let joining = Node::new().env("OUT", out.path());
        succeeded(&joining.run("join", &spec_path, &dist.url(), &join));

        if let Some(source) = &kurl_source {
            for role in ["init", "join"] {
                let rendered = out.path().join(format!("kurl-{role}.yaml"));
                let output = std::process::Command::new(
                    Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("../scripts/kurl-kubeadm-reference.sh"),
                )
                .arg(source)
                .arg(out.path().join(format!("{role}.environment")))
                .arg(&rendered)
                .arg(role)
                .env("BERTH_BIN", env!("CARGO_BIN_EXE_berth"))
                .output()
                .unwrap();
                assert!(
                    output.status.success(),
                    "{name} {role}: {}",
                    support::printed(&output)
                );
                let rendering = by_kind(&fs_err::read_to_string(&rendered).unwrap());
                made.add(&name, role, serde_json::to_value(rendering).unwrap());
            }
        }
        let kurl = if kurl_source.is_some() {
            &made
        } else {
            &kept_renderings
        };
        for role in ["init", "join"] {
            let berth = serde_json::to_value(by_kind(
                &fs_err::read_to_string(out.path().join(format!("{role}.yaml"))).unwrap(),
            ))
            .unwrap();
            let mut differences = Vec::new();
            differ(role, &berth, kurl.get(&name, role), &mut differences);
            assert!(
                differences.is_empty(),
                "{name}: Berth's {role} configuration differs from kURL's:\n{}",
                differences.join("\n")
            );
        }
        compared += 1;
    }
    assert!(compared >= 60, "{compared} specs");
    if kurl_source.is_some() {
        let mut text = serde_json::to_string_pretty(&made).unwrap();
        text.push('\n');
        fs_err::write(kept(), text).unwrap();
    }
}

/// Where `berth` and `kurl` differ, by path: `ClusterConfiguration.networking.podSubnet: Berth
/// has …, kURL has …`.
fn differ(path: &str, berth: &Value, kurl: &Value, found: &mut Vec<String>) {
    match (berth, kurl) {
        (Value::Object(ours), Value::Object(theirs)) => {
            let keys: std::collections::BTreeSet<&String> =
                ours.keys().chain(theirs.keys()).collect();
            for key in keys {
                differ(
                    &format!("{path}.{key}"),
                    ours.get(key).unwrap_or(&Value::Null),
                    theirs.get(key).unwrap_or(&Value::Null),
                    found,
                );
            }
        }
        _ if berth != kurl => found.push(format!("{path}: Berth has {berth}, kURL has {kurl}")),
        _ => {}
    }
}
