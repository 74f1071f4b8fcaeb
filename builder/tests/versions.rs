//! `berth-build versions`: versions.json written from, and checked against, the add-on folders.

mod support;

use support::{AddonRepository, BerthBuild};

#[test]
fn versions_json_follows_the_folders_keeping_order_and_ranges() {
    let addons = AddonRepository::new();
    addons.addon("zeta", "1.9.0", "");
    addons.addon("zeta", "1.10.0", "");
    addons.addon("alpha", "0.1.0", "");
    // zeta installs first; its 1.9.0 has a Kubernetes range to keep.
    addons.write(
        "versions.json",
        r#"{"addons": [{"name": "zeta", "versions": [{"version": "1.9.0", "kubernetesVersion": ">=1.27"}]}]}"#,
    );
    let build = BerthBuild::new();
    let root = addons.root().to_str().unwrap();
    let (ok, _, stderr) = build.run(&["versions", root, "--check"]);
    assert!(!ok);
    assert!(stderr.contains("missing: zeta 1.10.0"), "{stderr}");
    assert!(stderr.contains("missing: alpha 0.1.0"), "{stderr}");

    let (ok, _, stderr) = build.run(&["versions", root]);
    assert!(ok, "{stderr}");
    let written: serde_json::Value =
        serde_json::from_slice(&fs_err::read(addons.root().join("versions.json")).unwrap())
            .unwrap();
    assert_eq!(
        written,
        serde_json::json!({"addons": [
            {"name": "zeta", "versions": [
                {"version": "1.10.0"},
                {"version": "1.9.0", "kubernetesVersion": ">=1.27"}
            ]},
            {"name": "alpha", "versions": [{"version": "0.1.0"}]}
        ]})
    );
    let (ok, _, stderr) = build.run(&["versions", root, "--check"]);
    assert!(ok, "{stderr}");

    // A range that is not semver is refused, naming the add-on and version.
    addons.write(
        "versions.json",
        r#"{"addons": [{"name": "alpha", "versions": [{"version": "0.1.0", "kubernetesVersion": "1.27 or so"}]}]}"#,
    );
    let (ok, _, stderr) = build.run(&["versions", root]);
    assert!(!ok);
    assert!(
        stderr.contains("alpha 0.1.0: kubernetesVersion `1.27 or so` is not a semver range"),
        "{stderr}"
    );
}
