//! The scripts users run (`templates/*.sh`, minijinja), rendered for one installer: its id,
//! its spec, its lock, the dist URL packages come from, and the sha256 of each node binary,
//! so the script checks the binary it downloads and the binary checks every package.

use std::collections::BTreeMap;

use berth_formats::Sha256Digest;
use berth_formats::lock::Lock;
use berth_formats::signature::SigningKey;
use minijinja::{Environment, UndefinedBehavior, context};

/// The scripts an installer has, by file name.
pub const SCRIPTS: [&str; 4] = ["install.sh", "join.sh", "upgrade.sh", "tasks.sh"];

const TEMPLATES: [(&str, &str); 5] = [
    ("common.sh", include_str!("../../../templates/common.sh")),
    ("install.sh", include_str!("../../../templates/install.sh")),
    ("join.sh", include_str!("../../../templates/join.sh")),
    ("upgrade.sh", include_str!("../../../templates/upgrade.sh")),
    ("tasks.sh", include_str!("../../../templates/tasks.sh")),
];

/// What every script of one installer is rendered with.
#[derive(Debug, Clone)]
pub struct ScriptContext {
    pub id: String,
    /// Where packages, versions.json and `bin/berth-linux-<arch>` are.
    pub dist_url: String,
    /// Where the scripts themselves are served (`<server>/<id>`), for their usage line.
    pub scripts_url: String,
    /// The spec as the user wrote it.
    pub spec: String,
    pub lock: Lock,
    pub berth_digests: BTreeMap<String, Sha256Digest>,
    /// The vendor's key, for scripts served from the vendor's server: they carry the lock's
    /// signature and the public key the node then checks the dist's signatures with, as they
    /// carry the lock. An airgap bundle's scripts carry neither: a bundle's own files cannot
    /// say which key to trust.
    pub signing_key: Option<std::sync::Arc<SigningKey>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("failed to render {script}: {message}")]
    Render { script: String, message: String },
}

/// `text` for a `#` comment: a line break would end the comment, so control characters
/// become `?`.
fn comment(text: &str) -> String {
    text.chars()
        .map(|character| {
            if character.is_control() {
                '?'
            } else {
                character
            }
        })
        .collect()
}

/// Renders `script` (one of [`SCRIPTS`]). Every value goes into the script through the `sh`
/// filter (a quoted word) or the `comment` filter.
pub fn render(script: &str, context: &ScriptContext) -> Result<String, ScriptError> {
    let mut environment = Environment::new();
    environment.add_filter("sh", |text: &str| berth_formats::shell::quote(text));
    environment.add_filter("comment", |text: &str| comment(text));
    environment.set_undefined_behavior(UndefinedBehavior::Strict);
    environment.set_keep_trailing_newline(true);
    for (name, source) in TEMPLATES {
        environment
            .add_template(name, source)
            .expect("the built-in templates parse");
    }
    let render_error = |error: minijinja::Error| ScriptError::Render {
        script: script.to_string(),
        message: error.to_string(),
    };
    let template = environment.get_template(script).map_err(render_error)?;
    let digests: BTreeMap<&str, String> = context
        .berth_digests
        .iter()
        .map(|(arch, digest)| (arch.as_str(), digest.hex()))
        .collect();
    let arches = digests.keys().copied().collect::<Vec<_>>().join(" ");
    let files: BTreeMap<&str, String> = digests
        .keys()
        .map(|arch| (*arch, berth_formats::release::berth_binary_file(arch)))
        .collect();
    let lock = String::from_utf8(context.lock.to_bytes()).expect("JSON is UTF-8");
    // The lock's bytes as the script writes them (`printf '%s\n'`), signed.
    let (lock_signature, trust_key, trust_key_name) = match &context.signing_key {
        Some(key) => {
            let written = format!("{}\n", lock.trim_end());
            let signature = key
                .sign(berth_formats::lock::LOCK_FILE, written.as_bytes())
                .map_err(|error| ScriptError::Render {
                    script: script.to_string(),
                    message: error.to_string(),
                })?;
            let name = format!(
                "vendor-{}.pub",
                key.public().fingerprint().trim_start_matches("sha256:")
            );
            (signature, key.public().to_pem(), name)
        }
        None => (String::new(), String::new(), String::new()),
    };
    let script_url = if script == "install.sh" {
        context.scripts_url.clone()
    } else {
        format!("{}/{script}", context.scripts_url)
    };
    template
        .render(context! {
            script,
            script_url,
            scripts_base_url => context.scripts_url.trim_end_matches('/'),
            id => context.id,
            dist_url => context.dist_url.trim_end_matches('/'),
            spec => context.spec.trim_end(),
            lock => lock.trim_end(),
            lock_signature,
            trust_key,
            trust_key_name,
            berth_sha256 => digests,
            berth_files => files,
            arches,
            bundle_binary => berth_formats::bundle::BINARY,
            spec_file => berth_formats::bundle::SPEC_FILE,
            lock_file => berth_formats::lock::LOCK_FILE,
        })
        .map_err(render_error)
}
