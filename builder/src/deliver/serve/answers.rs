//! How serve answers a failure: plain text, or `{"error", "status"}` JSON for a client that
//! asks for JSON; what the client learns of the store and the server's own troubles.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::Server;
use crate::deliver::installers::InstallerError;
use crate::publish::release::ReleaseError;
use crate::publish::store::StoreError;

/// An error answered as `{"error": "…"}` to a client whose `Accept` asks for JSON, as plain
/// text to any other: every handler (and axum's own refusals) writes the text once.
pub(super) async fn json_errors(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let json = wants_json(request.headers());
    let response = next.run(request).await;
    let failed = response.status().is_client_error() || response.status().is_server_error();
    let content_type = response.headers().get(header::CONTENT_TYPE);
    // axum's own refusals (405, say) come with no body: they get one that says why.
    if failed && content_type.is_none() {
        let status = response.status();
        let allowed = response
            .headers()
            .get(header::ALLOW)
            .and_then(|value| value.to_str().ok())
            .map(|allowed| format!("; this path takes {allowed}"))
            .unwrap_or_default();
        let mut said = text(
            status,
            format!(
                "{} {}{allowed}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("error")
            ),
        );
        for (name, value) in response.headers() {
            if name != header::CONTENT_LENGTH {
                said.headers_mut().insert(name.clone(), value.clone());
            }
        }
        said.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        return if json { as_json(said).await } else { said };
    }
    let plain = content_type
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/plain"));
    if !(json && failed && plain) {
        return response;
    }
    as_json(response).await
}

/// A plain-text failure as `{"error", "status"}`.
async fn as_json(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let status = parts.status;
    let message = match axum::body::to_bytes(body, 64 * 1024).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim_end().to_string(),
        Err(_) => status.to_string(),
    };
    let body = serde_json::json!({ "error": message, "status": status.as_u16() }).to_string();
    // Every other header (`Retry-After` on a 503) stays as the handler set it.
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// A JSON document answered with `status`.
pub(super) fn json(status: StatusCode, value: &serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

pub(super) fn text(status: StatusCode, body: impl Into<String>) -> Response {
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

/// A release error as the client should see it: what is missing is 404, the rest 502. The
/// store's own location (a local path, a bucket) is the server's business: it is logged, and
/// the client sees the file's name in the release.
pub(super) fn release_error(server: &Server, error: ReleaseError) -> Response {
    let status = match &error {
        ReleaseError::Versions(_) => StatusCode::BAD_REQUEST,
        ReleaseError::Missing { .. } | ReleaseError::Store(StoreError::Missing { .. }) => {
            StatusCode::NOT_FOUND
        }
        _ => StatusCode::BAD_GATEWAY,
    };
    tracing::warn!("{error}");
    if status == StatusCode::BAD_GATEWAY {
        return text(
            status,
            "the server failed to read its release; its log says why",
        );
    }
    let store_root = server.release.store.describe(&server.release.key(""));
    text(status, error.to_string().replace(&store_root, ""))
}

pub(super) fn installer_error(error: InstallerError) -> Response {
    let status = match &error {
        InstallerError::Full { .. } => StatusCode::INSUFFICIENT_STORAGE,
        InstallerError::ShareUsed { retry_after, .. } => {
            let mut response = text(StatusCode::TOO_MANY_REQUESTS, error.to_string());
            if let Ok(value) =
                header::HeaderValue::from_str(&retry_after.as_secs().max(1).to_string())
            {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
        InstallerError::Conflict { .. } => StatusCode::CONFLICT,
        InstallerError::Damaged { .. } | InstallerError::Io { .. } => {
            tracing::warn!("{error}");
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the server failed to keep or read the installer; its log says why",
            );
        }
    };
    text(status, error.to_string())
}

pub(super) fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|accept| accept.contains("application/json"))
}
