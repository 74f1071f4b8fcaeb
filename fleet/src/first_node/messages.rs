//! The messages the first node answers, each from the sender it must come from: anyone
//! holding the join token (register), the first node's own command line (remove, support
//! bundle requests), or a registered key (reports, polls, progress, support bundle parts).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use berth_formats::fleet::{
    AddonReport, FLEET_PARAMS, MAX_POLL_WAIT_MS, NodeInfo, NodeRecord, Outcome,
    PRIMARY_TOKEN_PARAM, Request, Response, Role, TOKEN_PARAM,
};
use berth_formats::rollout::RolloutRecord;
use berth_formats::time::now;

use super::admin::forget;
use super::{ITSELF, MAX_HELD_POLLS, Shared};
use crate::channel::Pin;
use crate::rollouts;

impl Shared {
    /// A poll: the node's work when a rollout started it, held up to `wait` for some.
    fn poll(&self, machine: &str, primary: bool, wait: Duration) -> anyhow::Result<Response> {
        let deadline = Instant::now() + wait.min(Duration::from_millis(MAX_POLL_WAIT_MS));
        let held =
            !wait.is_zero() && self.held_polls.fetch_add(1, Ordering::SeqCst) < MAX_HELD_POLLS;
        let result = (|| {
            let mut records = self.records();
            loop {
                if let Some((id, since_seconds)) = self.bundles.for_node(machine) {
                    return Ok(Response::Bundle { id, since_seconds });
                }
                if rollouts::has_work(&records, machine) {
                    let records = records.clone();
                    return self.work_for(&records, machine, primary);
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if !held || left.is_zero() {
                    return Ok(Response::Idle);
                }
                records = self
                    .changed
                    .wait_timeout(records, left)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
        })();
        if !wait.is_zero() {
            self.held_polls.fetch_sub(1, Ordering::SeqCst);
        }
        result
    }

    /// The work a rollout gives the node now, with the join parameters a joined node's
    /// upgrade needs (the fleet's own left out: the node registered already).
    fn work_for(
        &self,
        records: &[RolloutRecord],
        machine: &str,
        primary: bool,
    ) -> anyhow::Result<Response> {
        let params: Vec<(String, String)> = self
            .join
            .for_node(primary)?
            .into_iter()
            .filter(|(key, _)| !FLEET_PARAMS.contains(&key.as_str()))
            .collect();
        Ok(rollouts::work_for(records, machine, &params)
            .map_or(Response::Idle, |work| Response::Work { work }))
    }

    /// Whether `token` is the published, unexpired join token `key`.
    fn token_is(&self, key: &str, token: &str) -> bool {
        self.join
            .current(key)
            .ok()
            .flatten()
            .is_some_and(|value| constant_time_equal(value.as_bytes(), token.as_bytes()))
    }

    /// Answers one message. Each message names the sender it must come from: anyone holding
    /// the join token, the first node itself, or a registered key. The match has no catch-all:
    /// a new message fails to compile until its sender and handler are chosen here.
    pub(super) fn answer(&self, peer: &Pin, address: &str, request: Request) -> Response {
        let address = if *peer == self.own { ITSELF } else { address };
        let sender = Sender { peer, address };
        if let Err(reason) = request.check() {
            return self.refuse(&sender, reason);
        }
        match request {
            Request::Register { token, node } => self.register(&sender, &token, node),
            Request::Remove { node } => {
                self.only_from_itself(&sender, "removes nodes", || self.remove(&sender, &node))
            }
            Request::BundleAsk {
                id,
                nodes,
                since_seconds,
                wait_ms,
            } => self.only_from_itself(&sender, "asks for support bundles", || {
                self.ask_bundles(&sender, &id, &nodes, since_seconds, wait_ms)
            }),
            Request::BundleClose { id } => {
                self.only_from_itself(&sender, "asks for support bundles", || {
                    self.bundles.close(&id);
                    Response::Accepted
                })
            }
            Request::Report { addons } => {
                self.only_from_registered(&sender, Some(addons), |_| Response::Accepted)
            }
            Request::Poll { wait_ms } => self.only_from_registered(&sender, None, |node| {
                self.poll(&node.machine, node.primary, Duration::from_millis(wait_ms))
                    .unwrap_or_else(|error| {
                        self.log.write(&format!(
                            "rollouts: {}",
                            berth_formats::report::chain(error.as_ref())
                        ));
                        Response::Idle
                    })
            }),
            Request::Progress {
                work,
                outcome,
                message,
                addons,
            } => {
                // A Running progress carries no report: the add-ons reported before stay.
                let report = (outcome != Outcome::Running).then(|| addons.clone());
                self.only_from_registered(&sender, report, |node| {
                    self.progress(&sender, &node, &work, outcome, &message, &addons)
                })
            }
            Request::BundlePart {
                id,
                offset,
                data,
                last,
                sha256,
                error,
            } => self.only_from_registered(&sender, None, |node| {
                let part = BundlePart {
                    id: &id,
                    offset,
                    data: &data,
                    last,
                    sha256: sha256.as_deref(),
                    error: error.as_deref(),
                };
                self.bundle_part(&sender, &node, part)
            }),
        }
    }

    /// A refusal, logged (throttled: a flood of crafted messages is told, not written out
    /// line by line).
    fn refuse(&self, sender: &Sender, reason: String) -> Response {
        self.log_refusal(sender, &reason);
        Response::Refused { reason }
    }

    fn log_refusal(&self, sender: &Sender, reason: &str) {
        self.log.write_throttled(&format!(
            "refused {} (key {}): {reason}",
            sender.address, sender.peer
        ));
    }

    /// `handle`'s answer when the first node itself sent the message; else a refusal.
    fn only_from_itself(
        &self,
        sender: &Sender,
        what: &str,
        handle: impl FnOnce() -> Response,
    ) -> Response {
        if *sender.peer == self.own {
            handle()
        } else {
            self.refuse(sender, format!("only the first node itself {what}"))
        }
    }

    /// `handle`'s answer for a registered key, its contact (and `report`, where the message
    /// carries one) recorded first; else "not registered".
    fn only_from_registered(
        &self,
        sender: &Sender,
        report: Option<Vec<AddonReport>>,
        handle: impl FnOnce(Registered) -> Response,
    ) -> Response {
        let now = now();
        let node = {
            let mut registry = self.registry();
            let record = match report {
                Some(addons) => registry.report(sender.peer, addons, sender.address, &now),
                None => registry.touch(sender.peer, sender.address, &now),
            };
            match record {
                Ok(record) => Registered {
                    machine: record.info.machine_id.clone(),
                    name: record.info.name.clone(),
                    primary: record.info.role == Role::Primary,
                },
                Err(reason) => {
                    self.log_refusal(sender, &reason);
                    return Response::NotRegistered { reason };
                }
            }
        };
        handle(node)
    }

    /// A node registers with the join token of its role.
    fn register(&self, sender: &Sender, token: &str, node: NodeInfo) -> Response {
        // The role is the one the token was issued for: a control-plane join command alone
        // carries the primary token.
        let key = match node.role {
            Role::Primary => PRIMARY_TOKEN_PARAM,
            Role::Secondary => TOKEN_PARAM,
        };
        if !self.token_is(key, token) {
            return self.refuse(
                sender,
                format!(
                    "the join token is wrong or has expired (a {} registers with {key}, which {} join commands carry)",
                    format!("{:?}", node.role).to_lowercase(),
                    if node.role == Role::Primary {
                        "control-plane"
                    } else {
                        "all"
                    }
                ),
            );
        }
        let name = node.name.clone();
        let registered = {
            let mut registry = self.registry();
            registry
                .register(sender.peer, node, sender.address, &now())
                .map(|replaced| (replaced, registry.changes()))
        };
        match registered {
            Ok((replaced, changes)) => {
                if let Some(old) = replaced {
                    self.log.write(&format!(
                        "{name}: registered again with the key {} in place of {old}",
                        sender.peer
                    ));
                }
                // Answered once it is on disk: a node told it is registered stays so.
                if self.wait_saved(changes) {
                    Response::Registered { name }
                } else {
                    self.refuse(
                        sender,
                        "the first node could not save its registry; see its fleet.log".into(),
                    )
                }
            }
            Err(reason) => self.refuse(sender, reason),
        }
    }

    /// Forgets a node and its place in unfinished rollouts.
    fn remove(&self, sender: &Sender, node: &str) -> Response {
        let mut registry = self.registry();
        match forget(&mut registry, &self.rollouts, node, |records| {
            self.publish(records)
        }) {
            Ok((name, machine_id)) => {
                self.log.write(&format!("{name} ({machine_id}): removed"));
                Response::Removed { name, machine_id }
            }
            Err(error) => self.refuse(sender, berth_formats::report::chain(error.as_ref())),
        }
    }

    /// Asks `nodes` for their support bundles, handed to each at its next poll.
    fn ask_bundles(
        &self,
        sender: &Sender,
        id: &str,
        nodes: &[String],
        since_seconds: Option<u64>,
        wait_ms: u64,
    ) -> Response {
        let wait = Duration::from_millis(wait_ms);
        match self.bundles.ask(id, nodes, since_seconds, wait) {
            Ok(()) => {
                self.log
                    .write(&format!("support bundle {id}: asked {} nodes", nodes.len()));
                // Held polls look again (under the lock they wait with).
                let _records = self.records();
                self.changed.notify_all();
                Response::Accepted
            }
            Err(reason) => self.refuse(sender, reason),
        }
    }

    /// A part of a node's support bundle.
    fn bundle_part(&self, sender: &Sender, node: &Registered, part: BundlePart) -> Response {
        let Registered { machine, name, .. } = node;
        let id = part.id;
        match self.bundles.part(
            machine,
            id,
            part.offset,
            part.data,
            part.last,
            part.sha256,
            part.error,
        ) {
            Ok(()) => {
                if part.last {
                    let what = part.error.map_or_else(
                        || "received".to_string(),
                        |error| format!("none collected: {error}"),
                    );
                    self.log
                        .write(&format!("{name} ({machine}): support bundle {id} {what}"));
                }
                Response::Accepted
            }
            Err(refusal) => {
                // The node is told what was wrong; where, the first node's log alone.
                if let Some(local) = &refusal.local {
                    self.log
                        .write(&format!("{name} ({machine}): support bundle {id}: {local}"));
                }
                self.refuse(sender, refusal.reason)
            }
        }
    }

    /// A node says where the work it was given stands; the rollout decides its next step at
    /// once (the next node starts now, not at the next tick).
    fn progress(
        &self,
        sender: &Sender,
        node: &Registered,
        work: &str,
        outcome: Outcome,
        message: &str,
        addons: &[AddonReport],
    ) -> Response {
        let Registered { machine, name, .. } = node;
        let nodes: Vec<NodeRecord> = self.registry().nodes().cloned().collect();
        let said = self.rollouts.update(|records| {
            let now = SystemTime::now();
            let taken = rollouts::progress(records, machine, work, outcome, message, addons, now);
            if let Some(record) = records.iter_mut().find(|record| record.work_id() == work) {
                self.decide(record, &nodes, now);
            }
            self.publish(records);
            Ok(taken)
        });
        match said {
            Ok(Ok(judged)) => {
                self.log
                    .write(&format!("{name} ({machine}): {work} {judged}"));
                Response::Accepted
            }
            Ok(Err(reason)) => self.refuse(sender, reason),
            Err(error) => self.refuse(sender, berth_formats::report::chain(error.as_ref())),
        }
    }
}

/// Compares without stopping at the first difference, so the time taken tells nothing of
/// how much of a guessed token was right.
fn constant_time_equal(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .zip(right)
            .fold(0u8, |difference, (left, right)| difference | (left ^ right))
            == 0
}

/// Who sent a message: its channel key, and the address it came from (`itself` for the first
/// node's own command line).
struct Sender<'a> {
    peer: &'a Pin,
    address: &'a str,
}

/// The registered node a message came from.
struct Registered {
    machine: String,
    name: String,
    primary: bool,
}

/// One part of a node's support bundle, as its message carries it.
struct BundlePart<'a> {
    id: &'a str,
    offset: u64,
    data: &'a str,
    last: bool,
    sha256: Option<&'a str>,
    error: Option<&'a str>,
}
