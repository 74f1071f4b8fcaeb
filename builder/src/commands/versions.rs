use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use berth_build::package::build::{RepositoryVersions, repository_versions};

#[derive(clap::Args)]
pub struct VersionsArgs {
    /// The `addons` folder, or the repository holding it.
    #[arg(default_value = "addons")]
    addons: PathBuf,
    /// Change nothing: exit 1, saying what differs, when versions.json is not current.
    #[arg(long)]
    check: bool,
}

pub fn run(args: VersionsArgs) -> anyhow::Result<ExitCode> {
    let RepositoryVersions {
        path,
        existing,
        generated,
        rules,
    } = repository_versions(&args.addons)?;
    // What `latest` means for each add-on, and the rule that says so.
    for (name, rule) in &rules {
        let latest = generated
            .addon(name)
            .and_then(|addon| addon.versions.first())
            .map_or("", |entry| entry.version.as_str());
        eprintln!("{name}: latest is {latest} ({rule})");
    }
    // Every range must read as semver before the file is written or passed.
    for addon in &generated.addons {
        for entry in &addon.versions {
            if let Some(range) = &entry.kubernetes_version {
                semver::VersionReq::parse(range).with_context(|| {
                    format!(
                        "{}: {} {}: kubernetesVersion `{range}` is not a semver range",
                        path.display(),
                        addon.name,
                        entry.version
                    )
                })?;
            }
        }
    }
    if existing.as_ref() == Some(&generated) {
        eprintln!("{} is current", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    if args.check {
        eprintln!("{} is not current:", path.display());
        let listed = |file: Option<&berth_formats::versions::VersionsFile>| -> Vec<String> {
            file.map(|file| {
                file.addons
                    .iter()
                    .flat_map(|addon| {
                        addon
                            .versions
                            .iter()
                            .map(move |entry| format!("{} {}", addon.name, entry.version))
                    })
                    .collect()
            })
            .unwrap_or_default()
        };
        let (now, wanted) = (listed(existing.as_ref()), listed(Some(&generated)));
        for missing in wanted.iter().filter(|entry| !now.contains(entry)) {
            eprintln!("  missing: {missing}");
        }
        for extra in now.iter().filter(|entry| !wanted.contains(entry)) {
            eprintln!("  no folder: {extra}");
        }
        if now.iter().all(|entry| wanted.contains(entry))
            && wanted.iter().all(|entry| now.contains(entry))
        {
            eprintln!("  the order differs (see each add-on's rule above)");
        }
        eprintln!(
            "hint: run `berth-build versions {}` to rewrite it",
            args.addons.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    fs_err::write(&path, generated.to_bytes())?;
    eprintln!("wrote {}", path.display());
    Ok(ExitCode::SUCCESS)
}
