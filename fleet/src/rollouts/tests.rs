use std::collections::BTreeMap;
use std::time::Duration;

use berth_formats::Sha256Digest;
use berth_formats::fleet::{Action, AddonReport, NodeInfo, NodeRecord, Outcome, Role};
use berth_formats::rollout::Rollout;
use serde_json::{Map, Value};

use super::*;

fn node(name: &str, role: Role, labels: &[(&str, &str)], port: Option<u16>) -> NodeRecord {
    NodeRecord {
        info: NodeInfo {
            name: name.into(),
            machine_id: format!("id-{name}"),
            role,
            labels: labels
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
            address: String::new(),
        },
        pin: format!("sha256:{name}"),
        seen_from: String::new(),
        registered_at: String::new(),
        last_contact: "2026-01-01T00:00:00Z".into(),
        addons: vec![report("1.0.0", None, port)],
    }
}

/// demo at `version` with the configuration hash `hash`, healthy, its last run succeeded.
fn report(version: &str, hash: Option<&str>, port: Option<u16>) -> AddonReport {
    AddonReport {
        name: "demo".into(),
        desired: None,
        current: Some(version.into()),
        last: None,
        progressing: "Succeeded".into(),
        available: Some(true),
        degraded: Some(false),
        config_hash: hash.map(str::to_string),
        node_config: port
            .map(|port| Map::from_iter([("port".to_string(), Value::from(port))]))
            .unwrap_or_default(),
    }
}

/// What a node that did the work of `target` reports.
fn done(record: &RolloutRecord, machine: &str) -> Vec<AddonReport> {
    let target = record
        .targets
        .iter()
        .find(|target| target.machine_id == machine)
        .unwrap();
    let hash = (!target.config_hash.is_empty()).then_some(target.config_hash.as_str());
    vec![report(&target.version, hash, None)]
}

fn rollout(body: &str) -> Rollout {
    let text = format!(
        "apiVersion: berth/v1alpha1\nkind: Rollout\nmetadata: {{name: demo-2}}\nspec:\n  addon: demo\n  version: 2.0.0\n{body}"
    );
    Rollout::parse("rollout.yaml", &text).unwrap()
}

/// [`super::plan`], with a digest made up for each version the rollout wants.
fn plan(
    rollout: Rollout,
    records: &[RolloutRecord],
    nodes: &[NodeRecord],
    uid: String,
    now: SystemTime,
) -> anyhow::Result<RolloutRecord> {
    let packages = pins(&rollout);
    super::plan(rollout, records, nodes, uid, packages, now)
}

fn pins(rollout: &Rollout) -> BTreeMap<String, Sha256Digest> {
    wanted_versions(rollout)
        .into_iter()
        .map(|version| (version.to_string(), Sha256Digest::of(version.as_bytes())))
        .collect()
}

fn at(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
}

#[test]
fn placements_choose_nodes_and_configuration_layers_defaults_placement_node() {
    let nodes = [
        node("node-1", Role::Primary, &[], None),
        node("node-2", Role::Secondary, &[("zone", "edge")], None),
        node("node-3", Role::Secondary, &[("zone", "edge")], Some(9000)),
        node("node-4", Role::Secondary, &[("zone", "core")], None),
    ];
    let rollout = rollout(
        "  config: {port: 8080, greeting: hi}\n  placements:\n    - name: edge\n      roles: [secondary]\n      matchLabels: {zone: edge}\n      version: 2.0.1\n      config: {port: 8081}\n    - name: primaries\n      roles: [primary]\n",
    );
    let record = plan(rollout.clone(), &[], &nodes, "u1".into(), at(0)).unwrap();
    let target = |name: &str| record.targets.iter().find(|t| t.node == name);
    assert!(target("node-4").is_none(), "no placement selects node-4");
    let primary = target("node-1").unwrap();
    assert_eq!(
        (primary.version.as_str(), primary.config["port"].as_u64()),
        ("2.0.0", Some(8080))
    );
    let edge = target("node-2").unwrap();
    assert_eq!(
        (edge.version.as_str(), edge.placement.as_deref()),
        ("2.0.1", Some("edge"))
    );
    assert_eq!(edge.config["port"], 8081);
    assert_eq!(edge.config["greeting"], "hi");
    // The node's own fields win over the placement's, and change its hash.
    let own = target("node-3").unwrap();
    assert_eq!(own.config["port"], 9000);
    assert_ne!(own.config_hash, edge.config_hash);
    assert_eq!(own.config_hash, config_hash("2.0.1", &own.config));
    assert_eq!(record.work_id(), "demo-2.u1.1");
    assert_eq!(primary.machine_id, "id-node-1");

    // Another rollout of demo waits for this one.
    let mut other = rollout.clone();
    other.metadata.name = "demo-3".into();
    let error = plan(
        other,
        std::slice::from_ref(&record),
        &nodes,
        "u2".into(),
        at(1),
    )
    .unwrap_err();
    assert!(error.to_string().contains("still moving demo"), "{error}");
}

