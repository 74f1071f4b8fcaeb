//! `berth-build verify-provenance`: checks a package's provenance envelope with the vendor's
//! key, builds the add-on folder again with the statement's settings, and compares the
//! package's digest with the statement's subject — the package is what its provenance says.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use berth_build::package::provenance::{BUILD_TYPE, BuildParameters};
use berth_formats::signature::{MAX_KEY_FILE_BYTES, PublicKey};

use super::FetchArgs;

#[derive(clap::Args)]
pub struct VerifyProvenanceArgs {
    /// The package's provenance (`<package>.intoto.json`, a DSSE envelope).
    provenance: PathBuf,
    /// The add-on folder it names (`addons/<name>/<version>`), to build again.
    addon: PathBuf,
    /// The vendor's public key (PEM) the envelope must be signed with (repeatable).
    #[arg(
        long = "trust-key",
        value_name = "FILE",
        visible_alias = "key",
        required = true
    )]
    trust_keys: Vec<PathBuf>,
    #[command(flatten)]
    fetch: FetchArgs,
}

pub fn run(args: VerifyProvenanceArgs) -> anyhow::Result<ExitCode> {
    let mut keys = Vec::new();
    for path in &args.trust_keys {
        let text = berth_formats::files::read_to_string_at_most(path, MAX_KEY_FILE_BYTES)
            .with_context(|| format!("failed to read the key {}", path.display()))?;
        keys.push(PublicKey::from_pem(&path.display().to_string(), &text)?);
    }
    let at = args.provenance.display().to_string();
    let text = berth_formats::files::read_to_string_at_most(&args.provenance, 16 << 20)
        .with_context(|| format!("failed to read {at}"))?;
    let envelope: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{at} is not JSON"))?;
    let statement = berth_formats::dsse::open(&at, &envelope, &keys)?;
    eprintln!("{at}: signed by a trusted key");
    let definition = &statement["predicate"]["buildDefinition"];
    if definition["buildType"] != BUILD_TYPE {
        anyhow::bail!("{at}: buildType is not {BUILD_TYPE}");
    }
    let parameters: BuildParameters =
        serde_json::from_value(definition["externalParameters"].clone())
            .with_context(|| format!("{at}: externalParameters are not Berth's"))?;
    if !args.addon.ends_with(&parameters.addon) {
        anyhow::bail!(
            "{at} is the provenance of {}; give that folder, not {}",
            parameters.addon,
            args.addon.display()
        );
    }
    let subject = &statement["subject"][0];
    let (name, expected) = (
        subject["name"].as_str().unwrap_or_default(),
        subject["digest"]["sha256"].as_str().unwrap_or_default(),
    );
    let (context, mut settings) = super::prepare(&args.fetch, false)?;
    settings.arch = parameters.arch.clone();
    settings.compression = berth_formats::compression::Setting::new(
        parameters.compression_format,
        Some(parameters.compression_level),
    )
    .map_err(|message| anyhow::anyhow!("{at}: {message}"))?;
    settings.mtime = parameters.mtime;
    settings.selected_distros.clone_from(&parameters.distros);
    settings.sbom = parameters.sbom;
    let outcome = super::runtime()?
        .block_on(berth_build::package::package(
            &context,
            &args.addon,
            &settings,
        ))
        .with_context(|| format!("failed to build {} again", args.addon.display()))?;
    let built = outcome
        .path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    if built != name || outcome.sha256.hex() != expected {
        show!(
            "FAIL  {name}: the statement says sha256:{expected}; built again: {built} sha256:{}",
            outcome.sha256.hex()
        );
        return Ok(ExitCode::FAILURE);
    }
    show!(
        "ok    {name}: built again from {}, byte for byte sha256:{expected}",
        parameters.addon
    );
    Ok(ExitCode::SUCCESS)
}
