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
        config_environment("containerd", &containerd.config),
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
