//! The kurl.sh role over a store: installers are posted as specs and get an id; their
//! scripts are rendered on request with a lock resolved from the store at that moment; the
//! release's files (packages, versions.json, node binaries) are passed through as they are.
//!
//! `POST /installer` (spec YAML) → `<url>/<id>`; `GET /<id>` and `/<id>/install.sh`,
//! `join.sh`, `upgrade.sh`, `tasks.sh`; `GET /versions.json`; `GET /dist/<file>`;
//! `GET /bundle/<id>.tar.gz`, streamed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use berth_formats::spec::InstallerSpec;
use berth_formats::versions::VERSIONS_FILE;

use crate::bundle;
use crate::release::{Release, ReleaseError};
use crate::scripts::{self, SCRIPTS, ScriptContext};
use crate::store::StoreError;
use crate::upload::berth_binary_file;

/// What the server holds.
pub struct Server {
    pub release: Arc<Release>,
    /// Where clients reach this server (`http://host:port`), for the URLs it hands out.
    pub public_url: String,
    /// The node architecture bundles are made for.
    pub bundle_arch: String,
    /// Installers posted so far: id → spec text.
    pub installers: Mutex<HashMap<String, String>>,
}

type Shared = Arc<Server>;

/// The routes; serve them with `axum::serve`.
pub fn router(server: Shared) -> Router {
    Router::new()
        .route("/installer", post(post_installer))
        .route("/versions.json", get(versions))
        .route("/dist/{*file}", get(dist_file))
        .route("/bundle/{file}", get(get_bundle))
        .route("/{id}", get(install_script))
        .route("/{id}/{script}", get(script))
        .with_state(server)
}

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut body = body.into();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

/// A release error as the client should see it: what is missing is 404, the rest 502.
fn release_error(error: ReleaseError) -> Response {
    let status = match &error {
        ReleaseError::Versions(_) => StatusCode::BAD_REQUEST,
        ReleaseError::Missing { .. } | ReleaseError::Store(StoreError::Missing { .. }) => {
            StatusCode::NOT_FOUND
        }
        _ => StatusCode::BAD_GATEWAY,
    };
    tracing::warn!("{error}");
    text(status, error.to_string())
}

async fn post_installer(State(server): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(yaml) = String::from_utf8(body.to_vec()) else {
        return text(StatusCode::BAD_REQUEST, "the spec is not UTF-8 text");
    };
    let spec = match InstallerSpec::parse(Path::new("installer.yaml"), &yaml) {
        Ok(spec) => spec,
        Err(error) => return text(StatusCode::BAD_REQUEST, error.to_string()),
    };
    // Resolved now so that an unknown add-on or version is refused at once.
    if let Err(error) = server.release.lock(&spec).await {
        return release_error(error);
    }
    let id = spec.id();
    server
        .installers
        .lock()
        .expect("no panic holds the lock")
        .insert(id.clone(), yaml);
    let url = format!("{}/{id}", server.public_url);
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|accept| accept.contains("application/json"));
    if wants_json {
        let body = serde_json::json!({ "id": id, "url": url }).to_string();
        (
            StatusCode::CREATED,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    } else {
        text(StatusCode::CREATED, url)
    }
}

fn installer(server: &Server, id: &str) -> Result<(String, InstallerSpec), Response> {
    let yaml = server
        .installers
        .lock()
        .expect("no panic holds the lock")
        .get(id)
        .cloned()
        .ok_or_else(|| {
            text(
                StatusCode::NOT_FOUND,
                format!("no installer `{id}`; post its spec to /installer first"),
            )
        })?;
    let spec = InstallerSpec::parse(Path::new("installer.yaml"), &yaml)
        .expect("a posted spec parsed when it was posted");
    Ok((yaml, spec))
}

async fn install_script(State(server): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    render(&server, &id, "install.sh").await
}

async fn script(
    State(server): State<Shared>,
    UrlPath((id, script)): UrlPath<(String, String)>,
) -> Response {
    if !SCRIPTS.contains(&script.as_str()) {
        return text(
            StatusCode::NOT_FOUND,
            format!("no script `{script}`; there are {}", SCRIPTS.join(", ")),
        );
    }
    render(&server, &id, &script).await
}

