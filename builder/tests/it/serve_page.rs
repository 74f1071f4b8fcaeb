//! What `berth-build serve` answers the installer page: the page itself (to a browser; text to
//! curl), its files, the add-on catalogue, the check that answers as POST does and keeps
//! nothing, a kept spec, the signing key. The page in a real browser is
//! `installer/tests/it/web_page.rs`.

use std::process::Output;

use super::serve::{Dist, SPEC, curl, serve, text};

/// A GET or POST with headers; returns the status, the headers (lower-cased names) and body.
fn ask(arguments: &[&str]) -> (u16, String, String) {
    let headers = tempfile::NamedTempFile::new().unwrap();
    let mut all = vec!["-sS", "-D", headers.path().to_str().unwrap(), "-o", "-"];
    all.extend(arguments);
    let output: Output = curl(&all);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let head = fs_err::read_to_string(headers.path())
        .unwrap()
        .to_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap();
    (status, head, text(&output.stdout))
}

fn post(url: &str, spec: &str, json: bool) -> (u16, String) {
    let mut arguments = vec!["--data-binary", spec, url];
    if json {
        arguments.extend(["-H", "Accept: application/json"]);
    }
    let (status, _, body) = ask(&arguments);
    (status, body)
}

fn files(folder: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = fs_err::read_dir(folder)
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_browser_gets_the_page_held_to_this_server_and_curl_gets_text() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    let (status, head, page) = ask(&["-H", "Accept: text/html,*/*;q=0.8", &serving.url]);
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html"), "{head}");
    let policy = head
        .lines()
        .find_map(|line| line.strip_prefix("content-security-policy: "))
        .unwrap_or_else(|| panic!("no policy: {head}"));
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
    ] {
        assert!(policy.contains(directive), "{policy}");
    }
    // Everything it loads is a path on this server; no script is inline.
    let mut loaded = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        for (index, _) in page.match_indices(attribute) {
            let rest = &page[index + attribute.len()..];
            loaded.push(rest[..rest.find('"').unwrap()].to_string());
        }
    }
    assert!(!loaded.is_empty(), "{page}");
    for url in &loaded {
        assert!(
            url.starts_with("/ui/"),
            "{url} is not this server's: {loaded:?}"
        );
    }
    assert!(!page.contains("<script>"), "an inline script: {page}");
    let mut size = page.len();
    for url in &loaded {
        let (status, head, body) = ask(&[&format!("{}{url}", serving.url)]);
        assert_eq!(status, 200, "{url}: {body}");
        assert!(head.contains("content-security-policy:"), "{url}: {head}");
        assert!(
            head.contains("x-content-type-options: nosniff"),
            "{url}: {head}"
        );
        size += body.len();
    }
    // Small enough to load at once on any network that reaches the server.
    assert!(size < 64 * 1024, "the page and its files are {size} bytes");

    let (status, _, missing) = ask(&[
        "--path-as-is",
        &format!("{}/ui/../versions.json", serving.url),
    ]);
    assert_eq!(status, 404, "{missing}");
    let (status, _, missing) = ask(&[&format!("{}/ui/secret.js", serving.url)]);
    assert_eq!(
        (status, missing.trim()),
        (404, "no file `secret.js` under /ui/")
    );

    let (status, head, summary) = ask(&[&serving.url]);
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/plain"), "{head}");
    assert!(summary.starts_with("Berth installer server\n"), "{summary}");
    assert!(summary.contains("/installer/check"), "{summary}");
}