#[test]
fn deadlines_soaks_and_forged_progress() {
    let nodes = vec![
        node("node-1", Role::Secondary, &[], None),
        node("node-2", Role::Secondary, &[], None),
    ];
    let rollout = rollout(
        "  strategy:\n    type: Progressive\n    progressive:\n      maxConcurrency: 2\n      minSuccessTime: 2m\n      progressDeadline: 60s\n      maxFailures: 1\n",
    );
    let mut records = vec![plan(rollout, &[], &nodes, "u1".into(), at(0)).unwrap()];
    assert!(tick(&mut records[0], &nodes, at(0)));
    assert!(work_for(&records, "id-node-1", &[]).is_some());
    assert!(work_for(&records, "node-1", &[]).is_none(), "by machine id");
    let finished = done(&records[0], "id-node-1");
    assert_eq!(
        progress(
            &mut records,
            "id-node-1",
            "demo-2.u1.9",
            Outcome::Succeeded,
            "",
            &finished,
            at(1)
        ),
        Err("no rollout gave work demo-2.u1.9".into())
    );
    assert!(
        progress(
            &mut records,
            "id-node-9",
            "demo-2.u1.1",
            Outcome::Succeeded,
            "",
            &finished,
            at(1)
        )
        .unwrap_err()
        .contains("not this node's")
    );
    assert_eq!(
        progress(
            &mut records,
            "id-node-1",
            "demo-2.u1.1",
            Outcome::Succeeded,
            "",
            &finished,
            at(10),
        ),
        Ok("Soaking".into())
    );
    let record = &mut records[0];
    // node-2 never answers: failed at its deadline. node-1 soaks; a report from after its
    // run says Degraded: failed too.
    tick(record, &nodes, at(59));
    assert_eq!(record.targets[1].state, TargetState::Running);
    tick(record, &nodes, at(60));
    assert_eq!(record.targets[1].state, TargetState::Failed);
    assert!(record.targets[1].message.contains("progressDeadline (1m)"));
    let mut degraded = nodes.clone();
    degraded[0].addons = done(record, "id-node-1");
    degraded[0].addons[0].degraded = Some(true);
    // A report from before the run succeeded does not count.
    tick(record, &degraded, at(61));
    assert_eq!(record.targets[0].state, TargetState::Soaking);
    degraded[0].last_contact = rfc3339(at(20));
    tick(record, &degraded, at(62));
    assert_eq!(record.targets[0].state, TargetState::Failed);
    assert!(
        record.targets[0].message.contains("demo is not Available"),
        "{}",
        record.targets[0].message
    );
    assert_eq!(record.state, RolloutState::Stopped);
    assert!(
        record.reason.contains("node-1, node-2"),
        "{}",
        record.reason
    );

    // The rollback takes back the node the work reached, not the one it never reached.
    let back = rollback(record, at(70)).unwrap();
    assert_eq!(back.work_id(), "demo-2.u1.2");
    assert_eq!(back.targets.len(), 1);
    assert_eq!(
        (
            back.targets[0].node.as_str(),
            back.targets[0].version.as_str()
        ),
        ("node-1", "1.0.0")
    );
    let mut records = vec![back];
    tick(&mut records[0], &nodes, at(71));
    let work = work_for(&records, "id-node-1", &[]).unwrap();
    assert_eq!(
        work.action,
        Action::Restore {
            work: "demo-2.u1.1".into()
        }
    );
    // The rollback succeeds only once the node is back at 1.0.0 with the hash it had.
    let still = done(&records[0], "id-node-1");
    let mut wrong = still.clone();
    wrong[0].current = Some("2.0.0".into());
    let judged = progress(
        &mut records.clone(),
        "id-node-1",
        "demo-2.u1.2",
        Outcome::Succeeded,
        "",
        &wrong,
        at(72),
    )
    .unwrap();
    assert!(judged.contains("demo is at 2.0.0, not 1.0.0"), "{judged}");
    assert_eq!(
        progress(
            &mut records,
            "id-node-1",
            "demo-2.u1.2",
            Outcome::Succeeded,
            "",
            &still,
            at(72),
        ),
        Ok("Soaking".into())
    );
}

