//! `berth`, the node installer.
//!
//! The modules follow a run's data flow: [`plan`] decides per add-on from its record (the
//! [`node`]'s state); [`engine`] fetches packages from the [`dist`] (which checks and unpacks
//! them), loads their [`images`], and runs their bash hooks ([`hooks`]) in the [`phase`]
//! order, recording state as it goes; `engine::reset` takes a node back to before the
//! install. [`kubernetes`] holds what Berth does with the cluster itself (kubeadm's
//! configuration, the join command, kubectl, the Addon resources); [`health`] probes each
//! add-on's components; [`fleet`] moves an add-on across the nodes by a rollout;
//! [`support_bundle`] collects what a vendor needs to help. Under them all: [`program`] runs
//! the programs probes and kubectl calls start, bounded in time and output; [`interrupt`]
//! stops a run cleanly on a signal; [`terminal`] asks the user; [`files`] writes atomically.

// Errors carry the add-on, version, hook and cause by design; they are built on cold paths only.
#![allow(clippy::result_large_err)]

pub mod backup;
pub mod dist;
pub mod engine;
pub use berth_formats::files;
pub mod fleet;
pub mod health;
pub mod hooks;
pub mod images;
pub mod interrupt;
pub mod kubernetes;
pub mod node;
pub mod phase;
pub mod plan;
pub mod program;
pub mod support_bundle;
pub mod terminal;

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
