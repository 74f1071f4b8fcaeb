//! Image imports run ahead of the hooks. Once the host preflights pass, and when the runtime
//! already answers and no add-on of the run installs it, every applying add-on's images are
//! imported in the background, two add-ons at a time, while the hook session starts and the
//! earlier add-ons' hooks run. An add-on's main hook still waits for its own images. An
//! import that fails in the background (a hook restarted the runtime meanwhile) is done again
//! in the foreground, where its error is the run's: running ahead only ever saves time.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_formats::package_index::ImageRecord;

use crate::images::{ImageError, Runtime};

/// Imports at once: containerd unpacks layers on a core of its own per import.
const WORKERS: usize = 2;

/// One add-on's images to import.
pub(super) struct Job {
    pub member: usize,
    pub layout: PathBuf,
    pub images: Vec<ImageRecord>,
}

/// What a background import gave: the images it imported (those already present left out)
/// and how long it took; or why it failed, with the images missing before it began (what a
/// retry then brings, whatever the failed import left).
pub(super) type Imported = Result<(Vec<String>, Duration), (ImageError, Vec<String>)>;

/// The imports started ahead, by member.
#[derive(Default)]
pub(super) struct Imports {
    pending: BTreeMap<usize, Receiver<Imported>>,
}

impl Imports {
    /// Starts `jobs` in order on background workers.
    pub fn start(&mut self, runtime: &Runtime, jobs: Vec<Job>) {
        let mut queue = Vec::new();
        for job in jobs {
            let (sender, receiver) = channel();
            self.pending.insert(job.member, receiver);
            queue.push((job, sender));
        }
        queue.reverse();
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..WORKERS.min(self.pending.len()) {
            let (queue, runtime) = (Arc::clone(&queue), runtime.clone());
            std::thread::spawn(move || {
                loop {
                    let next = queue.lock().map(|mut queue| queue.pop());
                    let Ok(Some((job, sender))) = next else {
                        return;
                    };
                    let started = Instant::now();
                    let result = match runtime.missing(&job.layout, &job.images) {
                        Ok(before) => runtime
                            .load_missing(&job.layout, &job.images, before.clone())
                            .map(|imported| (imported, started.elapsed()))
                            .map_err(|error| (error, before)),
                        Err(error) => Err((error, Vec::new())),
                    };
                    // The run may have stopped waiting; what was imported is still recorded
                    // by whoever drains the rest.
                    let _ = sender.send(result);
                }
            });
        }
    }

    /// Waits for `member`'s import, if one was started ahead.
    pub fn wait(&mut self, member: usize) -> Option<Imported> {
        let receiver = self.pending.remove(&member)?;
        Some(
            receiver
                .recv()
                .unwrap_or(Err((ImageError::Lost, Vec::new()))),
        )
    }

    /// Waits for every import still running, for a run that stops: what they imported is
    /// recorded, so a reset knows it.
    pub fn drain(&mut self) -> Vec<(usize, Imported)> {
        let members: Vec<usize> = self.pending.keys().copied().collect();
        members
            .into_iter()
            .filter_map(|member| Some((member, self.wait(member)?)))
            .collect()
    }
}
