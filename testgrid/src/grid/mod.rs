//! `berth-testgrid`: a vendor's kURL testgrid specs run on real machines, each test × OS a
//! cell of a grid, reported as JUnit XML and an HTML page.
//!
//! - `specs`: the test and OS specs, as kURL writes them;
//! - `node`: what a test does to a machine (run a script, copy a file, reboot), over SSH;
//! - `qemu`, `hosts`, `namespaces`: the providers, which give a cell its nodes: VMs booted
//!   here from cached Debian images, hosts a vendor already has, or namespaces of this host;
//! - `server`: `berth-build serve` for the run, and its client;
//! - `cell`: one test on one OS, step by step;
//! - `result`: what a cell did (`result.json`);
//! - `report`: the results, as CI and people read them.

pub mod cell;
pub mod hosts;
pub mod namespaces;
pub mod node;
pub mod qemu;
pub mod report;
pub mod result;
pub mod server;
pub mod specs;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

/// Ctrl-C and SIGTERM set a flag every wait checks, so a run unwinds through its cleanup
/// (VMs stopped, overlays removed) rather than dying with its machines left running.
pub fn watch_interrupts() -> std::io::Result<()> {
    let flag = INTERRUPTED.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, flag.clone())?;
    }
    Ok(())
}

/// Whether the run was asked to stop.
pub fn interrupted() -> bool {
    INTERRUPTED
        .get()
        .is_some_and(|flag| flag.load(Ordering::Relaxed))
}
