use super::*;
use crate::node::state::{Applied, Attempt};
use crate::phase::Phase;

fn target(version: &str) -> Target {
    Target {
        version: version.into(),
        id: "abc1234".into(),
        package_digest: berth_formats::Sha256Digest::of(b"a"),
        config_hash: "sha256:cc".into(),
        generation: 1,
    }
}

fn installed(version: &str) -> AddonState {
    let mut state = AddonState::new("demo");
    state.current = Some(Applied {
        target: target(version),
        applied_at: "2026-11-22T00:00:00Z".into(),
        config: Default::default(),
        role: None,
        hooks_ran: None,
        flag_inputs: Default::default(),
    });
    state.attempt = Some(Attempt {
        target: target(version),
        config: Default::default(),
        outcome: Outcome::Succeeded,
        phase: Step::Hook(Phase::Outro),
        run: "install-1".into(),
    });
    state
}

fn with_attempt(mut state: AddonState, version: &str, outcome: Outcome) -> AddonState {
    state.attempt = Some(Attempt {
        target: target(version),
        config: Default::default(),
        outcome,
        phase: Step::Hook(Phase::Install),
        run: "install-2".into(),
    });
    state
}

#[test]
fn every_row_of_the_decision_rule() {
    let none = Permissions::default();
    let allow = Permissions {
        allow_downgrade: true,
        ..none
    };
    let force = Permissions {
        force_reapply: true,
        ..none
    };
    let other_id = Target {
        id: "fff0000".into(),
        ..target("1.0.0")
    };
    let other_config = Target {
        config_hash: "sha256:dd".into(),
        ..target("1.0.0")
    };
    let other_package = Target {
        package_digest: berth_formats::Sha256Digest::of(b"b"),
        ..target("1.0.0")
    };
    let other_generation = Target {
        generation: 2,
        ..target("1.0.0")
    };
    let rows: Vec<(&str, AddonState, Target, Permissions, Decision)> = vec![
        (
            "no record",
            AddonState::new("demo"),
            target("1.0.0"),
            none,
            Decision::Install,
        ),
        (
            "newer version",
            installed("1.0.0"),
            target("1.10.0"),
            none,
            Decision::Upgrade {
                from: "1.0.0".into(),
            },
        ),
        (
            "older version refused",
            installed("1.10.0"),
            target("1.9.0"),
            none,
            Decision::DowngradeRefused {
                from: "1.10.0".into(),
            },
        ),
        (
            "older version allowed",
            installed("1.10.0"),
            target("1.9.0"),
            allow,
            Decision::Downgrade {
                from: "1.10.0".into(),
            },
        ),
        (
            "another id",
            installed("1.0.0"),
            other_id,
            none,
            Decision::Reapply {
                because: "installer id abc1234 → fff0000".into(),
            },
        ),
        (
            "changed config",
            installed("1.0.0"),
            other_config,
            none,
            Decision::Reapply {
                because: "its configuration changed".into(),
            },
        ),
        (
            "changed package",
            installed("1.0.0"),
            other_package,
            none,
            Decision::Reapply {
                because: "the package changed".into(),
            },
        ),
        (
            "changed engine generation",
            installed("1.0.0"),
            other_generation,
            none,
            Decision::Reapply {
                because: "the engine generation changed (1 → 2)".into(),
            },
        ),
        (
            "nothing changed",
            installed("1.0.0"),
            target("1.0.0"),
            none,
            Decision::AlreadyApplied,
        ),
        (
            "last run failed",
            with_attempt(installed("1.0.0"), "1.0.0", Outcome::Failed),
            target("1.0.0"),
            none,
            Decision::Retry {
                because: "the last run failed during install".into(),
            },
        ),
        (
            "first install failed",
            with_attempt(AddonState::new("demo"), "1.0.0", Outcome::Failed),
            target("1.0.0"),
            none,
            Decision::Retry {
                because: "the last run failed during install".into(),
            },
        ),
        (
            "last run killed",
            with_attempt(AddonState::new("demo"), "1.0.0", Outcome::Running),
            target("1.0.0"),
            none,
            Decision::Retry {
                because: "the last run was interrupted during install".into(),
            },
        ),
        (
            "a failed upgrade, asked for again",
            with_attempt(installed("1.0.0"), "2.0.0", Outcome::Failed),
            target("2.0.0"),
            none,
            Decision::Upgrade {
                from: "1.0.0".into(),
            },
        ),
        (
            "a failed upgrade, then the old version again",
            with_attempt(installed("1.0.0"), "2.0.0", Outcome::Failed),
            target("1.0.0"),
            none,
            Decision::AlreadyApplied,
        ),
        (
            "forced",
            installed("1.0.0"),
            target("1.0.0"),
            force,
            Decision::Reapply {
                because: "--force-reapply".into(),
            },
        ),
    ];
    for (row, record, target, permissions, expected) in rows {
        assert_eq!(
            decide(&record, &target, permissions),
            expected,
            "row: {row}"
        );
    }
}

#[test]
fn only_refused_and_applied_add_ons_skip_their_hooks() {
    assert!(Decision::Install.applies());
    assert!(
        Decision::Retry {
            because: String::new()
        }
        .applies()
    );
    assert!(!Decision::AlreadyApplied.applies());
    assert!(!Decision::DowngradeRefused { from: "1".into() }.applies());
}

#[test]
fn a_repackaged_version_is_an_upgrade_of_its_release() {
    let none = Permissions::default();
    for (from, to) in [
        ("2.6.5", "2.6.5-20221025"),
        ("2.6.5-20221025", "2.6.5-20230101"),
        ("3.7.0-5.5.0", "3.7.0-6.0.1"),
        ("19.03.4", "19.03.10"),
    ] {
        assert!(
            matches!(
                decide(&installed(from), &target(to), none),
                Decision::Upgrade { .. }
            ),
            "{from} → {to} is an upgrade"
        );
        assert!(
            matches!(
                decide(&installed(to), &target(from), none),
                Decision::DowngradeRefused { .. }
            ),
            "{to} → {from} is a downgrade"
        );
    }
}