#[test]
fn paused_starts_nothing_resumed_goes_on_aborted_takes_back_unclaimed_work() {
    let nodes: Vec<NodeRecord> = (1..=3)
        .map(|number| node(&format!("node-{number}"), Role::Secondary, &[], None))
        .collect();
    let rollout =
        rollout("  strategy:\n    type: Progressive\n    progressive:\n      maxConcurrency: 1\n");
    let mut record = plan(rollout, &[], &nodes, "u1".into(), at(0)).unwrap();
    control(&mut record, Control::Paused, at(0)).unwrap();
    tick(&mut record, &nodes, at(1));
    assert_eq!(record.state, RolloutState::Paused);
    assert!(
        record
            .targets
            .iter()
            .all(|t| t.state == TargetState::ToApply)
    );
    control(&mut record, Control::Running, at(2)).unwrap();
    tick(&mut record, &nodes, at(3));
    assert_eq!(record.state, RolloutState::Progressing);
    assert_eq!(record.targets[0].state, TargetState::Running);
    let mut records = vec![record];
    let finished = done(&records[0], "id-node-1");
    progress(
        &mut records,
        "id-node-1",
        "demo-2.u1.1",
        Outcome::Succeeded,
        "",
        &finished,
        at(4),
    )
    .unwrap();
    tick(&mut records[0], &nodes, at(5));
    assert_eq!(records[0].targets[1].state, TargetState::Running);
    // node-2 never took its work: aborting takes it back; node-1's run stands.
    control(&mut records[0], Control::Aborted, at(6)).unwrap();
    tick(&mut records[0], &nodes, at(7));
    let record = &records[0];
    assert_eq!(record.state, RolloutState::Aborted);
    assert_eq!(record.targets[0].state, TargetState::Succeeded);
    assert_eq!(record.targets[1].state, TargetState::ToApply);
    assert!(!unfinished(record));
    assert!(control(&mut records[0], Control::Running, at(8)).is_err());
}

#[test]
fn a_node_that_says_it_succeeded_counts_only_when_its_report_shows_it() {
    let nodes: Vec<NodeRecord> = (1..=2)
        .map(|number| node(&format!("node-{number}"), Role::Secondary, &[], None))
        .collect();
    let mut records = vec![plan(rollout(""), &[], &nodes, "u1".into(), at(0)).unwrap()];
    tick(&mut records[0], &nodes, at(0));
    let right = done(&records[0], "id-node-1");
    type Change = fn(&mut AddonReport);
    let cases: [(&str, Change, &str); 5] = [
        (
            "old version",
            |report| report.current = Some("1.0.0".into()),
            "demo is at 1.0.0, not 2.0.0",
        ),
        (
            "old hash",
            |report| report.config_hash = None,
            "configuration hash is none, not sha256:",
        ),
        (
            "failed run",
            |report| report.progressing = "Failed".into(),
            "last run is Failed",
        ),
        (
            "degraded",
            |report| report.degraded = Some(true),
            "not Available",
        ),
        (
            "missing",
            |report| report.name = "other".into(),
            "lists no demo (wanted 2.0.0)",
        ),
    ];
    for (case, change, expected) in cases {
        let mut copy = records.clone();
        let mut reported = right.clone();
        change(&mut reported[0]);
        let judged = progress(
            &mut copy,
            "id-node-1",
            "demo-2.u1.1",
            Outcome::Succeeded,
            "",
            &reported,
            at(1),
        )
        .unwrap();
        assert!(
            judged.starts_with("Failed: the node said its run succeeded, but"),
            "{case}: {judged}"
        );
        assert!(judged.contains(expected), "{case}: {judged}");
        assert_eq!(copy[0].targets[0].state, TargetState::Failed, "{case}");
    }
}

#[test]
fn work_ids_are_never_given_twice_across_delete_and_apply() {
    let nodes = vec![node("node-1", Role::Secondary, &[], None)];
    let first = plan(rollout(""), &[], &nodes, "aaaa".into(), at(0)).unwrap();
    // Deleted, then applied again: no record left, a new uid.
    let again = plan(rollout(""), &[], &nodes, "bbbb".into(), at(1)).unwrap();
    assert_eq!(first.generation, again.generation);
    assert_ne!(first.work_id(), again.work_id());
}

