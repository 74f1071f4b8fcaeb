use std::path::Path;

use serde_json::json;

use super::*;

fn parse(text: &str) -> Result<InstallerSpec, SpecError> {
    InstallerSpec::parse(Path::new("installer.yaml"), text)
}

#[test]
fn a_kurl_spec_parses_with_each_addon_config_kept() {
    let spec = parse(
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata:\n  name: demo\nspec:\n  kubernetes:\n    version: 1.27.x\n  containerd:\n    version: latest\n    preserveConfig: true\n    tomlConfig: |\n      [plugins]\n  registry:\n    version: 2.8.x\n    s3Override: https://example.com/registry.tar.gz\n  kurl:\n    airgap: true\n",
    )
    .unwrap();
    assert_eq!(spec.name.as_deref(), Some("demo"));
    assert_eq!(
        spec.addons.keys().collect::<Vec<_>>(),
        ["containerd", "kubernetes", "registry"]
    );
    let containerd = &spec.addons["containerd"];
    assert_eq!(containerd.version, "latest");
    assert_eq!(containerd.config["preserveConfig"], json!(true));
    assert_eq!(
        spec.addons["registry"].s3_override.as_deref(),
        Some("https://example.com/registry.tar.gz")
    );
    assert!(spec.airgap());
    assert_eq!(
        config_environment("containerd", &containerd.config).unwrap(),
        [
            ("CONTAINERD_PRESERVE_CONFIG".to_string(), "1".to_string()),
            (
                "CONTAINERD_TOML_CONFIG".to_string(),
                "[plugins]\n".to_string()
            )
        ]
    );
}

#[test]
fn the_id_ignores_layout_and_order_but_not_content() {
    let a = parse("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  a: {version: 1.0.0, x: 1}\n  b: {version: latest}\n").unwrap();
    let b = parse("# comment\nkind: Installer\napiVersion: cluster.kurl.sh/v1beta1\nspec:\n  b:\n    version: latest\n  a:\n    x: 1\n    version: 1.0.0\n").unwrap();
    let c = parse("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  a: {version: 1.0.0, x: 2}\n  b: {version: latest}\n").unwrap();
    assert_eq!(a.id(), b.id());
    assert_ne!(a.id(), c.id());
    assert_eq!(a.id().len(), ID_LENGTH);
}

#[test]
fn numeric_versions_are_read_as_text() {
    let spec = parse("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  kubernetes:\n    version: 1.28\n").unwrap();
    assert_eq!(spec.addons["kubernetes"].version, "1.28");
}

#[test]
fn bad_yaml_names_the_line() {
    let error = parse("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  a: [unclosed\n  b: {version: 1}\n")
        .unwrap_err();
    assert!(error.line.is_some(), "{error}");
    assert!(error.to_string().starts_with("installer.yaml:"), "{error}");
    assert!(
        error.to_string().contains("not a valid Installer spec"),
        "{error}"
    );
}

#[test]
fn a_wrong_kind_is_refused_with_its_line() {
    let error =
        parse("apiVersion: cluster.kurl.sh/v1beta1\nkind: Deployment\nspec: {}\n").unwrap_err();
    assert_eq!(
        error.to_string(),
        "installer.yaml:2: kind is `Deployment`, expected `Installer`\nhint: use `kind: Installer`"
    );
}

#[test]
fn an_addon_without_version_is_refused() {
    let error = parse("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  containerd:\n    preserveConfig: true\n").unwrap_err();
    assert_eq!(error.line, Some(4));
    assert!(
        error.problem.contains("spec.containerd has no `version`"),
        "{error}"
    );
}

#[test]
fn names_become_upper_snake_case() {
    for (name, expected) in [
        ("tomlConfig", "TOML_CONFIG"),
        ("s3Override", "S3_OVERRIDE"),
        ("cert-manager", "CERT_MANAGER"),
        ("isHTTPEnabled", "IS_HTTP_ENABLED"),
        ("version", "VERSION"),
    ] {
        assert_eq!(upper_snake(name), expected);
    }
}

#[test]
fn set_values_keep_their_scalar_type() {
    assert_eq!(parse_scalar("true"), json!(true));
    assert_eq!(parse_scalar("3"), json!(3));
    assert_eq!(parse_scalar("hello world"), json!("hello world"));
    assert_eq!(parse_scalar("[a"), json!("[a"));
}

