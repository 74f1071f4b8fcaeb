//! The first node's registry: every node that registered, known by its machine id (its name
//! only a label, which nodes on one host or cloned machines may share) and its key. A
//! registration brings the join token (checked by the caller); a node that registers again
//! under its machine id with a new key (its fleet folder was lost) takes the record over, its
//! token proven. A key registered under one machine id cannot register another, and any
//! other message from a key that never registered is refused.
//!
//! The file is written compactly and not on every message: every change is counted, and the
//! first node writes the whole registry a fraction of a second later, once for all the changes
//! of that time (a registration is answered only once it is on disk).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use berth_formats::fleet::{AddonReport, NodeInfo, NodeRecord};

use crate::channel::Pin;

/// The most nodes one first node registers: a token holder cannot grow the file without end.
pub const MAX_NODES: usize = 10_000;

/// The registry file, one record per machine id.
#[derive(Debug, Default)]
pub struct Registry {
    path: PathBuf,
    nodes: BTreeMap<String, NodeRecord>,
    /// Machine id by key.
    pins: BTreeMap<String, String>,
    /// How many changes it has seen, and how many of them are saved.
    changes: u64,
    saved: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("failed to {what} {path}")]
    File {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is damaged: {message}")]
    Damaged { path: PathBuf, message: String },
}