#[test]
fn a_downgrade_is_refused_unless_allowed_and_the_dist_must_offer_the_version() {
    let nodes = vec![node("node-1", Role::Secondary, &[], None)];
    let older = Rollout::parse(
        "r",
        "apiVersion: berth/v1alpha1\nkind: Rollout\nmetadata: {name: back}\nspec:\n  addon: demo\n  version: 0.9.0\n",
    )
    .unwrap();
    let error = plan(older.clone(), &[], &nodes, "u".into(), at(0))
        .unwrap_err()
        .to_string();
    assert!(error.contains("node-1 (id-node-1) runs 1.0.0"), "{error}");
    assert!(error.contains("allowDowngrade: true"), "{error}");
    let mut allowed = older;
    allowed.spec.allow_downgrade = true;
    let record = plan(allowed.clone(), &[], &nodes, "u".into(), at(0)).unwrap();
    let mut records = vec![record];
    tick(&mut records[0], &nodes, at(0));
    let work = work_for(&records, "id-node-1", &[]).unwrap();
    // The work carries the package the rollout pinned for its version.
    let pinned = Sha256Digest::of(b"0.9.0");
    assert!(
        matches!(
            work.action,
            Action::Apply {
                allow_downgrade: true,
                package_sha256,
                ..
            } if package_sha256 == pinned
        ),
        "{work:?}"
    );
    // A version without a pinned package is no rollout.
    let error = super::plan(allowed, &[], &nodes, "u".into(), BTreeMap::new(), at(0))
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "rollout back: no package digest was pinned for demo 0.9.0"
    );

    let versions = berth_formats::versions::VersionsFile::parse(
        "versions.json",
        br#"{"addons": [{"name": "demo", "versions": [{"version": "2.0.0"}, {"version": "1.0.0"}]}]}"#,
    )
    .unwrap();
    check_offered(&rollout(""), &versions, "dist").unwrap();
    let misspelled = rollout("").spec.addon.replace("demo", "dmeo");
    let mut wrong = rollout("");
    wrong.spec.addon = misspelled;
    let error = check_offered(&wrong, &versions, "dist")
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "the dist dist offers no add-on dmeo; it offers: demo"
    );
    let mut missing = rollout("");
    missing.spec.version = "3.0.0".into();
    let error = check_offered(&missing, &versions, "dist")
        .unwrap_err()
        .to_string();
    assert!(
        error.ends_with("offers no version 3.0.0 of demo; it offers: 2.0.0, 1.0.0"),
        "{error}"
    );
}

#[test]
fn a_damaged_record_is_left_out_and_named_and_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let paths = crate::FleetPaths {
        dir: dir.path().to_path_buf(),
        log_dir: dir.path().to_path_buf(),
    };
    let store = Rollouts::new(&paths);
    let nodes = vec![node("node-1", Role::Secondary, &[], None)];
    store
        .update(|records| {
            records.push(plan(rollout(""), &[], &nodes, "u1".into(), at(0)).unwrap());
            Ok(())
        })
        .unwrap();
    let folder = dir.path().join("rollouts");
    // A record that reads as JSON but whose rollout does not (a crafted strategy), one of
    // generation 0, and one that is not JSON at all.
    let good = fs_err::read_to_string(folder.join("demo-2.json")).unwrap();
    let bad_strategy = good
        .replace("\"name\": \"demo-2\"", "\"name\": \"crafted\"")
        .replace(
            "\"type\": \"All\"",
            "\"type\": \"All\", \"progressive\": {}",
        );
    assert_ne!(bad_strategy, good);
    fs_err::write(folder.join("crafted.json"), bad_strategy).unwrap();
    let zero = good
        .replace("\"name\": \"demo-2\"", "\"name\": \"zero\"")
        .replace("\"generation\": 1", "\"generation\": 0");
    fs_err::write(folder.join("zero.json"), zero).unwrap();
    fs_err::write(folder.join("torn.json"), "{\"rollout\":").unwrap();
    let (records, damaged) = store.load_all_reporting().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].rollout.metadata.name, "demo-2");
    assert_eq!(damaged.len(), 3, "{damaged:#?}");
    assert!(
        damaged[0].contains("crafted.json is damaged"),
        "{damaged:#?}"
    );
    assert!(
        damaged[0].contains("`berth rollout delete crafted`"),
        "{damaged:#?}"
    );
    // Decisions go on over the records that read.
    let mut records = records;
    assert!(tick(&mut records[0], &nodes, at(1)));
}

/// A rollout's configuration may set an add-on's secret fields: its record is root's alone,
/// and a record written before with a wider mode (and its folder) gets narrowed when written.
#[test]
fn records_are_root_s_alone_and_older_ones_are_narrowed_when_written() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let paths = crate::FleetPaths {
        dir: dir.path().to_path_buf(),
        log_dir: dir.path().to_path_buf(),
    };
    let store = Rollouts::new(&paths);
    let nodes = vec![node("node-1", Role::Secondary, &[], None)];
    let secret = rollout("  config: {dbPassword: hunter2}\n");
    store
        .update(|records| {
            records.push(plan(secret, &[], &nodes, "u1".into(), at(0)).unwrap());
            Ok(())
        })
        .unwrap();
    let folder = dir.path().join("rollouts");
    let file = folder.join("demo-2.json");
    let mode =
        |path: &std::path::Path| fs_err::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&folder), 0o700);
    // As an earlier Berth left them.
    fs_err::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    fs_err::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    store
        .update(|records| control(&mut records[0], Control::Paused, at(1)))
        .unwrap();
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&folder), 0o700);
}
