use std::collections::BTreeSet;

use super::*;

/// A repository with chains, alternatives, virtual packages, versions and a conflict.
const PACKAGES: &str = "\
Package: libc6
Version: 2.36-9
Architecture: amd64
Priority: required
Filename: pool/l/libc6.deb
SHA256: 00

Package: app
Version: 2.0-1
Architecture: amd64
Pre-Depends: libc6 (>= 2.34)
Depends: lib-a (>= 1.2), mta | mail-transport-agent, runtime:any, helper (<< 3)
Filename: pool/a/app_2.0.deb
SHA256: 01

Package: lib-a
Version: 1.1-1
Architecture: amd64
Filename: pool/l/lib-a_1.1.deb
SHA256: 02

Package: lib-a
Version: 1.3-1
Architecture: amd64
Depends: lib-b
Filename: pool/l/lib-a_1.3.deb
SHA256: 03

Package: lib-b
Version: 0.9
Architecture: all
Filename: pool/l/lib-b.deb
SHA256: 04

Package: postfix
Version: 3.7
Architecture: amd64
Provides: mail-transport-agent
Conflicts: mta
Filename: pool/p/postfix.deb
SHA256: 05

Package: runtime-impl
Version: 5.0
Architecture: amd64
Provides: runtime (= 5.0)
Filename: pool/r/runtime-impl.deb
SHA256: 06

Package: helper
Version: 3.1
Architecture: amd64
Filename: pool/h/helper_3.1.deb
SHA256: 07

Package: helper
Version: 2.9
Architecture: amd64
Filename: pool/h/helper_2.9.deb
SHA256: 08

Package: armonly
Version: 1
Architecture: arm64
Filename: pool/a/armonly.deb
SHA256: 09
";

fn index() -> AptIndex {
    let mut index = AptIndex::default();
    index
        .add_packages("test Packages", PACKAGES, "amd64")
        .unwrap();
    index
}

fn names(packages: &[&AptPackage]) -> Vec<String> {
    packages
        .iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect()
}

#[test]
fn the_closure_follows_versions_alternatives_virtuals_and_conflicts() {
    let index = index();
    let base = index.base(&[]);
    assert_eq!(base, BTreeSet::from(["libc6".to_string()]));
    let closure = index.resolve("test", &["app".into()], &base).unwrap();
    assert_eq!(
        names(&closure),
        [
            "app 2.0-1",
            // >= 1.2 rules out 1.1; 1.3 brings lib-b.
            "lib-a 1.3-1",
            "lib-b 0.9",
            // `mta` does not exist; postfix provides the second alternative.
            "postfix 3.7",
            // `runtime:any` is met by a versioned Provides.
            "runtime-impl 5.0",
            // << 3 rules out the newer helper.
            "helper 2.9",
        ]
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
    );
}

#[test]
fn a_conflict_moves_the_choice_to_the_next_alternative() {
    let mut index = index();
    index
        .add_packages(
            "more",
            "Package: mta\nVersion: 1\nArchitecture: amd64\nFilename: m.deb\nSHA256: 10\n\nPackage: wants-both\nVersion: 1\nArchitecture: amd64\nDepends: postfix, mta | exim\nFilename: w.deb\nSHA256: 11\n\nPackage: exim\nVersion: 4\nArchitecture: amd64\nFilename: e.deb\nSHA256: 12\n",
            "amd64",
        )
        .unwrap();
    let closure = index
        .resolve("test", &["wants-both".into()], &index.base(&[]))
        .unwrap();
    // postfix conflicts with mta, so the alternative exim is taken.
    assert_eq!(names(&closure), ["exim 4", "postfix 3.7", "wants-both 1"]);
}

#[test]
fn an_unknown_package_names_the_distro_and_near_names() {
    let error = index()
        .resolve("debian-12", &["lib-c".into()], &BTreeSet::new())
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "debian-12 has no package `lib-c`; did you mean lib-a, lib-b, libc6?"
    );
}

#[test]
fn an_unsatisfiable_dependency_shows_its_chain() {
    let mut index = index();
    index
        .add_packages(
            "more",
            "Package: top\nVersion: 1\nArchitecture: amd64\nDepends: middle\nFilename: t.deb\nSHA256: 13\n\nPackage: middle\nVersion: 1\nArchitecture: amd64\nDepends: lib-b (>= 2), armonly\nFilename: m.deb\nSHA256: 14\n",
            "amd64",
        )
        .unwrap();
    let error = index
        .resolve("debian-12", &["top".into()], &index.base(&[]))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "debian-12: cannot satisfy top → middle → lib-b (>= 2): lib-b (>= 2): only 0.9 on offer"
    );
}

#[test]
fn relations_parse_with_qualifiers_and_legacy_operators() {
    let relations = parse_relations("a (>= 1:2.0~rc1), b:any | c (< 3), d [amd64]").unwrap();
    assert_eq!(relations.len(), 3);
    assert_eq!(relations[0][0].to_string(), "a (>= 1:2.0~rc1)");
    assert_eq!(relations[1][0].name, "b");
    assert_eq!(relations[1][1].to_string(), "c (<< 3)");
    assert_eq!(relations[2][0].name, "d");
    assert!(parse_relations("a (>= 1").is_err());
}
