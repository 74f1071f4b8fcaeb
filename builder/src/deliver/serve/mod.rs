//! The kurl.sh role over a store: installers are posted as specs and get an id, and their lock
//! (every package's digest) is fixed then and kept with them; their scripts and bundles are
//! rendered on request with that lock, never one worked out again from the store; the
//! release's files (packages, versions.json, node binaries) are passed through as they are.
//!
//! `POST /installer` (spec YAML) → `<url>/<id>`; `GET /<id>` and `/<id>/install.sh`,
//! `join.sh`, `upgrade.sh`, `tasks.sh`; `GET /versions.json`; `GET /dist/<file>`;
//! `GET /bundle/<id>.tar.gz`, streamed; `GET /` is a page to compose a spec on (to a browser;
//! text to anything else), see [`page`].

use std::path::Path;
use std::sync::Arc;

mod answers;
mod connections;
mod page;

use answers::{installer_error, json, release_error, text, wants_json};
pub use connections::{ConnectionLimits, serve};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use berth_formats::compression::Compression;
use berth_formats::release::{berth_binary_file, berth_binary_name, checksum_file};
use berth_formats::spec::{InstallerSpec, MAX_SPEC_BYTES};
use berth_formats::versions::{VERSIONS_FILE, VersionsError};
use tokio::sync::Semaphore;

use crate::deliver::bundle;
use crate::deliver::installers::{Inserted, Installer, InstallerStore};
use crate::deliver::scripts::{self, SCRIPTS, ScriptContext};
use crate::publish::release::{Release, ReleaseError};
use crate::publish::store::StoreError;

/// What the server holds.
pub struct Server {
    pub release: Arc<Release>,
    /// Where clients reach this server (`http://host:port`), for the URLs it hands out.
    pub public_url: String,
    /// The node architecture bundles are made for.
    pub bundle_arch: String,
    /// Installers posted so far, kept on disk.
    pub installers: InstallerStore,
    /// Specs parsed at once: parsing is CPU work, done off the async workers.
    pub parsing: Semaphore,
    /// Bundles streamed at once; one more is answered 503.
    pub bundles: Arc<Semaphore>,
    /// The vendor's key: it signs each bundle's versions.json and lock, and each served
    /// script's lock, which scripts carry with its public key.
    pub signing_key: Option<Arc<berth_formats::signature::SigningKey>>,
    /// The highest release counter of the store's versions.json this server has signed for:
    /// a store put back to an older release is refused.
    pub highest_release: std::sync::atomic::AtomicU64,
}

/// Bundles a server streams at once unless told otherwise.
pub const DEFAULT_BUNDLES: usize = 4;