#[test]
fn deeply_nested_yaml_is_refused_before_it_is_parsed() {
    // 200 KB of nested brackets held a parser for most of a minute.
    let flow = format!(
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let mut block = String::from("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n");
    for level in 1..=200 {
        block.push_str(&format!("{}k{level}:\n", " ".repeat(level)));
    }
    let items = format!(
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  x:\n  {}1\n",
        "- ".repeat(100)
    );
    for text in [flow, block, items] {
        let started = std::time::Instant::now();
        let error = InstallerSpec::parse(Path::new("deep.yaml"), &text).unwrap_err();
        assert!(error.problem.contains("nests deeper"), "{error}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}

#[test]
fn a_real_spec_is_far_from_the_depth_limit() {
    let text = "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  containerd:\n    version: latest\n    tomlConfig: |\n      [plugins]\n        [plugins.\"io.containerd.grpc.v1.cri\"]\n          sandbox_image = \"x\"\n  kurl:\n    hostPreflightIgnore: true\n    hostPreflights: {spec: {analyzers: [{cpu: {outcomes: [{fail: {when: x}}]}}]}}\n";
    InstallerSpec::parse(Path::new("ok.yaml"), text).unwrap();
}

#[test]
fn oversized_specs_and_control_characters_are_refused() {
    let big = format!(
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  demo:\n    version: latest\n    note: \"{}\"\n",
        "x".repeat(MAX_SPEC_BYTES)
    );
    let error = InstallerSpec::parse(Path::new("big.yaml"), &big).unwrap_err();
    assert!(error.problem.contains("bytes"), "{error}");
    let nul = "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  demo:\n    version: latest\n    note: \"a\0b\"\n";
    let error = InstallerSpec::parse(Path::new("nul.yaml"), nul).unwrap_err();
    assert_eq!(error.line, Some(6), "{error}");
}

#[test]
fn addon_names_and_versions_that_are_not_plain_are_refused() {
    for (name, version) in [("../x", "latest"), ("demo", "../../etc"), ("a b", "1.0.0")] {
        let text = format!(
            "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  \"{name}\":\n    version: \"{version}\"\n"
        );
        let error = InstallerSpec::parse(Path::new("names.yaml"), &text).unwrap_err();
        assert!(
            error.problem.contains("not a plain name"),
            "{name} {version}: {error}"
        );
    }
}

#[test]
fn fields_that_cannot_be_variables_or_would_override_one_are_refused() {
    for (fields, expected) in [
        ("      Version: 9.9.9\n", "which Berth sets itself"),
        ("      s3-override: x\n", "which Berth sets itself"),
        ("      \"x=y\": 1\n", "not a name a variable can carry"),
        ("      \"a b\": 1\n", "not a name a variable can carry"),
        (
            "      fooBar: 1\n      foo-bar: 2\n",
            "both become $DEMO_FOO_BAR",
        ),
    ] {
        let text = format!(
            "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  demo:\n    version: latest\n{}",
            fields.replace("      ", "    ")
        );
        let error = parse(&text).unwrap_err();
        assert!(error.problem.contains(expected), "{fields}: {error}");
        assert!(error.line.is_some(), "{fields}: {error}");
    }
}

/// kURL's Installer specs, read in place from the shared fixtures.
fn kurl_specs() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/kurl-specs");
    assert!(
        dir.is_dir(),
        "the kURL spec fixtures are missing: {} (the checkout needs shared/ beside it)",
        dir.display()
    );
    let mut specs: Vec<_> = fs_err::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    specs.sort();
    assert!(
        specs.len() >= 60,
        "{} specs in {}",
        specs.len(),
        dir.display()
    );
    specs
}

#[test]
fn every_kurl_spec_parses_with_its_settings_sections_and_folder_names() {
    let mut failures = Vec::new();
    let mut sections = BTreeMap::new();
    for path in kurl_specs() {
        // kURL's test grid puts the version under test where its specs say `__testver__`.
        let text = fs_err::read_to_string(&path)
            .unwrap()
            .replace("__testver__", "latest");
        match InstallerSpec::parse(&path, &text) {
            Ok(spec) => {
                for name in spec.sections.keys() {
                    *sections.entry(name.clone()).or_insert(0) += 1;
                }
                for name in spec.addons.keys() {
                    assert!(
                        !name.chars().any(|c| c.is_ascii_uppercase()),
                        "{}: `{name}` is a spec key, not the add-on's folder",
                        path.display()
                    );
                }
            }
            Err(error) => failures.push(error.to_string()),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(sections.contains_key("helm"), "{sections:?}");
}

#[test]
fn settings_sections_are_kept_and_camel_case_add_ons_take_their_folder_names() {
    let spec = parse(
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  certManager:\n    version: 1.9.1\n  metricsServer:\n    version: 0.4.x\n  selinuxConfig:\n    selinux: permissive\n  ufwConfig:\n    bypassUFWWarning: true\n  iptablesConfig: {}\n  firewalldConfig:\n    bypassFirewalldWarning: true\n",
    )
    .unwrap();
    assert_eq!(
        spec.addons.keys().collect::<Vec<_>>(),
        ["cert-manager", "metrics-server"]
    );
    assert_eq!(
        spec.sections.keys().collect::<Vec<_>>(),
        [
            "firewalldConfig",
            "iptablesConfig",
            "selinuxConfig",
            "ufwConfig"
        ]
    );
    assert_eq!(
        spec.sections["selinuxConfig"]["selinux"],
        json!("permissive")
    );
    // The sections count in what the installer is: another setting, another id.
    let other = parse(
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  certManager:\n    version: 1.9.1\n  metricsServer:\n    version: 0.4.x\n  selinuxConfig:\n    selinux: enforcing\n  ufwConfig:\n    bypassUFWWarning: true\n  iptablesConfig: {}\n  firewalldConfig:\n    bypassFirewalldWarning: true\n",
    )
    .unwrap();
    assert_ne!(spec.id(), other.id());
    let refused = parse(
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  selinuxConfig: enforcing\n",
    )
    .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("spec.selinuxConfig is a string, expected a mapping"),
        "{refused}"
    );
}

fn parse_spec(body: &str) -> Result<InstallerSpec, SpecError> {
    InstallerSpec::parse(
        Path::new("spec.yaml"),
        &format!("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n{body}"),
    )
}

#[test]
fn every_key_of_kurls_installer_type_takes_its_fields() {
    use super::kurl_type::{KURL_FIELDS, is_kurl_key};
    // The 32 keys of kURL's Installer type.
    let keys: std::collections::BTreeSet<&str> = KURL_FIELDS.iter().map(|f| f.key).collect();
    assert_eq!(keys.len(), 32, "{keys:?}");
    for key in [
        "kubernetes",
        "kurl",
        "certManager",
        "metricsServer",
        "ufwConfig",
        "helm",
    ] {
        assert!(is_kurl_key(key), "{key}");
    }
    assert!(!is_kurl_key("cert-manager") && !is_kurl_key("demo"));
    // A spec that writes every field kURL's type has, each with a value of its type, parses.
    let mut body = String::new();
    for key in &keys {
        body.push_str(&format!("  {key}:\n"));
        for field in KURL_FIELDS.iter().filter(|f| f.key == *key) {
            use super::kurl_type::FieldKind::*;
            let value = match field.kind {
                _ if field.field == "version" => "latest",
                Text | CidrRange => "x",
                Bool | BoolDefaultTrue | BoolOneOrZero => "true",
                Integer => "3",
                List => "[a, b]",
                Commands => "[[a, b]]",
                Document => "{spec: {}}",
            };
            body.push_str(&format!("    {}: {value}\n", field.field));
        }
    }
    parse_spec(&body).unwrap();
}

#[test]
fn a_misspelled_or_mistyped_kurl_field_is_refused_naming_the_nearest() {
    for (body, expected) in [
        (
            "  registry:\n    version: latest\n    publshPort: 9090\n",
            "spec.registry.publshPort is not a field of kURL's `registry`; did you mean `publishPort`?",
        ),
        (
            "  ekco:\n    version: latest\n    shouldDisableRebootService: true\n",
            "did you mean `shouldDisableRebootServices`?",
        ),
        (
            "  kurl:\n    privateAdress: 10.0.0.1\n",
            "did you mean `privateAddress`?",
        ),
        (
            "  firewalldConfig:\n    zzz: 1\n",
            "its fields are `bypassFirewalldWarning`",
        ),
        (
            "  containerd:\n    version: latest\n    preserveConfig: \"yes\"\n",
            "spec.containerd.preserveConfig is a string, expected true or false",
        ),
        (
            "  kubernetes:\n    version: latest\n    maxPodsPerNode: many\n",
            "expected a whole number",
        ),
        (
            "  velero:\n    version: latest\n    serverFlags: --x\n",
            "expected a list of strings",
        ),
    ] {
        let error = parse_spec(body).unwrap_err();
        assert!(error.to_string().contains(expected), "{body}: {error}");
        assert!(error.line.is_some(), "{body}: the line is named");
    }
    // An add-on kURL does not have keeps whatever fields it likes.
    parse_spec("  demo:\n    version: latest\n    prot: 9090\n").unwrap();
}

#[test]
fn kurl_values_are_written_as_kurls_conversion_writes_them() {
    use super::kurl_type::kurl_environment;
    let spec = parse_spec(
        "  kubernetes:\n    version: latest\n    serviceCidrRange: /22\n    loadBalancerAddress: lb:6443\n    maxPodsPerNode: 0\n  weave:\n    version: latest\n    noMasqLocal: false\n  velero:\n    version: latest\n    serverFlags: [--a, --b]\n    namespace: backups\n  kurl:\n    airgap: true\n    noProxy: false\n  firewalldConfig:\n    disableFirewalld: true\n    preserveConfig: true\n",
    )
    .unwrap();
    let sections: BTreeMap<String, Map<String, Value>> = spec
        .addons
        .iter()
        .map(|(name, addon)| (super::spec_key(name).to_string(), addon.config.clone()))
        .chain([("kurl".to_string(), spec.settings.clone())])
        .chain(spec.sections.clone())
        .collect();
    let variables: BTreeMap<String, String> = kurl_environment(|key| sections.get(key))
        .into_iter()
        .map(|variable| (variable.variable, variable.value))
        .collect();
    for (name, value) in [
        ("SERVICE_CIDR_RANGE", "22"),
        ("HA_CLUSTER", "1"),
        ("KUBERNETES_MAX_PODS_PER_NODE", ""),
        ("KUBERNETES_CLUSTER_NAME", "kubernetes"),
        ("NO_MASQ_LOCAL", "0"),
        ("VELERO_SERVER_FLAGS", "--a,--b"),
        ("VELERO_NAMESPACE", "backups"),
        ("AIRGAP", "1"),
        ("OFFLINE_DOCKER_INSTALL", "1"),
        ("DISABLE_FIREWALLD", ""),
        ("HARD_FAIL_ON_LOOPBACK", "1"),
        ("FLANNEL_VERSION", ""),
        ("EKCO_SHOULD_DISABLE_REBOOT_SERVICE", ""),
    ] {
        assert_eq!(
            variables.get(name).map(String::as_str),
            Some(value),
            "{name}"
        );
    }
    // The engine sets these: the resolved version of each add-on asked for, and MASTER.
    assert!(!variables.contains_key("KUBERNETES_VERSION"));
    assert!(!variables.contains_key("MASTER"));
    // kurl.noProxy false leaves the node's own NO_PROXY alone.
    assert!(!variables.contains_key("NO_PROXY"));
}

/// Each field's line is kept, found under its own add-on: two add-ons' `port`s are told apart,
/// and a field in a flow mapping takes its add-on's line.
#[test]
fn each_field_keeps_its_line() {
    let text = "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  # the web add-on\n  web:\n    version: 2.8.2\n    port: 5000\n  demo:\n\n    version: 1.0.0\n    port: 8080\n  hello: {version: 1.0.0, greeting: hi}\n";
    let spec = parse(text).unwrap();
    assert_eq!(spec.addons["web"].lines["port"], 7);
    assert_eq!(spec.addons["demo"].lines["port"], 11);
    assert_eq!(spec.addons["hello"].lines["greeting"], 12);
    assert_eq!(
        spec.addons["demo"].locate(Path::new("installer.yaml"), "port"),
        "installer.yaml:11"
    );
    // kURL's own fields too.
    let error = InstallerSpec::parse(
        Path::new("installer.yaml"),
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  demo:\n    version: 1.0.0\n    port: 8080\n  registry:\n    version: 2.8.2\n    port: 5000\n",
    )
    .unwrap_err();
    assert_eq!(error.line, Some(9), "{error}");
}
