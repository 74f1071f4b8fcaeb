//! Host preflights: troubleshoot.sh `HostPreflight` documents, templated with `{{kurl …}}` as
//! kURL templates them, and run natively: every collector and analyzer in Rust, no
//! `preflight` binary. The installer runs them before any hook changes a node; add-on
//! authors run a file directly with `berth preflight FILE`. The same engine collects
//! support bundles ([`support_bundle`]) from `SupportBundle` documents.

pub mod checks;
pub mod context;
pub mod document;
mod remote_hosts;
pub mod report;
pub mod run;
mod semver_range;
pub mod support_bundle;
pub mod template;

use std::path::Path;

pub use checks::Limits;
pub use context::{Role, TemplateContext};
pub use document::{Document, DocumentKind, Origin};
pub use remote_hosts::{hosts_from_params, remote_host_checks};
pub use report::{CheckResult, Outcome, Report};
pub use run::run;

/// Berth's own checks of the host, run unless `kurl.excludeBuiltinHostPreflights`.
pub const BUILTIN: &str = include_str!("../builtin/host-preflights.yaml");

/// Why a document could not be run.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("host preflight {at}: {message}")]
    Invalid { at: String, message: String },
    #[error("host preflight {at}: {message}")]
    Template { at: String, message: String },
    #[error("host preflight {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// A document from its text: `{{kurl …}}` rendered against `context`, then read.
pub fn load_text(
    origin: Origin,
    text: &str,
    context: &TemplateContext,
) -> Result<Document, PreflightError> {
    if text.len() > document::MAX_DOCUMENT_BYTES {
        return Err(PreflightError::Invalid {
            at: origin.at(None),
            message: format!(
                "{} bytes, more than the {} a host preflight may be",
                text.len(),
                document::MAX_DOCUMENT_BYTES
            ),
        });
    }
    let rendered = template::render_kurl(&origin.name, text, &context.data()).map_err(|error| {
        PreflightError::Template {
            at: origin.at(template_line(&error)),
            message: format!(
                "{error}; `{{{{kurl …}}}}` actions are Go templates over .Installer, .IsPrimary, \
                 .IsJoin, .IsUpgrade, .PrimaryHosts, .SecondaryHosts and .RemoteHosts"
            ),
        }
    })?;
    Document::parse(origin, &rendered)
}

/// A document from a file.
pub fn load_file(
    name: &str,
    path: &Path,
    context: &TemplateContext,
) -> Result<Document, PreflightError> {
    use std::io::Read;
    let mut text = String::new();
    fs_err::File::open(path)
        .and_then(|file| {
            file.take(document::MAX_DOCUMENT_BYTES as u64 + 1)
                .read_to_string(&mut text)
        })
        .map_err(|source| PreflightError::Read {
            path: path.display().to_string(),
            source,
        })?;
    load_text(Origin::new(name, Some(path.to_path_buf())), &text, context)
}

/// `spec.kurl.hostPreflights`: kURL writes it out as YAML and templates it as a file.
pub fn load_value(
    name: &str,
    value: &serde_json::Value,
    context: &TemplateContext,
) -> Result<Document, PreflightError> {
    let text = serde_norway::to_string(value).map_err(|error| PreflightError::Invalid {
        at: name.to_string(),
        message: error.to_string(),
    })?;
    load_text(Origin::new(name, None), &text, context)
}

fn template_line(error: &gotmpl::TemplateError) -> Option<usize> {
    match error {
        gotmpl::TemplateError::Parse { line, .. } | gotmpl::TemplateError::Lex { line, .. } => {
            Some(*line)
        }
        _ => None,
    }
}
