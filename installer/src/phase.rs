//! The steps a run takes with each add-on: its package fetched, its images loaded, then its
//! hooks phase by phase, in kURL's order. A state record says which step a run last began.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The hook phases after `load`, in order.
pub const HOOK_PHASES: [Phase; 5] = [
    Phase::Preflight,
    Phase::PreInit,
    Phase::Install,
    Phase::PostInit,
    Phase::Outro,
];

/// The hook phases of a joining node: as kURL's join.sh, the container runtime's install
/// hook runs before any add-on's `_join`.
pub const JOIN_PHASES: [Phase; 3] = [Phase::Preflight, Phase::Install, Phase::Join];

/// Whether add-on `name` installs the container runtime, as kURL's containerd does: its
/// install hook runs on joining nodes too, and its images load once that hook has run, since
/// they need the runtime it installs.
pub fn installs_runtime(name: &str) -> bool {
    name == "containerd"
}

/// Whether add-on `name` is Kubernetes, whose join hook (`kubeadm join`) runs after every
/// other add-on's, as kURL's join.sh joins once the add-ons' join hooks have run.
pub fn joins_last(name: &str) -> bool {
    name == "kubernetes"
}

/// A hook phase, in kURL's names (`pre_init` runs `<addon>_pre_init`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Preflight,
    PreInit,
    Install,
    Join,
    PostInit,
    Outro,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Preflight => "preflight",
            Phase::PreInit => "pre_init",
            Phase::Install => "install",
            Phase::Join => "join",
            Phase::PostInit => "post_init",
            Phase::Outro => "outro",
        }
    }
}

/// The functions that may be `name`'s hook `suffix` (`""` for the main hook, `_pre_init`,
/// `_reset`, …), in the order Berth looks for them: kURL's own name first, the add-on's name
/// as it is, dashes and all (`cert-manager`, `cert-manager_pre_init`), and `containerd_install`
/// for containerd's main hook, as kURL's `addon_install` calls it; then the name with its
/// dashes as underscores (`cert_manager`), as Berth's own add-ons have written it.
pub fn hook_functions(name: &str, suffix: &str) -> Vec<String> {
    let mut functions = Vec::new();
    if name == "containerd" && suffix.is_empty() {
        functions.push("containerd_install".to_string());
    }
    for base in [name.to_string(), name.replace('-', "_")] {
        let function = format!("{base}{suffix}");
        if !functions.contains(&function) {
            functions.push(function);
        }
    }
    functions
}

/// A step of a run for one add-on, as its record keeps it (`"fetch"`, `"load"`, `"outro"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Step {
    Fetch,
    Load,
    Hook(Phase),
    /// Waiting for the add-on's components to be healthy after its hooks.
    Health,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Fetch => "fetch",
            Step::Load => "load",
            Step::Hook(phase) => phase.name(),
            Step::Health => "health",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<Step> for String {
    fn from(step: Step) -> String {
        step.name().to_string()
    }
}

impl TryFrom<String> for Step {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        const ALL: [Step; 9] = [
            Step::Fetch,
            Step::Load,
            Step::Health,
            Step::Hook(Phase::Preflight),
            Step::Hook(Phase::PreInit),
            Step::Hook(Phase::Install),
            Step::Hook(Phase::Join),
            Step::Hook(Phase::PostInit),
            Step::Hook(Phase::Outro),
        ];
        ALL.into_iter()
            .find(|step| step.name() == text)
            .ok_or_else(|| format!("`{text}` is not a step of a run"))
    }
}
