//! `berth`, the node installer.
//!
//! A run: [`plan`] decides per add-on from its [`state`] record; [`engine`] fetches packages
//! from the [`dist`], checks and unpacks them ([`unpack`]), loads their [`images`], and runs
//! their bash hooks in one [`session`] with the [`helpers`] library and the variables of the
//! [`hook_environment`], recording state as it goes; `engine::reset` takes a node back to
//! before the install. [`layout`] says where everything lives; [`files`] writes them
//! atomically; [`node_lock`] lets one run at a time change the node; [`interrupt`] stops a run
//! cleanly on a signal; [`kustomization`] does the YAML edits the `insert_*` helpers ask for;
//! [`join`] keeps what a new node needs and builds its command; [`last_installer`] remembers
//! the installer the node ran last; [`network_interfaces`] answers kURL's `kurl netutil`;
//! [`health`] probes each add-on's components and sums them up as Available and Degraded;
//! [`status`] makes the node's status document from the records and a probe; [`program`]
//! runs the programs probes and kubectl calls start, bounded in time and output;
//! [`fleet`] moves an add-on across the nodes by a rollout; [`addon_resource`] publishes each
//! add-on's state in the cluster as an Addon resource.

// Errors carry the add-on, version, hook and cause by design; they are built on cold paths only.
#![allow(clippy::result_large_err)]

pub mod addon_resource;
pub mod bundle_stream;
pub mod dist;
pub mod engine;
pub use berth_formats::files;
pub mod fleet;
pub mod health;
pub mod helpers;
pub mod hook_environment;
pub mod images;
pub mod interrupt;
pub mod join;
pub mod kubeadm_config;
pub mod kubectl;
pub mod kurl_programs;
pub mod kustomization;
pub mod last_installer;
pub mod layout;
pub mod network_interfaces;
pub mod node_lock;
pub mod phase;
pub mod plan;
pub mod program;
pub mod session;
pub mod state;
pub mod status;
pub mod support_bundle;
pub mod terminal;
pub mod trust;
pub mod unpack;

/// This program's path, for the processes it starts (a fleet agent's upgrade, the hooks'
/// `$BERTH_BIN`): where it was started from, also once a newer berth has replaced that file
/// (Linux then names the running one `… (deleted)`), so a long-running agent starts the
/// berth now in place rather than failing to start a file that is gone.
pub fn own_program() -> std::io::Result<std::path::PathBuf> {
    Ok(in_place(std::env::current_exe()?))
}

fn in_place(running: std::path::PathBuf) -> std::path::PathBuf {
    running
        .to_str()
        .and_then(|text| text.strip_suffix(" (deleted)"))
        .map(std::path::PathBuf::from)
        .filter(|original| original.is_file())
        .unwrap_or(running)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_replaced_program_is_started_from_the_file_in_its_place() {
        let folder = tempfile::tempdir().unwrap();
        let program = folder.path().join("berth");
        let deleted = std::path::PathBuf::from(format!("{} (deleted)", program.display()));
        // Replaced: the new file stands where the old one was.
        fs_err::write(&program, "new").unwrap();
        assert_eq!(super::in_place(deleted.clone()), program);
        // Removed and not replaced: the name the system gave is all there is.
        fs_err::remove_file(&program).unwrap();
        assert_eq!(super::in_place(deleted.clone()), deleted);
        assert_eq!(super::in_place(program.clone()), program);
    }
}
