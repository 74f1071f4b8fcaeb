//! Where Berth keeps things on a node. Every path hangs off one root (`/` on a real node, a
//! temporary folder in tests), so a test node is a folder and `berth reset` knows what to remove.

use std::path::{Path, PathBuf};

/// The folders Berth owns under a root.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// A layout under `root`, made absolute: hooks run in folders of their own.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        Self {
            root: std::path::absolute(&root).unwrap_or(root),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `$DIR` of the hooks: `addons/<name>/<version>/`, `kustomize/<name>/`, `scripts/common/`.
    pub fn install_dir(&self) -> PathBuf {
        self.root.join("var/lib/berth")
    }

    pub fn addon_dir(&self, name: &str, version: &str) -> PathBuf {
        self.install_dir().join("addons").join(name).join(version)
    }

    pub fn kustomize_dir(&self, name: &str) -> PathBuf {
        self.install_dir().join("kustomize").join(name)
    }

    /// `$DIR/bin/kurl`: kURL's utility program as hooks run it (`$BIN_KURL`).
    pub fn kurl_program(&self) -> PathBuf {
        self.programs_dir().join("kurl")
    }

    /// `$DIR/bin`: kURL's utility programs, links to `berth`.
    pub fn programs_dir(&self) -> PathBuf {
        self.install_dir().join("bin")
    }

    pub fn helpers_dir(&self) -> PathBuf {
        self.install_dir().join("scripts/common")
    }

    /// One JSON record per add-on.
    pub fn state_dir(&self) -> PathBuf {
        self.install_dir().join("state")
    }

    /// Verified packages, kept so a rollback or re-extract needs no network.
    pub fn package_cache(&self) -> PathBuf {
        self.install_dir().join("packages")
    }

    /// Scratch space for downloads, extraction and the hook session.
    pub fn work_dir(&self) -> PathBuf {
        self.install_dir().join("work")
    }

    /// Join parameters hooks published (0600: it holds secrets).
    pub fn join_file(&self) -> PathBuf {
        self.install_dir().join("join.json")
    }

    /// Each installer's spec and lock, as the served scripts and `berth install` keep them.
    pub fn installer_dir(&self, id: &str) -> PathBuf {
        self.install_dir().join("installers").join(id)
    }

    /// Which installer the node ran last, and from where.
    pub fn last_installer_file(&self) -> PathBuf {
        self.install_dir().join("installer.json")
    }

    pub fn lock_file(&self) -> PathBuf {
        self.install_dir().join("lock")
    }

    /// The last host preflights' results (`berth status` shows them).
    pub fn host_preflights_file(&self) -> PathBuf {
        self.install_dir().join("host-preflights/last.json")
    }

    /// What each add-on's components were found to be when last probed, one record per add-on.
    pub fn health_file(&self, name: &str) -> PathBuf {
        self.install_dir()
            .join("health")
            .join(format!("{name}.json"))
    }

    /// This node's fleet key (`fleet.key`, root's alone) and certificate; on another node,
    /// the first node it registered with (`first-node.json`).
    pub fn fleet_dir(&self) -> PathBuf {
        self.install_dir().join("fleet")
    }

    /// On the first node: every node that registered (`berth nodes`).
    pub fn fleet_registry(&self) -> PathBuf {
        self.fleet_dir().join("nodes.json")
    }

    /// The kubeconfig `kubectl` reads for Kubernetes components: kubeadm's admin.conf.
    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("etc/kubernetes/admin.conf")
    }

    pub fn log_dir(&self) -> PathBuf {
        self.root.join("var/log/berth")
    }

    /// The vendors' public keys this node trusts (`*.pub`).
    pub fn trusted_keys_dir(&self) -> PathBuf {
        self.root.join("etc/berth/trusted-keys")
    }

    /// Per-node overrides of add-on fields.
    pub fn node_config(&self) -> PathBuf {
        self.root.join("etc/berth/node.yaml")
    }
}