impl Server {
    pub fn new(
        release: Arc<Release>,
        public_url: String,
        bundle_arch: String,
        installers: InstallerStore,
        bundles: usize,
    ) -> Self {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Self {
            release,
            public_url,
            bundle_arch,
            installers,
            parsing: Semaphore::new(cores),
            bundles: Arc::new(Semaphore::new(bundles)),
            signing_key: None,
            highest_release: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

type Shared = Arc<Server>;

/// The routes; serve them with [`serve`].
pub fn router(server: Shared) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/ui/{file}", get(page::ui_file))
        .route("/addons.json", get(page::catalogue))
        .route("/signing-key.pub", get(page::signing_key))
        .route(
            "/installer",
            post(post_installer).layer(DefaultBodyLimit::max(MAX_SPEC_BYTES)),
        )
        .route(
            "/installer/check",
            post(page::check).layer(DefaultBodyLimit::max(MAX_SPEC_BYTES)),
        )
        .route("/installer/{id}", get(page::spec_file))
        .route("/versions.json", get(versions))
        .route("/dist/{*file}", get(dist_file))
        .route("/bundle/{file}", get(get_bundle))
        .route("/{id}", get(install_script))
        .route("/{id}/{script}", get(script))
        .layer(axum::middleware::from_fn(answers::json_errors))
        .with_state(server)
}

/// Runs `work` on the blocking pool, at most as many at once as there are cores.
async fn parse_off_the_workers<T: Send + 'static>(
    server: &Server,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let _permit = server
        .parsing
        .acquire()
        .await
        .expect("the semaphore is never closed");
    tokio::task::spawn_blocking(work)
        .await
        .expect("parsing does not panic")
}

async fn index(State(server): State<Shared>, headers: HeaderMap) -> Response {
    if page::wants_page(&headers) {
        return page::page();
    }
    text(
        StatusCode::OK,
        format!(
            "Berth installer server\n\nPOST {url}/installer         an Installer spec (YAML); answers its URL\nGET  {url}/<id>               install.sh of an installer\nGET  {url}/<id>/<script>      {scripts}\nGET  {url}/bundle/<id>.tar.gz the airgap bundle of an installer (.tar.zst in zstd)\nGET  {url}/installer/<id>     the spec an installer was posted with\nPOST {url}/installer/check    a spec checked as POST /installer checks it, and not kept\nGET  {url}/addons.json        the add-ons, versions and fields on offer (the page reads it)\nGET  {url}/versions.json      the add-on versions on offer\nGET  {url}/dist/<file>        the release's packages and node binaries\nGET  {url}/signing-key.pub    the public key the server signs with, where it has one\n\nA browser at {url}/ gets a page to compose an installer on.\n",
            url = server.public_url,
            scripts = SCRIPTS.join(", "),
        ),
    )
}

/// What to add to a refused spec that came in as one line holding several of a spec's keys:
/// `curl -d @FILE` strips a file's line breaks, `--data-binary` keeps them.
fn flattened_hint(body: &[u8]) -> &'static str {
    let one_line = !body.trim_ascii_end().contains(&b'\n');
    let keys = ["apiVersion:", "kind:", "spec:"]
        .iter()
        .filter(|key| {
            body.windows(key.len())
                .any(|window| window == key.as_bytes())
        })
        .count();
    if one_line && keys >= 2 {
        "\nhint: the spec came as one line: curl's -d strips a file's line breaks; post it with --data-binary @FILE"
    } else {
        ""
    }
}

/// A posted spec read and resolved as `POST /installer` does, storing nothing: its text, the
/// spec and its lock, or the answer that refuses it (naming the `file:line` where it can).
async fn admit(
    server: &Shared,
    body: &[u8],
) -> Result<(String, InstallerSpec, berth_formats::lock::Lock), Response> {
    let Ok(yaml) = String::from_utf8(body.to_vec()) else {
        return Err(text(StatusCode::BAD_REQUEST, "the spec is not UTF-8 text"));
    };
    let parsed = parse_off_the_workers(server, move || {
        InstallerSpec::parse(Path::new(SPEC_NAME), &yaml).map(|spec| (yaml, spec))
    })
    .await;
    let (yaml, spec) = parsed.map_err(|error| {
        text(
            StatusCode::BAD_REQUEST,
            format!("{error}{}", flattened_hint(body)),
        )
    })?;
    // Resolved now, so that an unknown add-on or version is refused at once, and kept: what
    // the installer's URL installs is fixed from now on.
    let refused = |addon: &str, field: &str, message: String| {
        let location = spec.addons.get(addon).map_or_else(
            || SPEC_NAME.to_string(),
            |requested| requested.locate(Path::new(SPEC_NAME), field),
        );
        text(StatusCode::BAD_REQUEST, format!("{location}: {message}"))
    };
    match server.release.lock(&spec).await {
        Ok(lock) => Ok((yaml, spec, lock)),
        // A field its add-on refuses, or a version the dist lacks, is named by its line, as
        // a YAML error is.
        Err(ReleaseError::Versions(error)) => Err(match &error {
            VersionsError::Fields(field) => {
                refused(&field.addon, &field.field, field.message.clone())
            }
            VersionsError::UnknownVersion { name, .. }
            | VersionsError::NoneForKubernetes { name, .. } => {
                refused(name, "version", error.to_string())
            }
            _ => release_error(server, ReleaseError::Versions(error)),
        }),
        Err(error) => Err(release_error(server, error)),
    }
}

/// The name a posted spec goes by in errors.
const SPEC_NAME: &str = "installer.yaml";

