//! Everything a Manifest names beyond its folder, fetched and verified before the archive is
//! laid out: images, assets, host packages, and what `dockerout` builds produce.

use std::path::Path;

use berth_formats::manifest::{
    AssetDirective, Directives, DockerOutDirective, ImageDirective, ImageSource,
};

use super::{BuildContext, PackageError, PackageSettings, io_error};
use crate::fetch::asset::{self, FetchedAsset};
use crate::fetch::dockerout::{DockerOutError, Engine};
use crate::fetch::image::{ImageError, ImageFetcher, ImageOrigin, ImageRequest, PackagedImage};
use crate::host_packages::fetch::Fetcher;
use crate::host_packages::{self, DistroArchives};
use crate::source::addon::{self, AddonSource};

/// The fetched inputs of one add-on. `dockerout` files live in `work`, removed when dropped.
pub(super) struct Inputs {
    pub images: Vec<PackagedImage>,
    pub assets: Vec<FetchedAsset>,
    pub host_archives: Vec<DistroArchives>,
    pub dockerout: Vec<addon::AddonFile>,
    pub work: tempfile::TempDir,
}

/// Fetches every input of `source`, in Manifest order within each kind.
pub(super) async fn gather(
    context: &BuildContext,
    source: &AddonSource,
    settings: &PackageSettings,
) -> Result<Inputs, PackageError> {
    // Every kind of directive is decided here: a new one fails to compile until it is.
    let Directives {
        images,
        assets,
        host_packages,
        builds,
    } = source.manifest.directives();
    // Every image and asset is tried, so that a mirror lacking several names them all.
    let mut failed: Vec<PackageError> = Vec::new();
    let images = match fetch_images(context, source, &images, settings).await {
        Ok(images) => images,
        Err(PackageError::Image(ImageError::Several(errors))) => {
            failed.extend(errors.into_iter().map(PackageError::Image));
            Vec::new()
        }
        Err(error) => {
            failed.push(error);
            Vec::new()
        }
    };
    let assets = fetch_assets(context, source, &assets, &mut failed).await;
    match failed.len() {
        0 => {}
        1 => return Err(failed.remove(0)),
        _ => return Err(PackageError::Inputs(failed)),
    }
    let fetcher = Fetcher {
        http: &context.http,
        cache: &context.cache,
        retry: context.retry,
    };
    let host_archives = host_packages::gather(
        &fetcher,
        &source.manifest.path,
        &host_packages,
        &settings.distros,
        settings.mtime,
    )
    .await?;
    let work = context
        .cache
        .temp_dir()
        .map_err(io_error(context.cache.root()))?;
    let dockerout = run_dockerout(
        source,
        &builds,
        work.path(),
        settings.selected_distros.as_deref(),
    )
    .await?;
    Ok(Inputs {
        images,
        assets,
        host_archives,
        dockerout,
        work,
    })
}

/// Fetches each asset, adding to `failed` those that fail.
async fn fetch_assets(
    context: &BuildContext,
    source: &AddonSource,
    directives: &[(usize, &AssetDirective)],
    failed: &mut Vec<PackageError>,
) -> Vec<FetchedAsset> {
    let mut assets = Vec::new();
    for &(line, directive) in directives {
        match asset::fetch(
            &context.http,
            &context.cache,
            context.retry,
            context.reporter.as_ref(),
            directive,
            source.local_input(line),
            &context.asset_mirrors,
        )
        .await
        {
            Ok(fetched) => assets.push(fetched),
            Err(error) => failed.push(error.into()),
        }
    }
    assets
}

async fn fetch_images(
    context: &BuildContext,
    source: &AddonSource,
    directives: &[(usize, &ImageDirective)],
    settings: &PackageSettings,
) -> Result<Vec<PackagedImage>, PackageError> {
    let requests: Vec<ImageRequest> = directives
        .iter()
        .map(|&(line, image)| ImageRequest {
            name: image.name.clone(),
            source: match &image.source {
                ImageSource::Registry(reference) => ImageOrigin::Registry(reference.clone()),
                ImageSource::Archive(_) => ImageOrigin::Archive(
                    source
                        .local_input(line)
                        .expect("archive paths are resolved on load")
                        .path
                        .clone(),
                ),
            },
            no_remote_load: image.no_remote_load,
        })
        .collect();
    let fetcher = ImageFetcher {
        client: &context.registry,
        cache: &context.cache,
        arch: &settings.arch,
        concurrency: settings.concurrency,
        reporter: context.reporter.as_ref(),
    };
    Ok(fetcher.fetch(&requests).await?)
}

