use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;

fn parse(text: &str) -> Result<Manifest, ManifestErrors> {
    Manifest::parse(Path::new("addons/demo/1.0.0/Manifest"), text)
}

/// kURL's Manifests, read in place from the fixtures beside the checkout (`../shared/`).
fn fixture_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/kurl-manifests");
    assert!(
        dir.is_dir(),
        "the kURL Manifest fixtures are missing: {} (the checkout needs shared/ beside it)",
        dir.display()
    );
    dir
}

fn count_by_kind(manifest: &Manifest) -> BTreeMap<DirectiveKind, usize> {
    let mut counts = BTreeMap::new();
    for entry in &manifest.entries {
        *counts.entry(entry.directive.kind()).or_insert(0) += 1;
    }
    counts
}

#[test]
fn every_kurl_fixture_parses_with_its_directives_counted() {
    let mut paths: Vec<_> = fs_err::read_dir(fixture_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "Manifest"))
        .collect();
    paths.sort();
    assert_eq!(paths.len(), 52);

    let mut totals: BTreeMap<DirectiveKind, usize> = BTreeMap::new();
    let mut per_file = String::new();
    for path in &paths {
        let manifest = Manifest::read(path).unwrap_or_else(|error| panic!("{error}"));
        let counts = count_by_kind(&manifest);
        let summary: Vec<_> = counts
            .iter()
            .map(|(kind, n)| format!("{kind}={n}"))
            .collect();
        per_file.push_str(&format!(
            "{}: {}\n",
            path.file_name().unwrap().to_string_lossy(),
            summary.join(" ")
        ));
        for (kind, count) in counts {
            *totals.entry(kind).or_insert(0) += count;
        }
    }
    // Totals counted independently with `awk '{print $1}' *.Manifest | sort | uniq -c`.
    let expected = BTreeMap::from([
        (DirectiveKind::Image, 202),
        (DirectiveKind::Asset, 29),
        (DirectiveKind::Apt, 14),
        (DirectiveKind::Apt24, 13),
        (DirectiveKind::Apt26, 2),
        (DirectiveKind::Yum, 41),
        (DirectiveKind::Yum8, 2),
        (DirectiveKind::Yum9, 3),
        (DirectiveKind::Yum2023, 29),
        (DirectiveKind::YumOl, 7),
        (DirectiveKind::DockerOut, 80),
    ]);
    assert_eq!(totals, expected);
    insta::assert_snapshot!(per_file);
}

#[test]
fn reports_directives_exactly_as_written() {
    let manifest = parse(
        "image bcrypt docker.io/epicsoft/bcrypt:latest no_remote_load\n\
         image pause k8s.gcr.io/pause:3.6\n\
         image local images/app.tar\n\
         asset runc https://example.com/runc.amd64 sha256:0000000000000000000000000000000000000000000000000000000000000000\n\
         asset notes docs/notes.txt\n\
         yum2023 containerd\n\
         apt24 containerd\n\
         dockerout rhel-9 addons/containerd/template/Dockerfile.rhel9 1.6.28\n",
    )
    .unwrap();
    let rendered: Vec<String> = manifest
        .entries
        .iter()
        .map(|entry| format!("{}: {:?}", entry.line, entry.directive))
        .collect();
    insta::assert_snapshot!(rendered.join("\n"));
    let Directive::Image(image) = &manifest.entries[1].directive else {
        panic!("not an image")
    };
    let ImageSource::Registry(reference) = &image.source else {
        panic!("not a registry image")
    };
    assert_eq!(reference.registry(), "k8s.gcr.io");
    assert_eq!(reference.repository(), "pause");
    assert_eq!(reference.tag(), Some("3.6"));
}

#[test]
fn whitespace_comments_and_line_endings_do_not_matter() {
    let plain = parse("image pause registry.k8s.io/pause:3.9\napt fio\n").unwrap();
    let noisy = parse(
        "\u{feff}# a comment\r\n\r\n  \timage \t pause    registry.k8s.io/pause:3.9   \r\n\
         \n   # indented comment\napt fio # trailing comment\t\r\n   \n",
    )
    .unwrap();
    let strip = |m: &Manifest| {
        m.entries
            .iter()
            .map(|e| e.directive.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&plain), strip(&noisy));
    assert_eq!(noisy.entries[0].line, 3);
    assert_eq!(noisy.entries[1].line, 6);
}

#[test]
fn every_bad_line_is_reported_with_file_line_and_hint() {
    let errors = parse(
        "imgae pause registry.k8s.io/pause:3.9\n\
         image pause\n\
         apt\n\
         apt fio extra\n\
         image pause Registry.k8s.io/PAUSE:3.9\n\
         image pause registry.k8s.io/pause:3.9 remote\n\
         asset runc ftp://example.com/runc\n\
         asset runc https://example.com/runc sha256:abc\n\
         asset ../runc https://example.com/runc\n\
         asset runc /etc/passwd\n\
         dockerout ../out Dockerfile\n\
         frobnicate x\n\
         image ok registry.k8s.io/pause:3.9\n",
    )
    .unwrap_err();
    assert_eq!(
        errors.0.len(),
        12,
        "every bad line, and only those: {errors}"
    );
    insta::assert_snapshot!(errors.to_string());
}

#[test]
fn local_paths_resolve_like_kurl_and_may_not_leave_the_repository() {
    let repository = tempfile::tempdir().unwrap();
    let addon = repository.path().join("addons/demo/1.0.0");
    fs_err::create_dir_all(addon.join("files")).unwrap();
    fs_err::create_dir_all(repository.path().join("images")).unwrap();
    fs_err::write(addon.join("files/notes.txt"), "notes").unwrap();
    fs_err::write(repository.path().join("images/app.tar"), "").unwrap();
    let manifest = Manifest::parse(
        &addon.join("Manifest"),
        "asset notes files/notes.txt\n\
         image app images/app.tar\n\
         asset escape ../../../../outside.txt\n\
         image gone images/gone.tar\n\
         dockerout out ../../Dockerfile\n",
    )
    .unwrap();
    let errors = manifest.check_paths(repository.path()).unwrap_err();
    let problems: Vec<(usize, &Problem)> = errors.0.iter().map(|e| (e.line, &e.problem)).collect();
    assert_eq!(problems.len(), 3, "{errors}");
    assert!(matches!(
        problems[0],
        (3, Problem::PathOutsideRepository { .. })
    ));
    assert!(matches!(problems[1], (4, Problem::MissingFile { .. })));
    assert!(matches!(
        problems[2],
        (5, Problem::PathOutsideRepository { .. })
    ));
    let asset = manifest
        .local_path(&manifest.entries[0], repository.path())
        .unwrap()
        .unwrap();
    assert_eq!(asset, addon.join("files/notes.txt"));
}