impl Registry {
    pub fn load(path: &Path) -> Result<Self, RegistryError> {
        let nodes: BTreeMap<String, NodeRecord> = match fs_err::read(path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|error| RegistryError::Damaged {
                    path: path.to_path_buf(),
                    message: error.to_string(),
                })?
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(RegistryError::File {
                    what: "read",
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        // Records written before machine ids were known by their names.
        let nodes: BTreeMap<String, NodeRecord> = nodes
            .into_iter()
            .map(|(key, mut record)| {
                if record.info.machine_id.is_empty() {
                    record.info.machine_id = key;
                }
                (record.info.machine_id.clone(), record)
            })
            .collect();
        let pins = nodes
            .values()
            .map(|record| (record.pin.clone(), record.info.machine_id.clone()))
            .collect();
        Ok(Registry {
            path: path.to_path_buf(),
            nodes,
            pins,
            changes: 0,
            saved: 0,
        })
    }

    /// Writes the registry now.
    pub fn save(&mut self) -> Result<(), RegistryError> {
        let (changes, bytes) = self.snapshot();
        Self::write(&self.path, &bytes)?;
        self.saved = changes;
        Ok(())
    }

    /// The changes seen so far and the file's bytes as of now, to be written without the
    /// registry held ([`Registry::write`]), then marked saved ([`Registry::saved_up_to`]).
    pub fn snapshot(&self) -> (u64, Vec<u8>) {
        let bytes = serde_json::to_vec(&self.nodes).expect("records serialize");
        (self.changes, bytes)
    }

    /// Writes a snapshot's bytes to the registry file at `path`.
    pub fn write(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
        let file_error = |what| {
            let path = path.to_path_buf();
            move |source| RegistryError::File { what, path, source }
        };
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent).map_err(file_error("create the folder of"))?;
        }
        berth_formats::files::write_atomically(path, bytes).map_err(file_error("write"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Notes that the first `changes` changes are on disk.
    pub fn saved_up_to(&mut self, changes: u64) {
        self.saved = self.saved.max(changes);
    }

    /// How many changes it has seen.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Whether every change up to `changes` is on disk.
    pub fn is_saved(&self, changes: u64) -> bool {
        self.saved >= changes
    }

    pub fn nodes(&self) -> impl Iterator<Item = &NodeRecord> {
        self.nodes.values()
    }

    /// The node the key belongs to.
    pub fn by_pin(&self, pin: &Pin) -> Option<&NodeRecord> {
        self.pins.get(&pin.0).and_then(|id| self.nodes.get(id))
    }

    fn by_pin_mut(&mut self, pin: &Pin) -> Result<&mut NodeRecord, String> {
        self.pins
            .get(&pin.0)
            .and_then(|id| self.nodes.get_mut(id))
            .ok_or_else(|| format!("the key {pin} is not registered; join the node again"))
    }

    /// Records a registration whose join token was found good; `Err` says why it is refused.
    /// Returns the key the record had before, when the node came back with a new one.
    pub fn register(
        &mut self,
        pin: &Pin,
        mut node: NodeInfo,
        seen_from: &str,
        now: &str,
    ) -> Result<Option<String>, String> {
        if node.machine_id.is_empty() {
            node.machine_id = node.name.clone();
        }
        let id = node.machine_id.clone();
        if let Some(other) = self.pins.get(&pin.0)
            && *other != id
        {
            return Err(format!(
                "this key is registered as machine {other}; a node keeps one machine id"
            ));
        }
        if !self.nodes.contains_key(&id) && self.nodes.len() >= MAX_NODES {
            return Err(format!(
                "{MAX_NODES} nodes are registered already; `berth fleet remove` forgets nodes that are gone"
            ));
        }
        let old = self.nodes.remove(&id);
        let replaced = old
            .as_ref()
            .filter(|record| record.pin != pin.0)
            .map(|record| record.pin.clone());
        if let Some(old_pin) = &replaced {
            self.pins.remove(old_pin);
        }
        let (registered_at, addons) = old.map_or_else(
            || (now.to_string(), Vec::new()),
            |record| (record.registered_at, record.addons),
        );
        self.pins.insert(pin.0.clone(), id.clone());
        self.nodes.insert(
            id,
            NodeRecord {
                info: node,
                pin: pin.0.clone(),
                seen_from: seen_from.to_string(),
                registered_at,
                last_contact: now.to_string(),
                addons,
            },
        );
        self.changes += 1;
        Ok(replaced)
    }

    /// Notes a registered node's contact; the node, or `Err` when the key is not registered.
    pub fn touch(&mut self, pin: &Pin, seen_from: &str, now: &str) -> Result<&NodeRecord, String> {
        let record = self.by_pin_mut(pin)?;
        record.seen_from = seen_from.to_string();
        record.last_contact = now.to_string();
        self.changes += 1;
        Ok(self.by_pin(pin).expect("found above"))
    }

    /// Records a registered node's report; `Err` when the key is not registered.
    pub fn report(
        &mut self,
        pin: &Pin,
        addons: Vec<AddonReport>,
        seen_from: &str,
        now: &str,
    ) -> Result<&NodeRecord, String> {
        let record = self.by_pin_mut(pin)?;
        record.addons = addons;
        record.seen_from = seen_from.to_string();
        record.last_contact = now.to_string();
        self.changes += 1;
        Ok(self.by_pin(pin).expect("found above"))
    }

    /// Forgets a node, named by its machine id (or a start of it that no other id shares) or
    /// by a name no other node has.
    pub fn remove(&mut self, node: &str) -> Result<NodeRecord, String> {
        let prefixed: Vec<&String> = self
            .nodes
            .keys()
            .filter(|id| node.len() >= 6 && id.starts_with(node))
            .collect();
        let id = if self.nodes.contains_key(node) {
            node.to_string()
        } else if let [id] = prefixed.as_slice() {
            id.to_string()
        } else {
            let named: Vec<&NodeRecord> = self
                .nodes
                .values()
                .filter(|record| record.info.name == node)
                .collect();
            match named.as_slice() {
                [one] => one.info.machine_id.clone(),
                [] => {
                    return Err(format!(
                        "no node has the name or machine id {node}; `berth nodes` lists them"
                    ));
                }
                several => {
                    return Err(format!(
                        "{} nodes are named {node}; give one's machine id: {}",
                        several.len(),
                        several
                            .iter()
                            .map(|record| record.info.machine_id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        };
        let record = self.nodes.remove(&id).expect("found above");
        self.pins.remove(&record.pin);
        self.changes += 1;
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_formats::fleet::Role;

    fn info(name: &str, machine: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            machine_id: machine.into(),
            role: Role::Secondary,
            labels: BTreeMap::new(),
            address: String::new(),
        }
    }

    #[test]
    fn a_node_is_its_machine_id_and_names_may_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes.json");
        let mut registry = Registry::load(&path).unwrap();
        let (node, twin, stranger) = (
            Pin("sha256:aa".into()),
            Pin("sha256:bb".into()),
            Pin("sha256:cc".into()),
        );
        registry
            .register(&node, info("vm", "m1"), "10.0.0.2:1", "t1")
            .unwrap();
        // The same node again (a re-run of its join): fine, its first registration kept.
        assert_eq!(
            registry.register(&node, info("vm", "m1"), "10.0.0.2:2", "t2"),
            Ok(None)
        );
        // Another machine with the same host name.
        registry
            .register(&twin, info("vm", "m2"), "10.0.0.3:1", "t2")
            .unwrap();
        // A key cannot change machines.
        let error = registry
            .register(&node, info("vm", "m3"), "10.0.0.2:3", "t3")
            .unwrap_err();
        assert!(error.contains("registered as machine m1"), "{error}");
        let error = registry
            .report(&stranger, Vec::new(), "x", "t4")
            .unwrap_err();
        assert!(error.contains("not registered"), "{error}");
        registry
            .report(&node, Vec::new(), "10.0.0.2:4", "t5")
            .unwrap();
        registry.save().unwrap();

        let mut again = Registry::load(&path).unwrap();
        let record = again.by_pin(&node).unwrap();
        assert_eq!(
            (record.registered_at.as_str(), record.last_contact.as_str()),
            ("t1", "t5")
        );
        assert_eq!(again.nodes().count(), 2);
        // `vm` names two nodes: removing by name asks which.
        let error = again.remove("vm").unwrap_err();
        assert!(error.contains("2 nodes are named vm"), "{error}");
        assert!(error.contains("m1, m2"), "{error}");
        assert_eq!(again.remove("m2").unwrap().pin, "sha256:bb");
        assert!(again.by_pin(&twin).is_none());
        // m1 comes back with a new key (its fleet folder was lost): it takes its record over.
        assert_eq!(
            again.register(&stranger, info("vm", "m1"), "10.0.0.2:5", "t6"),
            Ok(Some("sha256:aa".into()))
        );
        assert!(again.by_pin(&node).is_none());
        assert_eq!(again.by_pin(&stranger).unwrap().registered_at, "t1");
        // Now `vm` is one node: removed by its name.
        assert_eq!(again.remove("vm").unwrap().info.machine_id, "m1");
        assert_eq!(again.nodes().count(), 0);
    }

    #[test]
    fn records_from_before_machine_ids_are_known_by_their_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes.json");
        fs_err::write(
            &path,
            r#"{"node-2": {"name": "node-2", "role": "secondary", "pin": "sha256:aa", "seenFrom": "", "registeredAt": "t", "lastContact": "t"}}"#,
        )
        .unwrap();
        let registry = Registry::load(&path).unwrap();
        let record = registry.by_pin(&Pin("sha256:aa".into())).unwrap();
        assert_eq!(record.info.machine_id, "node-2");
    }
}
