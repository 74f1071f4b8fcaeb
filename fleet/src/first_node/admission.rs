//! Which connections the first node takes before it knows who they come from. Anyone can
//! open a TLS connection (a self-signed key is all it takes), so connections whose key is not
//! registered are bounded apart from the nodes': at most [`MAX_UNKNOWN`] in all and
//! [`MAX_UNKNOWN_PER_ADDRESS`] from one address, their messages at most
//! [`MAX_UNREGISTERED_FRAME`] bytes. A flood of strangers fills its own budget, never the
//! registered nodes' room.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Connections from keys not (yet) registered, in all.
pub const MAX_UNKNOWN: usize = 256;
/// Connections from keys not (yet) registered, from one address.
pub const MAX_UNKNOWN_PER_ADDRESS: usize = 16;
/// The largest message a key that is not registered may send: a registration, whose labels
/// are bounded (64 of at most 1 KiB each side).
pub const MAX_UNREGISTERED_FRAME: usize = 192 * 1024;

#[derive(Default)]
pub struct Admission {
    counts: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// A connection counted as unknown until it is dropped or [`Slot::release`]d.
pub struct Slot {
    admission: Arc<Admission>,
    address: IpAddr,
    held: bool,
}

impl Admission {
    /// A slot for a new connection from `address`, or `None` when the unknown connections
    /// already fill their budget.
    pub fn admit(self: &Arc<Self>, address: IpAddr) -> Option<Slot> {
        let mut counts = self.counts();
        let from = counts.by_address.get(&address).copied().unwrap_or(0);
        if counts.total >= MAX_UNKNOWN || from >= MAX_UNKNOWN_PER_ADDRESS {
            return None;
        }
        counts.total += 1;
        *counts.by_address.entry(address).or_default() += 1;
        Some(Slot {
            admission: self.clone(),
            address,
            held: true,
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Slot {
    /// The connection turned out to come from a registered node: it no longer counts.
    pub fn release(&mut self) {
        if !self.held {
            return;
        }
        self.held = false;
        let mut counts = self.admission.counts();
        counts.total -= 1;
        if let Some(count) = counts.by_address.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                counts.by_address.remove(&self.address);
            }
        }
    }

    pub fn is_held(&self) -> bool {
        self.held
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strangers_fill_their_own_budget_per_address_and_in_all() {
        let admission = Arc::new(Admission::default());
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let mut slots: Vec<Slot> = (0..MAX_UNKNOWN_PER_ADDRESS)
            .map(|_| admission.admit(one).unwrap())
            .collect();
        assert!(
            admission.admit(one).is_none(),
            "one address's share is full"
        );
        // A registered node's connection no longer counts: room again.
        slots[0].release();
        assert!(!slots[0].is_held());
        slots.push(admission.admit(one).unwrap());
        drop(slots);
        let many: Vec<Slot> = (0..MAX_UNKNOWN)
            .map(|index| {
                let address = IpAddr::from([10, 1, (index / 256) as u8, (index % 256) as u8]);
                admission.admit(address).unwrap()
            })
            .collect();
        assert!(
            admission.admit("10.9.9.9".parse().unwrap()).is_none(),
            "all full"
        );
        drop(many);
        assert!(
            admission.admit(one).is_some(),
            "dropped slots are free again"
        );
    }
}
