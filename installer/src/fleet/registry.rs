//! The first node's registry: every node that registered, known by its key. A name belongs to
//! the key that registered it first: a registration of a taken name with another key (forged,
//! or replayed by someone who holds the join token but not the node's key) is refused, as is
//! any report from a key that never registered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use berth_formats::fleet::{AddonReport, NodeInfo, NodeRecord};

use crate::fleet::channel::Pin;

/// The registry file, one record per node name.
#[derive(Debug, Default)]
pub struct Registry {
    path: PathBuf,
    nodes: BTreeMap<String, NodeRecord>,
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
        let nodes = match fs_err::read(path) {
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
        Ok(Registry {
            path: path.to_path_buf(),
            nodes,
        })
    }

    pub fn save(&self) -> Result<(), RegistryError> {
        let file_error = |what| {
            let path = self.path.clone();
            move |source| RegistryError::File { what, path, source }
        };
        if let Some(parent) = self.path.parent() {
            fs_err::create_dir_all(parent).map_err(file_error("create the folder of"))?;
        }
        let text = serde_json::to_vec_pretty(&self.nodes).expect("records serialize");
        crate::files::write_atomically(&self.path, &text).map_err(file_error("write"))
    }

    pub fn nodes(&self) -> impl Iterator<Item = &NodeRecord> {
        self.nodes.values()
    }

    /// The node the key belongs to.
    pub fn by_pin(&self, pin: &Pin) -> Option<&NodeRecord> {
        self.nodes.values().find(|record| record.pin == pin.0)
    }

    /// Records a registration whose join token was found good; `Err` says why it is refused.
    pub fn register(
        &mut self,
        pin: &Pin,
        node: NodeInfo,
        seen_from: &str,
        now: &str,
    ) -> Result<(), String> {
        if let Some(record) = self.nodes.get(&node.name)
            && record.pin != pin.0
        {
            return Err(format!(
                "the name {} is registered with another key ({}); a node keeps the key it \
                 registered with",
                node.name, record.pin
            ));
        }
        if let Some(other) = self.by_pin(pin)
            && other.info.name != node.name
        {
            return Err(format!(
                "this key is registered as {}; a node registers under one name",
                other.info.name
            ));
        }
        let registered_at = self
            .nodes
            .get(&node.name)
            .map_or_else(|| now.to_string(), |record| record.registered_at.clone());
        let addons = self
            .nodes
            .remove(&node.name)
            .map(|record| record.addons)
            .unwrap_or_default();
        self.nodes.insert(
            node.name.clone(),
            NodeRecord {
                info: node,
                pin: pin.0.clone(),
                seen_from: seen_from.to_string(),
                registered_at,
                last_contact: now.to_string(),
                addons,
            },
        );
        Ok(())
    }

    /// Notes a registered node's contact; its name, or `Err` when the key never registered.
    pub fn touch(&mut self, pin: &Pin, seen_from: &str, now: &str) -> Result<String, String> {
        let Some(record) = self.nodes.values_mut().find(|record| record.pin == pin.0) else {
            return Err(format!(
                "the key {pin} is not registered; join the node first"
            ));
        };
        record.seen_from = seen_from.to_string();
        record.last_contact = now.to_string();
        Ok(record.info.name.clone())
    }

    /// Records a registered node's report; `Err` when the key never registered.
    pub fn report(
        &mut self,
        pin: &Pin,
        addons: Vec<AddonReport>,
        seen_from: &str,
        now: &str,
    ) -> Result<&NodeRecord, String> {
        let Some(record) = self.nodes.values_mut().find(|record| record.pin == pin.0) else {
            return Err(format!(
                "the key {pin} is not registered; join the node first"
            ));
        };
        record.addons = addons;
        record.seen_from = seen_from.to_string();
        record.last_contact = now.to_string();
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_formats::fleet::Role;

    fn info(name: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            role: Role::Secondary,
            labels: BTreeMap::new(),
            address: String::new(),
        }
    }

    #[test]
    fn a_name_stays_with_the_key_that_registered_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes.json");
        let mut registry = Registry::load(&path).unwrap();
        let (node, stranger) = (Pin("sha256:aa".into()), Pin("sha256:bb".into()));
        registry
            .register(&node, info("node-2"), "10.0.0.2:1", "t1")
            .unwrap();
        // The same node again (a re-run of its join): fine, its first registration kept.
        registry
            .register(&node, info("node-2"), "10.0.0.2:2", "t2")
            .unwrap();
        let error = registry
            .register(&stranger, info("node-2"), "10.0.0.9:1", "t3")
            .unwrap_err();
        assert!(error.contains("registered with another key"), "{error}");
        let error = registry
            .register(&node, info("node-3"), "10.0.0.2:3", "t3")
            .unwrap_err();
        assert!(error.contains("registered as node-2"), "{error}");
        let error = registry
            .report(&stranger, Vec::new(), "x", "t4")
            .unwrap_err();
        assert!(error.contains("not registered"), "{error}");
        registry
            .report(&node, Vec::new(), "10.0.0.2:4", "t5")
            .unwrap();
        registry.save().unwrap();

        let again = Registry::load(&path).unwrap();
        let record = again.by_pin(&node).unwrap();
        assert_eq!(
            (record.registered_at.as_str(), record.last_contact.as_str()),
            ("t1", "t5")
        );
        assert_eq!(again.nodes().count(), 1);
    }
}
