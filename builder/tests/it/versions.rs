//! `berth-build versions`: versions.json written from, and checked against, the add-on folders.

use crate::support;

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

/// kURL's `latest`: the version listed first, which a vendor may pin below the newest. A
/// hand-ordered versions.json keeps its order (new versions after it, newest first), kURL's
/// `web/src/installers/versions.js` orders the add-ons it lists, and the dist's versions.json
/// and a node's plan take the same `latest`.
#[test]
fn latest_is_the_version_a_vendor_lists_first() {
    let addons = AddonRepository::new();
    for version in ["1.9.0", "1.10.0", "1.11.0"] {
        addons.addon("zeta", version, "");
    }
    for version in ["0.1.0", "0.2.0"] {
        addons.addon("alpha", version, "");
    }
    for version in ["2.0.0", "2.1.0"] {
        addons.addon("beta", version, "");
    }
    // zeta pinned at 1.9.0 by hand; alpha as the builder wrote it, newest first.
    addons.write(
        "versions.json",
        r#"{"addons": [
            {"name": "zeta", "versions": [{"version": "1.9.0"}, {"version": "1.10.0"}]},
            {"name": "alpha", "versions": [{"version": "0.2.0"}, {"version": "0.1.0"}]},
            {"name": "beta", "versions": [{"version": "2.1.0"}, {"version": "2.0.0"}]}
        ]}"#,
    );
    // kURL's layout pins beta.
    addons.write(
        "web/src/installers/versions.js",
        "// first version of each is \"latest\"\nmodule.exports.InstallerVersions = {\n  beta: [\n    \"2.0.0\",\n    // newer\n    \"2.1.0\",\n  ],\n};\n",
    );
    let build = BerthBuild::new();
    let root = addons.root().to_str().unwrap();
    let (ok, _, stderr) = build.run(&["versions", root]);
    assert!(ok, "{stderr}");
    for said in [
        "zeta: latest is 1.9.0 (kept as versions.json lists it)",
        "alpha: latest is 0.2.0 (newest first)",
        "beta: latest is 2.0.0 (as kURL's web/src/installers/versions.js lists it)",
    ] {
        assert!(stderr.contains(said), "{said} in:\n{stderr}");
    }
    let written: serde_json::Value =
        serde_json::from_slice(&fs_err::read(addons.root().join("versions.json")).unwrap())
            .unwrap();
    let listed = |name: &str| -> Vec<String> {
        written["addons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|addon| addon["name"] == name)
            .unwrap()["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| entry["version"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(listed("zeta"), ["1.9.0", "1.10.0", "1.11.0"]);
    assert_eq!(listed("alpha"), ["0.2.0", "0.1.0"]);
    assert_eq!(listed("beta"), ["2.0.0", "2.1.0"]);
    // Marked, so the order holds even once it happens to be newest first.
    assert_eq!(written["addons"][0]["order"], "listed");
    assert!(written["addons"][1].get("order").is_none());
    let (ok, _, stderr) = build.run(&["versions", root, "--check"]);
    assert!(ok, "{stderr}");

    // The dist's versions.json keeps the same first versions, and `latest` resolves to them.
    let dist = addons.root().join("dist");
    let (ok, _, stderr) = build.run(&["build", root, "--out", dist.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let offered = berth_formats::versions::VersionsFile::load(&dist.join("versions.json")).unwrap();
    assert_eq!(offered.resolve("zeta", "latest", None).unwrap(), "1.9.0");
    assert_eq!(offered.resolve("beta", "latest", None).unwrap(), "2.0.0");
    assert_eq!(offered.resolve("zeta", "1.11.x", None).unwrap(), "1.11.0");
}