async fn render(server: &Server, id: &str, script: &str) -> Response {
    let (yaml, spec) = match installer(server, id) {
        Ok(found) => found,
        Err(response) => return response,
    };
    let resolved = async {
        let lock = server.release.lock(&spec).await?;
        Ok::<_, ReleaseError>((lock, server.release.berth_digests().await?))
    };
    let (lock, berth_digests) = match resolved.await {
        Ok(resolved) => resolved,
        Err(error) => return release_error(error),
    };
    let context = ScriptContext {
        id: id.to_string(),
        dist_url: format!("{}/dist", server.public_url),
        scripts_url: format!("{}/{id}", server.public_url),
        spec: yaml,
        lock,
        berth_digests,
    };
    match scripts::render(script, &context) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/x-shellscript; charset=utf-8")],
            body,
        )
            .into_response(),
        Err(error) => text(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

async fn versions(State(server): State<Shared>) -> Response {
    stream_file(&server, VERSIONS_FILE).await
}

async fn dist_file(State(server): State<Shared>, UrlPath(file): UrlPath<String>) -> Response {
    if file
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return text(
            StatusCode::BAD_REQUEST,
            format!("`{file}` is not a file name"),
        );
    }
    stream_file(&server, &file).await
}

/// A release file, streamed; the local node binary stands in for one the release lacks.
async fn stream_file(server: &Server, file: &str) -> Response {
    let key = server.release.key(file);
    let reader: Box<dyn tokio::io::AsyncRead + Send + Unpin> =
        match server.release.store.reader(&key).await {
            Ok(reader) => reader,
            Err(StoreError::Missing { location }) => match local_berth(server, file).await {
                Some(reader) => reader,
                None => return text(StatusCode::NOT_FOUND, format!("{location} does not exist")),
            },
            Err(error) => return release_error(error.into()),
        };
    let content_type = if file.ends_with(".json") {
        "application/json"
    } else if file.ends_with(".tar.gz") {
        "application/gzip"
    } else {
        "application/octet-stream"
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(tokio_util::io::ReaderStream::new(reader)),
    )
        .into_response()
}

async fn local_berth(
    server: &Server,
    file: &str,
) -> Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>> {
    let (arch, path) = server.release.local_berth.as_ref()?;
    let binary = berth_binary_file(arch);
    if file == binary {
        let opened = tokio::fs::File::open(path).await.ok()?;
        return Some(Box::new(opened));
    }
    if file == format!("{binary}.sha256") {
        let digests = server.release.berth_digests().await.ok()?;
        let line = berth_formats::package_index::checksum_file_text(
            digests.get(arch)?,
            &format!("berth-linux-{arch}"),
        );
        return Some(Box::new(std::io::Cursor::new(line.into_bytes())));
    }
    None
}

async fn get_bundle(State(server): State<Shared>, UrlPath(file): UrlPath<String>) -> Response {
    let Some(id) = file.strip_suffix(".tar.gz") else {
        return text(StatusCode::NOT_FOUND, "bundles are named <id>.tar.gz");
    };
    let (yaml, spec) = match installer(&server, id) {
        Ok(found) => found,
        Err(response) => return response,
    };
    let scripts_url = format!("{}/{id}", server.public_url);
    let dist_url = format!("{}/dist", server.public_url);
    let prepared = bundle::prepare(
        &server.release,
        &spec,
        &yaml,
        &server.bundle_arch,
        &dist_url,
        &scripts_url,
    )
    .await;
    let plan = match prepared {
        Ok(plan) => plan,
        Err(error) => return text(StatusCode::BAD_GATEWAY, error.to_string()),
    };
    let (writer, reader) = tokio::io::duplex(256 * 1024);
    let server = Arc::clone(&server);
    tokio::spawn(async move {
        if let Err(error) = bundle::write(Arc::clone(&server.release), &plan, writer).await {
            // The client sees the stream end early; the gzip trailer is missing.
            tracing::warn!("bundle {}: {error}", plan.lock.id);
        }
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/gzip".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}\""),
            ),
        ],
        Body::from_stream(tokio_util::io::ReaderStream::new(reader)),
    )
        .into_response()
}