/// Runs each `dockerout` directive into `work/<n>` and lists the files it produced, placed
/// under the directive's destination.
async fn run_dockerout(
    source: &AddonSource,
    directives: &[(usize, &DockerOutDirective)],
    work: &Path,
    selected: Option<&[String]>,
) -> Result<Vec<addon::AddonFile>, PackageError> {
    let builds: Vec<_> = directives
        .iter()
        .copied()
        .filter(|(_, build)| {
            let wanted = builds_for_selected_distros(&build.destination, selected);
            if !wanted {
                tracing::info!("dockerout {}: not a selected distro", build.destination);
            }
            wanted
        })
        .collect();
    if builds.is_empty() {
        return Ok(Vec::new());
    }
    let manifest_path = source.manifest.path.clone();
    let failure = |line: usize, destination: &str, error: DockerOutError| PackageError::DockerOut {
        manifest: manifest_path.clone(),
        line,
        destination: destination.to_string(),
        source: error,
    };
    let engine =
        Engine::detect().map_err(|error| failure(builds[0].0, &builds[0].1.destination, error))?;
    let mut files = Vec::new();
    for (number, (line, build)) in builds.into_iter().enumerate() {
        let out = work.join(number.to_string());
        fs_err::create_dir_all(&out).map_err(io_error(&out))?;
        let dockerfile = source
            .local_input(line)
            .expect("Dockerfile paths are resolved on load")
            .clone();
        let tag = format!(
            "localhost/berth-dockerout-{}:{}",
            sanitize(&format!(
                "{}-{}-{}",
                source.name, source.version, build.destination
            )),
            &dockerfile.digest.hex()[..16]
        );
        tracing::info!("dockerout {} with {}", build.destination, engine.name());
        let engine = engine.clone();
        let version = build.version.clone();
        let out_dir = out.clone();
        tokio::task::spawn_blocking(move || {
            engine.build_and_run(&dockerfile.path, version.as_deref(), &tag, &out_dir)
        })
        .await
        .expect("dockerout does not panic")
        .map_err(|error| failure(line, &build.destination, error))?;
        for entry in walkdir::WalkDir::new(&out).sort_by_file_name() {
            let entry = entry.map_err(|error| PackageError::Io {
                path: out.clone(),
                source: error.into(),
            })?;
            if entry.file_type().is_file() {
                let relative = entry
                    .path()
                    .strip_prefix(&out)
                    .expect("below out")
                    .to_string_lossy();
                let destination = build.destination.trim_end_matches('/');
                files.push(addon::hash_file(
                    entry.path(),
                    format!("{destination}/{relative}"),
                )?);
            }
        }
    }
    Ok(files)
}

fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// Whether a `dockerout` into `destination` is built: always, unless `--distro` selected
/// distros and the destination is the folder of another (kURL names them `<distro>-<version>`:
/// `ubuntu-22.04`, `rhel-7-force`).
fn builds_for_selected_distros(destination: &str, selected: Option<&[String]>) -> bool {
    let Some(selected) = selected else {
        return true;
    };
    let folder = destination
        .trim_matches('/')
        .split('/')
        .next()
        .unwrap_or("");
    let is_distro_folder = folder.split_once('-').is_some_and(|(name, rest)| {
        !name.is_empty()
            && name.bytes().all(|byte| byte.is_ascii_lowercase())
            && rest.starts_with(|c: char| c.is_ascii_digit())
    });
    !is_distro_folder || selected.iter().any(|distro| distro == folder)
}

#[cfg(test)]
mod tests {
    use super::builds_for_selected_distros;

    #[test]
    fn dockerout_into_another_distros_folder_is_skipped_when_distros_are_selected() {
        let selected = vec!["debian-12".to_string(), "rhel-9".to_string()];
        for (destination, built) in [
            ("rhel-9", true),
            ("rhel-9/", true),
            ("rhel-7-force", false),
            ("ubuntu-22.04", false),
            ("debian-12/extra", true),
            ("bin", true),
            ("assets/tools", true),
        ] {
            assert_eq!(
                builds_for_selected_distros(destination, Some(&selected)),
                built,
                "{destination}"
            );
        }
        assert!(builds_for_selected_distros("ubuntu-22.04", None));
    }
}
