//! Ctrl-C, `kill` and a closed terminal during a run. The hook session runs in a process group
//! of its own (so a terminal's Ctrl-C reaches Berth alone); on SIGINT, SIGTERM or SIGHUP Berth
//! ends that group (SIGTERM, then SIGKILL after a grace period), the run stops at the hook it
//! was in, every unfinished add-on is recorded as Failed with the signal named, and the node
//! lock is released as the process exits. A second signal ends Berth at once: the next run
//! continues from the records, as after `kill -9`.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The signal that interrupted the run, 0 while none has.
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// The process group of the hook session running now, 0 when none runs.
static SESSION_GROUP: AtomicI32 = AtomicI32::new(0);

/// Set while a question waits on the terminal: a signal then ends Berth at once, as the user
/// who pressed Ctrl-C at a prompt means, rather than once the question is answered.
static ASKING: AtomicBool = AtomicBool::new(false);

/// How long hooks get to end after SIGTERM before their group is killed.
const GRACE: Duration = Duration::from_secs(5);

/// Starts listening for SIGINT, SIGTERM and SIGHUP (once per process; later calls do nothing).
pub fn install() -> std::io::Result<()> {
    static INSTALLED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    if INSTALLED.get().is_some() {
        return Ok(());
    }
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ])?;
    let _ = INSTALLED.set(());
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if ASKING.load(Ordering::SeqCst) {
                end_at_the_question(signal);
            }
            if RECEIVED.swap(signal, Ordering::SeqCst) != 0 {
                // The second signal: stop now.
                end_session(Signal::SIGKILL);
                std::process::exit(128 + signal);
            }
            // The session ends: bash exits, the run records the interruption, and dropping
            // the session gives what the hooks started its grace period (see `end_group`).
            end_session(Signal::SIGTERM);
            // Collectors' programs (host preflights, support bundles) run in groups of their
            // own, which the terminal's signal does not reach.
            berth_preflight::support_bundle::command::stop_all();
        }
    });
    Ok(())
}

/// Nothing is applied while a question waits: ends the session, and Berth, as a shell reports
/// a command the signal ended.
fn end_at_the_question(signal: i32) -> ! {
    end_session(Signal::SIGKILL);
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        b"\nberth: interrupted at the question\n",
    );
    std::process::exit(128 + signal);
}

fn end_session(signal: Signal) {
    let group = SESSION_GROUP.load(Ordering::SeqCst);
    if group > 0 {
        let _ = killpg(Pid::from_raw(group), signal);
    }
}

/// Waits up to the grace period for every process of `group` (a hook session's, sent SIGTERM)
/// to end, then kills what is left: a hook's child that ignores SIGTERM does not outlive Berth.
pub(crate) fn end_group(group: Pid) {
    let deadline = std::time::Instant::now() + GRACE;
    while killpg(group, None).is_ok() {
        if std::time::Instant::now() >= deadline {
            let _ = killpg(group, Signal::SIGKILL);
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `ask` (a question on the terminal) so that a signal meanwhile ends Berth at once; one
/// that came before it does too, rather than being answered.
pub(crate) fn while_asking<T>(ask: impl FnOnce() -> T) -> T {
    ASKING.store(true, Ordering::SeqCst);
    if let Some(signal) = received() {
        end_at_the_question(signal as i32);
    }
    let answer = ask();
    ASKING.store(false, Ordering::SeqCst);
    answer
}

/// The signal that interrupted the run, if one did.
pub fn received() -> Option<Signal> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        number => Signal::try_from(number).ok(),
    }
}

/// Records the process group of the session that runs hooks now (0: none).
pub(crate) fn set_session_group(group: i32) {
    SESSION_GROUP.store(group, Ordering::SeqCst);
    // A signal that came while the session was starting still ends it.
    if group > 0 && received().is_some() {
        end_session(Signal::SIGTERM);
    }
}