async fn post_installer(
    State(server): State<Shared>,
    ConnectInfo(client): ConnectInfo<std::net::SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (yaml, spec, lock) = match admit(&server, &body).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let store = Arc::clone(&server);
    let fresh = lock.clone();
    let inserted = tokio::task::spawn_blocking(move || {
        store
            .installers
            .insert_for(Some(client.ip()), yaml, spec, lock)
    })
    .await
    .expect("keeping an installer does not panic");
    let (installer, inserted) = match inserted {
        Ok(inserted) => inserted,
        Err(error) => return installer_error(error),
    };
    let id = installer.spec.id();
    // The same spec posted again is the same installer, whose URL installs the packages it
    // was first given: where the dist no longer has them, that URL would fail on every node,
    // so the post says so rather than hand it out.
    if inserted == Inserted::Existing
        && let Some(kept) = &installer.lock
        && let Some(stale) = stale_addon(kept, &fresh)
    {
        return text(
            StatusCode::CONFLICT,
            format!(
                "installer {id} (this spec, posted before) installs {stale}; its URL keeps installing what it was first given. Change the spec (another metadata.name makes another installer), or remove {id}.yaml and {id}.lock.json from the server's installer folder, and post it again"
            ),
        );
    }
    let url = format!("{}/{id}", server.public_url);
    let status = match inserted {
        Inserted::New => StatusCode::CREATED,
        Inserted::Existing => StatusCode::OK,
    };
    if wants_json(&headers) {
        let public = &server.public_url;
        let body = serde_json::json!({
            "id": id,
            "url": url,
            "spec": format!("{public}/installer/{id}"),
            "bundles": {
                "gzip": format!("{public}/bundle/{id}.tar.gz"),
                "zstd": format!("{public}/bundle/{id}.tar.zst"),
            },
            "signingKey": server.signing_key.as_ref().map(|key| serde_json::json!({
                "fingerprint": key.public().fingerprint(),
                "url": format!("{public}/signing-key.pub"),
            })),
        });
        json(status, &body)
    } else {
        text(status, url)
    }
}

/// The first add-on `kept` pins at another version or package than the dist now offers
/// (`fresh`), described for the poster.
fn stale_addon(
    kept: &berth_formats::lock::Lock,
    fresh: &berth_formats::lock::Lock,
) -> Option<String> {
    kept.addons.iter().find_map(|old| {
        let new = fresh.addons.iter().find(|new| new.name == old.name);
        match new {
            Some(new) if new.version == old.version && new.sha256 == old.sha256 => None,
            Some(new) => Some(format!(
                "{} {} with package {}, and the dist now has {} {} with package {}",
                old.name, old.version, old.sha256, new.name, new.version, new.sha256
            )),
            None => Some(format!(
                "{} {} with package {}, which the dist no longer resolves",
                old.name, old.version, old.sha256
            )),
        }
    })
}

async fn installer(server: &Shared, id: &str) -> Result<Arc<Installer>, Response> {
    let found = match server.installers.cached(id) {
        Some(installer) => Ok(Some(installer)),
        None => {
            let store = Arc::clone(server);
            let wanted = id.to_string();
            parse_off_the_workers(server, move || store.installers.get(&wanted)).await
        }
    };
    if let Ok(Some(installer)) = &found {
        server.installers.touch(&installer.spec.id());
    }
    match found {
        // Kept before locks were kept: its lock is fixed now, once.
        Ok(Some(installer)) if installer.lock.is_none() => {
            let lock = server
                .release
                .lock(&installer.spec)
                .await
                .map_err(|error| release_error(server, error))?;
            let store = Arc::clone(server);
            tokio::task::spawn_blocking(move || store.installers.fix_lock(&installer, lock))
                .await
                .expect("keeping a lock does not panic")
                .map_err(installer_error)
        }
        Ok(Some(installer)) => Ok(installer),
        Ok(None) => Err(text(
            StatusCode::NOT_FOUND,
            format!(
                "no installer `{}`; post its spec to /installer first",
                id.escape_debug()
            ),
        )),
        Err(error) => Err(installer_error(error)),
    }
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
            format!(
                "no script `{}`; there are {}",
                script.escape_debug(),
                SCRIPTS.join(", ")
            ),
        );
    }
    render(&server, &id, &script).await
}

