use std::cmp::Ordering;
use std::collections::BTreeSet;

use super::*;

/// A package of the test repository: `requires` and `provides` as metadata writes them.
fn package(name: &str, evr: &str, requires: &[&str], fields: &[(&str, &str)]) -> RpmPackage {
    let list = |key: &str| -> Vec<Capability> {
        fields
            .iter()
            .filter(|(field, _)| *field == key)
            .map(|(_, value)| Capability::parse(value).unwrap())
            .collect()
    };
    RpmPackage {
        name: name.into(),
        arch: fields
            .iter()
            .find(|(field, _)| *field == "arch")
            .map_or("x86_64", |(_, arch)| arch)
            .into(),
        evr: Evr::parse(evr),
        sha256: String::new(),
        size: 0,
        url: format!("Packages/{name}-{evr}.rpm"),
        provides: list("provides"),
        requires: requires
            .iter()
            .map(|text| Requirement::parse(text).unwrap())
            .collect(),
        conflicts: list("conflicts"),
        obsoletes: list("obsoletes"),
        files: fields
            .iter()
            .filter(|(field, _)| *field == "file")
            .map(|(_, path)| path.to_string())
            .collect(),
        license: String::new(),
        source_rpm: String::new(),
        xml: String::new(),
    }
}

/// Chains, alternatives (rich `or`), virtual packages, versions, a conflict, a file
/// dependency and a base every host has.
fn index() -> RpmIndex {
    let mut index = RpmIndex::default();
    index.add(
        vec![
            package(
                "glibc",
                "2.34-60.el9",
                &[],
                &[("file", "/usr/sbin/ldconfig")],
            ),
            package("bash", "5.1.8-6.el9", &["glibc"], &[("file", "/bin/sh")]),
            package(
                "app",
                "2.0-1",
                &[
                    "/bin/sh",
                    "rpmlib(CompressedFileNames) <= 3.0.4-1",
                    "lib-a >= 1.2",
                    "(mta or mail-transport-agent)",
                    "runtime >= 5",
                    "helper < 3",
                    "/usr/libexec/app-helper",
                    "(app-selinux if selinux-policy)",
                ],
                &[],
            ),
            package("lib-a", "1.1-1", &[], &[]),
            package("lib-a", "1.3-1", &["lib-b"], &[]),
            package("lib-b", "0.9-1", &[], &[("arch", "noarch")]),
            package(
                "postfix",
                "2:3.5.9-1",
                &[],
                &[("provides", "mail-transport-agent"), ("conflicts", "mta")],
            ),
            package(
                "runtime-impl",
                "5.1-2",
                &[],
                &[("provides", "runtime = 5.1-2")],
            ),
            package("helper", "3.1-1", &[], &[]),
            package("helper", "2.9-1", &[], &[]),
            package(
                "app-tools",
                "1.0-1",
                &[],
                &[("file", "/usr/libexec/app-helper")],
            ),
            package("app-selinux", "1.0-1", &[], &[]),
            package("i686-only", "1-1", &[], &[("arch", "i686")]),
        ],
        "x86_64",
    );
    index
}

fn names(packages: &[&RpmPackage]) -> Vec<String> {
    packages.iter().map(|package| package.shown()).collect()
}

#[test]
fn the_closure_follows_versions_alternatives_virtuals_files_and_conflicts() {
    let index = index();
    let base = index.base(&["bash".into()]);
    assert_eq!(base, BTreeSet::from(["bash".into(), "glibc".into()]));
    let closure = index.resolve("test", &["app".into()], &base).unwrap();
    assert_eq!(
        names(&closure),
        [
            "app 2.0-1",
            // a file dependency, met by the package that lists the file.
            "app-tools 1.0-1",
            // << 3 rules out the newer helper.
            "helper 2.9-1",
            // >= 1.2 rules out 1.1; 1.3 brings lib-b.
            "lib-a 1.3-1",
            "lib-b 0.9-1",
            // `mta` does not exist; postfix provides the second alternative.
            "postfix 2:3.5.9-1",
            // `runtime >= 5` is met by a versioned provide.
            "runtime-impl 5.1-2",
        ]
    );
}

#[test]
fn a_conflict_moves_the_choice_to_the_next_alternative() {
    let mut index = index();
    index.add(
        vec![
            package("mta", "1-1", &[], &[]),
            package("exim", "4-1", &[], &[]),
            package("wants-both", "1-1", &["postfix", "(mta or exim)"], &[]),
        ],
        "x86_64",
    );
    let closure = index
        .resolve("test", &["wants-both".into()], &BTreeSet::new())
        .unwrap();
    // postfix conflicts with mta, so the alternative exim is taken.
    assert_eq!(
        names(&closure),
        ["exim 4-1", "postfix 2:3.5.9-1", "wants-both 1-1"]
    );
}

#[test]
fn a_conditional_dependency_follows_its_condition() {
    let mut index = index();
    index.add(vec![package("selinux-policy", "38-1", &[], &[])], "x86_64");
    let base = BTreeSet::from(["selinux-policy".to_string()]);
    let closure = index.resolve("test", &["app".into()], &base).unwrap();
    assert!(
        names(&closure).contains(&"app-selinux 1.0-1".to_string()),
        "{:?}",
        names(&closure)
    );
}

#[test]
fn versions_compare_as_rpm_compares_them() {
    let order = |a: &str, b: &str| Evr::parse(a).cmp(&Evr::parse(b));
    assert_eq!(order("1.10-1", "1.9-1"), Ordering::Greater);
    assert_eq!(order("1:1.0-1", "2.0-1"), Ordering::Greater);
    assert_eq!(order("1.0~rc1-1", "1.0-1"), Ordering::Less);
    assert_eq!(order("1.0-1.el9", "1.0-1.el9_2"), Ordering::Less);
    // A wanted version without a release matches every release of that version.
    let wanted = Capability::parse("lib = 1.0").unwrap();
    assert!(Capability::meets(
        Some(&(Op::Equal, Evr::parse("1.0-7.el9"))),
        &wanted
    ));
    assert!(!Capability::meets(
        Some(&(Op::Equal, Evr::parse("1.1-1"))),
        &wanted
    ));
}

#[test]
fn rich_dependencies_parse_and_print_back() {
    for text in [
        "(a or b >= 2)",
        "(a and (b or c))",
        "(a if b else c)",
        "(a unless b)",
    ] {
        assert_eq!(Requirement::parse(text).unwrap().to_string(), text);
    }
    assert_eq!(
        Requirement::parse("(a with b)").unwrap().to_string(),
        "(a and b)"
    );
    assert!(Requirement::parse("(a or b").is_err());
    assert!(Requirement::parse("(a nor b)").is_err());
}

#[test]
fn an_unknown_package_names_the_distro_and_near_names() {
    let error = index()
        .resolve("rhel-9", &["lib-c".into()], &BTreeSet::new())
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "rhel-9 has no package `lib-c`; did you mean lib-a, lib-b, glibc?"
    );
}

#[test]
fn an_unsatisfiable_dependency_shows_its_chain() {
    let mut index = index();
    index.add(
        vec![
            package("top", "1-1", &["middle"], &[]),
            package("middle", "1-1", &["lib-b >= 2", "i686-only"], &[]),
        ],
        "x86_64",
    );
    let error = index
        .resolve("rhel-9", &["top".into()], &BTreeSet::new())
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "rhel-9: cannot satisfy top → middle → lib-b >= 2: lib-b >= 2: only 0.9-1 on offer"
    );
}
