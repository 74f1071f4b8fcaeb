//! Every host-preflight file of kURL's add-ons and kURL's built-in set (read in place from
//! the shared fixtures) templates and runs here for every role kURL's scripts pass, with no
//! check Berth cannot run and no analyzer that cannot read its outcomes.

use std::path::PathBuf;

use berth_preflight::{Limits, Outcome, Role, TemplateContext};

fn fixtures() -> Vec<PathBuf> {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/kurl-host-preflights");
    let mut files: Vec<PathBuf> = fs_err::read_dir(&folder)
        .unwrap_or_else(|error| panic!("the kURL fixtures are missing: {error}"))
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "yaml")
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 90,
        "expected kURL's 92 files, found {}",
        files.len()
    );
    files
}

fn context(role: Role) -> TemplateContext {
    let mut context = TemplateContext {
        role,
        primary_hosts: vec!["127.0.0.1".into()],
        secondary_hosts: vec!["127.0.0.2".into()],
        ..TemplateContext::default()
    };
    for (key, fields) in [
        ("kubernetes", r#"{"version":"1.29.3"}"#),
        ("containerd", r#"{"version":"1.6.33"}"#),
        ("rook", r#"{"version":"1.12.0","minimumNodeCount":1}"#),
        ("kotsadm", r#"{"version":"1.100.0"}"#),
        ("weave", r#"{"version":"2.8.1"}"#),
    ] {
        context
            .sections
            .insert(key.into(), serde_json::from_str(fields).unwrap());
    }
    context
}

#[test]
fn every_kurl_file_templates_and_runs_for_every_role() {
    let roles = [
        Role::INSTALL,
        Role {
            primary: true,
            join: false,
            upgrade: true,
        },
        Role {
            primary: false,
            join: true,
            upgrade: false,
        },
        Role {
            primary: true,
            join: true,
            upgrade: true,
        },
    ];
    let limits = Limits {
        filesystem_performance: false,
        ..Limits::default()
    };
    for role in roles {
        let context = context(role);
        let documents: Vec<_> = fixtures()
            .iter()
            .map(|path| {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                berth_preflight::load_file(&name, path, &context)
                    .unwrap_or_else(|error| panic!("{}: {error}", role.describe()))
            })
            .collect();
        let report = berth_preflight::run(&documents, &limits).unwrap();
        assert!(!report.results.is_empty());
        for result in &report.results {
            assert!(
                !result.title.starts_with("Unknown")
                    && !result.message.starts_with("Analyzer Failed"),
                "{}: {result:?}",
                role.describe()
            );
        }
        // Nothing listens on the ports kURL's files check here: each port check that ran
        // found its port free and reachable, and took the outcome its file gives for that.
        for result in report.results.iter().filter(|r| r.kind == "tcpPortStatus") {
            assert_eq!(
                result.outcome,
                Outcome::Pass,
                "{}: {result:?}",
                role.describe()
            );
        }
    }
}