async fn render(server: &Shared, id: &str, script: &str) -> Response {
    let installer = match installer(server, id).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let Some(lock) = installer.lock.clone() else {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the installer has no lock",
        );
    };
    let berth_digests = match server.release.berth_digests().await {
        Ok(digests) => digests,
        Err(error) => return release_error(server, error),
    };
    // The key signs the lock only when the store's own signatures (its key's) cover it.
    if let Some(key) = &server.signing_key
        && let Err(error) = crate::publish::sign::check_store(
            &server.release,
            &lock,
            key,
            Some(&server.highest_release),
        )
        .await
    {
        tracing::warn!(
            "script {id}: {}",
            berth_formats::report::chain(error.as_ref())
        );
        return text(
            StatusCode::BAD_GATEWAY,
            "the release is not signed with this server's key; its log says why",
        );
    }
    let context = ScriptContext {
        id: id.to_string(),
        dist_url: format!("{}/dist", server.public_url),
        scripts_url: format!("{}/{id}", server.public_url),
        spec: installer.yaml.clone(),
        lock,
        berth_digests,
        signing_key: server.signing_key.clone(),
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
    if file.chars().any(char::is_control)
        || file
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return text(
            StatusCode::BAD_REQUEST,
            format!("`{}` is not a file name", file.escape_debug()),
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
            Err(StoreError::Missing { .. }) => match local_berth(server, file).await {
                Some(reader) => reader,
                None => {
                    return text(
                        StatusCode::NOT_FOUND,
                        format!("the release has no `{file}`"),
                    );
                }
            },
            Err(error) => return release_error(server, error.into()),
        };
    let content_type = if file.ends_with(".json") {
        "application/json"
    } else if let Some((_, compression)) = Compression::split_tar_name(file) {
        compression.media_type()
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
        let opened = fs_err::tokio::File::open(path).await.ok()?;
        return Some(Box::new(opened));
    }
    if file == checksum_file(&binary) {
        let digests = server.release.berth_digests().await.ok()?;
        let line = berth_formats::package_index::checksum_file_text(
            digests.get(arch)?,
            &berth_binary_name(arch),
        );
        return Some(Box::new(std::io::Cursor::new(line.into_bytes())));
    }
    None
}

async fn get_bundle(State(server): State<Shared>, UrlPath(file): UrlPath<String>) -> Response {
    let Some((id, compression)) = Compression::split_tar_name(&file) else {
        return text(
            StatusCode::NOT_FOUND,
            "bundles are named <id>.tar.gz, or <id>.tar.zst in zstd",
        );
    };
    let installer = match installer(&server, id).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    // Each bundle holds a writer task and reads every package: a bounded number at once.
    let Ok(permit) = Arc::clone(&server.bundles).try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "30")],
            "the server is streaming as many bundles as it takes at once; try again shortly\n",
        )
            .into_response();
    };
    let scripts_url = format!("{}/{id}", server.public_url);
    let dist_url = format!("{}/dist", server.public_url);
    let prepared = bundle::prepare(
        &server.release,
        &installer.spec,
        installer.lock.clone(),
        &installer.yaml,
        &server.bundle_arch,
        &dist_url,
        &scripts_url,
    )
    .await;
    let plan = match prepared {
        Ok(mut plan) => {
            plan.signing_key = server.signing_key.clone();
            plan.compression = compression;
            plan
        }
        Err(error) => {
            tracing::warn!("bundle {id}: {error}");
            return text(
                StatusCode::BAD_GATEWAY,
                "the server failed to prepare the bundle; its log says why",
            );
        }
    };
    let (writer, reader) = tokio::io::duplex(256 * 1024);
    let server = Arc::clone(&server);
    let content_type = compression.media_type();
    tokio::spawn(async move {
        let _permit = permit;
        if let Err(error) = bundle::write(Arc::clone(&server.release), &plan, writer).await {
            // The client sees the stream end early; the compressed stream's end is missing.
            tracing::warn!("bundle {}: {error}", plan.lock.id);
        }
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}\""),
            ),
        ],
        Body::from_stream(tokio_util::io::ReaderStream::new(reader)),
    )
        .into_response()
}
