//! What the first node and the nodes say to each other, as a peer may craft it: requests and
//! their size checks, answers, and the records the first node keeps (registry, rollouts).
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    use berth_formats::fleet::{NodeRecord, Request, Response};
    if let Ok(request) = serde_json::from_slice::<Request>(bytes) {
        let _ = request.check();
        let _ = serde_json::to_vec(&request);
    }
    let _ = serde_json::from_slice::<Response>(bytes);
    let _ = serde_json::from_slice::<std::collections::BTreeMap<String, NodeRecord>>(bytes);
    if let Ok(record) = serde_json::from_slice::<berth_formats::rollout::RolloutRecord>(bytes) {
        let _ = record.work_id();
        let _ = record.rollout.strategy();
    }
});
