//! The page a person composes an installer on, as kurl.sh offers one: `GET /` answers it to a
//! browser (and the text summary to anything else), with its script and style under `/ui/`,
//! all compiled in, so that it works with no network beyond this server and under a
//! Content-Security-Policy of `'self'`. What the page knows it asks the server: the add-on
//! catalogue (`/addons.json`) and the check of the spec it composes (`/installer/check`),
//! which answers POST's own errors and stores nothing.

use serde_json::{Value, json};

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_formats::fields::FieldDeclaration;
use berth_formats::spec::kurl_type::{self, FieldKind};
use berth_formats::spec::{INSTALLER_SETTINGS_KEY, InstallerSpec, SETTINGS_SECTIONS, spec_key};
use berth_formats::versions::VersionsFile;

use super::answers::{json, release_error, text};
use super::{Shared, admit};

const PAGE: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/style.css");
const ICON: &str = include_str!("page/icon.svg");

/// Everything the page loads comes from this server; nothing runs inline; it is not framed.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

/// Whether the client asks for a page rather than text: a browser's `Accept` names HTML
/// first; curl's (`*/*`) and scripts' do not.
pub(super) fn wants_page(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

/// The page, with the headers that hold it to this server.
pub(super) fn page() -> Response {
    asset(PAGE, "text/html; charset=utf-8")
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            // The files are compiled into this server: a new server may change them.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /ui/<file>`: the page's script and style.
pub(super) async fn ui_file(UrlPath(file): UrlPath<String>) -> Response {
    match file.as_str() {
        "app.js" => asset(SCRIPT, "text/javascript; charset=utf-8"),
        "style.css" => asset(STYLE, "text/css; charset=utf-8"),
        "icon.svg" => asset(ICON, "image/svg+xml"),
        _ => text(
            StatusCode::NOT_FOUND,
            format!("no file `{}` under /ui/", file.escape_debug()),
        ),
    }
}

/// `GET /addons.json`: what the page offers, from the release's versions.json.
pub(super) async fn catalogue(State(server): State<Shared>) -> Response {
    match server.release.versions().await {
        Ok(versions) => json(StatusCode::OK, &describe(&versions)),
        Err(error) => release_error(&server, error),
    }
}

/// `POST /installer/check`: the spec checked as `POST /installer` checks it (the same errors,
/// with their `file:line`), and nothing kept. A spec that passes is answered with its id,
/// what each add-on resolves to, and the spec itself as JSON, so that a page fills its form
/// from a pasted file without parsing YAML itself.
pub(super) async fn check(State(server): State<Shared>, body: axum::body::Bytes) -> Response {
    let (_, spec, lock) = match admit(&server, &body).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let addons: Vec<Value> = lock
        .addons
        .iter()
        .map(|locked| {
            let requested = spec.addons.get(&locked.name).map(|addon| &addon.version);
            json!({
                "name": locked.name,
                "key": spec_key(&locked.name),
                "requested": requested,
                "version": locked.version,
            })
        })
        .collect();
    json(
        StatusCode::OK,
        &json!({ "id": spec.id(), "addons": addons, "spec": as_document(&spec) }),
    )
}

/// A parsed spec as the document it stands for, keyed by spec keys (`certManager`).
fn as_document(spec: &InstallerSpec) -> Value {
    let mut keys = serde_json::Map::new();
    for (name, addon) in &spec.addons {
        keys.insert(spec_key(name).to_string(), Value::Object(addon.to_map()));
    }
    for (key, section) in spec.settings_sections() {
        if !section.is_empty() {
            keys.insert(key, Value::Object(section));
        }
    }
    json!({
        "apiVersion": spec.api_version,
        "kind": berth_formats::spec::KIND,
        "metadata": { "name": spec.name },
        "spec": keys,
    })
}

/// The catalogue: each add-on with its versions (the order `latest` follows), the
/// server's reading of `latest` and each `X.Y.x`, and each version's fields; then kURL's
/// settings sections.
pub(crate) fn describe(versions: &VersionsFile) -> Value {
    let addons: Vec<Value> = versions
        .addons
        .iter()
        .map(|addon| {
            let key = spec_key(&addon.name);
            let entries: Vec<Value> = addon
                .versions
                .iter()
                .map(|entry| {
                    let fields = match &entry.fields {
                        Some(declared) => declared.iter().map(declared_field).collect(),
                        None => kurl_fields(key),
                    };
                    json!({ "version": entry.version, "fields": fields })
                })
                .collect();
            let mut requests = vec!["latest".to_string()];
            for entry in &addon.versions {
                if let Some(series) = series_of(&entry.version)
                    && !requests.contains(&series)
                {
                    requests.push(series);
                }
            }
            let aliases: Vec<Value> = requests
                .into_iter()
                .filter_map(|request| {
                    let version = versions.resolve(&addon.name, &request, None).ok()?;
                    Some(json!({ "request": request, "version": version }))
                })
                .collect();
            json!({
                "name": addon.name,
                "key": key,
                "kurl": kurl_type::is_kurl_key(key),
                "versions": entries,
                "aliases": aliases,
            })
        })
        .collect();
    let settings: Vec<Value> = std::iter::once(INSTALLER_SETTINGS_KEY)
        .chain(SETTINGS_SECTIONS)
        .map(|key| json!({ "key": key, "fields": kurl_fields(key) }))
        .collect();
    json!({
        "apiVersion": berth_formats::spec::API_VERSIONS[0],
        "kind": berth_formats::spec::KIND,
        "addons": addons,
        "settings": settings,
    })
}

/// `1.2.x` for `1.2.3`; none for a version without two leading numbers.
fn series_of(version: &str) -> Option<String> {
    let mut parts = version.split('.');
    let (major, minor) = (parts.next()?, parts.next()?);
    let numeric = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    (numeric(major) && numeric(minor) && parts.next().is_some())
        .then(|| format!("{major}.{minor}.x"))
}

fn declared_field(field: &FieldDeclaration) -> Value {
    serde_json::to_value(field).expect("a declaration is plain data")
}

/// kURL's fields of `key` (none for a key kURL does not have), as a declaration gives them;
/// `version` and `s3Override`, every add-on's own, are left to the page.
fn kurl_fields(key: &str) -> Vec<Value> {
    kurl_type::fields_of(key)
        .filter(|field| !matches!(field.field, "version" | "s3Override"))
        .map(|field| {
            // The declaration's types, and `commands` for kURL's lists of command lines.
            let (kind, default) = match field.kind {
                FieldKind::Text | FieldKind::CidrRange => ("string", None),
                FieldKind::Bool => ("boolean", None),
                FieldKind::BoolDefaultTrue | FieldKind::BoolOneOrZero => {
                    ("boolean", Some(Value::Bool(true)))
                }
                FieldKind::Integer => ("integer", None),
                FieldKind::List => ("list", None),
                FieldKind::Commands => ("commands", None),
                FieldKind::Document => ("mapping", None),
            };
            let help = match field.variable {
                Some(variable) => {
                    format!("kURL's {key}.{}; hooks read it as {variable}", field.field)
                }
                None => format!("kURL's {key}.{}, read by kURL's own tools", field.field),
            };
            json!({ "name": field.field, "type": kind, "default": default, "help": help })
        })
        .collect()
}

/// `GET /installer/<id>`: the spec an installer was posted with, as it was posted (kurl.sh
/// answers the same path with its installer's YAML).
pub(super) async fn spec_file(
    State(server): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Response {
    match super::installer(&server, &id).await {
        Ok(installer) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/yaml; charset=utf-8")],
            installer.yaml.clone(),
        )
            .into_response(),
        Err(response) => response,
    }
}

/// `GET /signing-key.pub`: the public half of the key this server signs with, for a node
/// that installs from a bundle (a served script carries it already).
pub(super) async fn signing_key(State(server): State<Shared>) -> Response {
    match &server.signing_key {
        Some(key) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/x-pem-file")],
            key.public().to_pem(),
        )
            .into_response(),
        None => text(StatusCode::NOT_FOUND, "this server signs with no key"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_the_first_two_numbers() {
        assert_eq!(series_of("1.6.20").as_deref(), Some("1.6.x"));
        assert_eq!(series_of("2.0.0-beta.1").as_deref(), Some("2.0.x"));
        assert_eq!(series_of("1.6"), None);
        assert_eq!(series_of("latest"), None);
        assert_eq!(series_of("v1.2.3"), None);
    }

    #[test]
    fn the_catalogue_gives_latest_and_each_series_as_the_server_resolves_them() {
        let versions = VersionsFile::parse(
            "versions.json",
            br#"{"addons": [
                {"name": "demo", "versions": [
                    {"version": "2.0.1", "fields": [{"name": "port", "type": "integer", "default": 8080, "help": "the port"}]},
                    {"version": "2.0.0"}, {"version": "1.0.0"}]},
                {"name": "containerd", "order": "listed", "versions": [{"version": "1.6.20"}, {"version": "1.7.1"}]}
            ]}"#,
        )
        .unwrap();
        let described = describe(&versions);
        let demo = &described["addons"][0];
        assert_eq!(
            demo["aliases"],
            json!([
                {"request": "latest", "version": "2.0.1"},
                {"request": "2.0.x", "version": "2.0.1"},
                {"request": "1.0.x", "version": "1.0.0"},
            ])
        );
        assert_eq!(demo["kurl"], false);
        assert_eq!(demo["versions"][0]["fields"][0]["default"], 8080);
        // Listed first is latest, even when older.
        let containerd = &described["addons"][1];
        assert_eq!(containerd["aliases"][0]["version"], "1.6.20");
        assert_eq!(containerd["kurl"], true);
        let names: Vec<&str> = containerd["versions"][0]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|field| field["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"tomlConfig"), "{names:?}");
        assert!(!names.contains(&"version"), "{names:?}");
        let settings = &described["settings"][0];
        assert_eq!(settings["key"], "kurl");
        assert!(
            settings["fields"]
                .as_array()
                .unwrap()
                .iter()
                .any(|field| field["name"] == "airgap" && field["type"] == "boolean"),
            "{settings}"
        );
    }
}