#[test]
fn the_check_answers_what_a_post_answers_and_keeps_nothing() {
    let dist = Dist::new();
    fs_err::write(
        dist.addons.root().join("addons/hello/1.0.0/fields.yaml"),
        "fields:\n  - {name: count, type: integer, default: 1, help: how many times it says hello}\n",
    )
    .unwrap();
    dist.rebuild();
    let installers = tempfile::tempdir().unwrap();
    let folder = installers.path().join("kept");
    let serving = serve(&dist.dist, &["--installers", folder.to_str().unwrap()]);
    let check = format!("{}/installer/check", serving.url);
    let create = format!("{}/installer", serving.url);
    let head = "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  hello:\n";
    let refused = [
        format!("{head}    version: latest\n    count: many\n"),
        format!("{head}    version: latest\n    cuont: 2\n"),
        format!("{head}    version: 7.x\n"),
        format!("{head}    version: 1.0.0\n  nothere:\n    version: latest\n"),
        format!("{head}  version: [\n"),
        "apiVersion: v1\nkind: Pod\n".to_string(),
    ];
    for spec in &refused {
        for json in [false, true] {
            let (checked, said) = post(&check, spec, json);
            let (posted, answered) = post(&create, spec, json);
            assert_eq!((checked, &said), (posted, &answered), "{spec}");
            assert_eq!(checked, 400, "{spec}: {said}");
        }
    }
    let (_, said) = post(&check, &refused[0], false);
    assert!(
        said.starts_with("installer.yaml:6: spec.hello.count is \"many\""),
        "{said}"
    );
    let (_, said) = post(&check, &refused[2], false);
    assert!(
        said.starts_with("installer.yaml:5: hello has no version `7.x`"),
        "{said}"
    );
    assert_eq!(
        files(&folder),
        Vec::<String>::new(),
        "a refused post keeps nothing"
    );

    let (status, body) = post(&check, SPEC, true);
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["addons"],
        serde_json::json!([{"name": "hello", "key": "hello", "requested": "latest", "version": "1.0.0"}])
    );
    assert_eq!(answer["spec"]["metadata"]["name"], "demo");
    assert_eq!(answer["spec"]["spec"]["hello"]["version"], "latest");
    assert_eq!(
        files(&folder),
        Vec::<String>::new(),
        "a check keeps nothing"
    );

    let (status, body) = post(&create, SPEC, true);
    assert_eq!(status, 201, "{body}");
    let created: serde_json::Value = serde_json::from_str(&body).unwrap();
    let id = created["id"].as_str().unwrap();
    assert_eq!(answer["id"], id, "the check's id is the installer's");
    assert_eq!(created["url"], format!("{}/{id}", serving.url));
    assert_eq!(
        created["bundles"]["zstd"],
        format!("{}/bundle/{id}.tar.zst", serving.url)
    );
    assert_eq!(created["signingKey"], serde_json::Value::Null);
    let (status, head, kept) = ask(&[created["spec"].as_str().unwrap()]);
    assert_eq!((status, kept.as_str()), (200, SPEC), "{head}");
    let (status, _, missing) = ask(&[&format!("{}/installer/{}", serving.url, "0".repeat(32))]);
    assert_eq!(status, 404, "{missing}");

    // The check is bounded as a post is.
    let large = format!("{SPEC}# {}\n", "x".repeat(600 * 1024));
    let path = installers.path().join("large.yaml");
    fs_err::write(&path, large).unwrap();
    let (status, _, _) = ask(&["--data-binary", &format!("@{}", path.display()), &check]);
    assert_eq!(status, 413);
}

#[test]
fn the_catalogue_gives_versions_as_the_server_resolves_them_and_the_signing_key() {
    let dist = Dist::new();
    dist.addons.addon("hello", "1.1.0", "");
    fs_err::write(
        dist.addons.root().join("addons/hello/1.1.0/fields.yaml"),
        "fields:\n  - {name: count, type: integer, default: 1, help: how many times}\n",
    )
    .unwrap();
    let keys = tempfile::tempdir().unwrap();
    let key = dist.keygen(keys.path(), "vendor");
    dist.rebuild_with(&["--signing-key", key.to_str().unwrap()]);
    let unsigned = serve(&dist.dist, &[]);
    let (status, _, said) = ask(&[&format!("{}/signing-key.pub", unsigned.url)]);
    assert_eq!(
        (status, said.trim()),
        (404, "this server signs with no key")
    );
    let serving = serve(&dist.dist, &["--signing-key", key.to_str().unwrap()]);

    let (status, head, body) = ask(&[&format!("{}/addons.json", serving.url)]);
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("content-type: application/json"), "{head}");
    let catalogue: serde_json::Value = serde_json::from_str(&body).unwrap();
    let hello = &catalogue["addons"][0];
    assert_eq!(hello["name"], "hello");
    assert_eq!(
        hello["aliases"],
        serde_json::json!([
            {"request": "latest", "version": "1.1.0"},
            {"request": "1.1.x", "version": "1.1.0"},
            {"request": "1.0.x", "version": "1.0.0"},
        ])
    );
    assert_eq!(hello["versions"][0]["fields"][0]["name"], "count");
    assert_eq!(hello["versions"][1]["fields"], serde_json::json!([]));
    assert_eq!(catalogue["settings"][0]["key"], "kurl");

    let public = fs_err::read_to_string(keys.path().join("vendor.pub")).unwrap();
    let (status, _, served) = ask(&[&format!("{}/signing-key.pub", serving.url)]);
    assert_eq!((status, served.as_str()), (200, public.as_str()));
    let (status, body) = post(&format!("{}/installer", serving.url), SPEC, true);
    assert_eq!(status, 201, "{body}");
    let created: serde_json::Value = serde_json::from_str(&body).unwrap();
    let fingerprint = created["signingKey"]["fingerprint"].as_str().unwrap();
    let public = berth_formats::signature::PublicKey::from_pem("vendor.pub", &public).unwrap();
    assert_eq!(fingerprint, public.fingerprint(), "{created}");
    assert_eq!(
        created["signingKey"]["url"],
        format!("{}/signing-key.pub", serving.url)
    );
}
