//! Before an add-on's hooks run: its package fetched (or taken from an airgap bundle or this
//! node's cache), checked and unpacked, and its images loaded into the container runtime.

use super::*;

impl Run<'_> {
    /// Whether the run needs `member`'s package: it applies, or its folder is not in place.
    pub(super) fn needs_package(&self, member: &Member) -> bool {
        member.planned.decision.applies()
            || !self
                .settings
                .layout
                .addon_dir(&member.planned.name, &member.planned.version)
                .join("install.sh")
                .exists()
    }

    /// A bundle arriving as a stream: the packages this run needs are received now, each file
    /// checked as it comes; those it needs not are passed over.
    pub(super) fn receive_bundle(&self, reporter: &dyn Reporter) -> Result<(), EngineError> {
        let Some(arriving) = self
            .settings
            .bundle
            .as_ref()
            .and_then(|bundle| bundle.take())
        else {
            return Ok(());
        };
        let started = Instant::now();
        let in_place = |addon: &berth_formats::lock::LockedAddon| {
            self.members
                .iter()
                .find(|member| {
                    member.planned.name == addon.name
                        && member.planned.version == addon.version
                        && !self.needs_package(member)
                })
                .map(|_| self.settings.layout.addon_dir(&addon.name, &addon.version))
        };
        let received = arriving.receive(&self.settings.trust, &in_place)?;
        reporter.step(&format!(
            "bundle: {} packages received, {} passed over (in place on this node) ({:.1}s)",
            received.written,
            received.in_place,
            started.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    /// Fetches a package into the cache and checks it against its (signed) digest — a bundled
    /// one, each of its files against its index — unpacking nothing: with trusted keys, every
    /// package passes this before any is unpacked.
    pub(super) fn fetch_checked(&self, index: usize) -> Result<(), EngineError> {
        let layout = &self.settings.layout;
        let planned = self.members[index].planned;
        let (name, version) = (planned.name.as_str(), planned.version.as_str());
        if let (Dist::Local(bundle), Some(index_digest)) =
            (&self.settings.dist, planned.bundled_index)
            && bundled_package(bundle, name, version).is_dir()
        {
            return crate::dist::unpack::check_bundled(bundle, &index_digest, (name, version))
                .map_err(|source| EngineError::Unpack {
                    name: name.to_string(),
                    version: version.to_string(),
                    source,
                });
        }
        let file = planned.package_file();
        let cache = layout.package_cache();
        fs_err::create_dir_all(&cache).map_err(io_error(&cache))?;
        let cached = cache.join(&file);
        let expected = planned.target.package_digest;
        if cached_digest(layout, &file) != Some(expected) || !cached.exists() {
            if self.settings.reuse_unpacked {
                return Ok(());
            }
            self.settings
                .dist
                .fetch(&file, &cached)
                .map_err(|source| EngineError::Fetch {
                    name: name.to_string(),
                    version: version.to_string(),
                    source,
                })?;
        }
        let actual = Sha256Digest::of_file(&cached).map_err(io_error(&cached))?;
        if actual != expected {
            let _ = fs_err::remove_file(&cached);
            return Err(EngineError::Unpack {
                name: name.to_string(),
                version: version.to_string(),
                source: crate::dist::unpack::UnpackError::Mismatch {
                    package: cached,
                    expected,
                    actual,
                },
            });
        }
        // Recorded as checked: the unpack that follows takes this copy, not a second download.
        let checksum = berth_formats::package_index::checksum_file_text(&expected, &file);
        fs_err::write(cache.join(checksum_file(&file)), checksum).map_err(io_error(&cache))?;
        Ok(())
    }
}

/// Fetches (or takes from the bundle or this node's cache), checks and unpacks one add-on's
/// package into place. It reads the run's settings alone, so several run at once.
pub(super) fn fetch(
    settings: &RunSettings,
    planned: &PlannedAddon,
) -> Result<PackageIndex, EngineError> {
    {
        let layout = &settings.layout;
        let (name, version) = (planned.name.as_str(), planned.version.as_str());
        let file = planned.package_file();
        let cache = layout.package_cache();
        fs_err::create_dir_all(&cache).map_err(io_error(&cache))?;
        let cached = cache.join(&file);
        let expected: Sha256Digest = planned.target.package_digest;
        let fetch_error = |source| EngineError::Fetch {
            name: name.to_string(),
            version: version.to_string(),
            source,
        };
        // An airgap bundle carries the package unpacked, checked through the lock's digest of
        // its index.
        if let (Dist::Local(bundle), Some(index_digest)) = (&settings.dist, planned.bundled_index)
            && bundled_package(bundle, name, version).is_dir()
        {
            let staging = layout.work_dir().join(format!("unpack-{name}-{version}"));
            return unpack_bundled(
                bundle,
                &index_digest,
                (name, version),
                &staging,
                &layout.install_dir(),
                settings.bundle.is_some(),
            )
            .map_err(|source| EngineError::Unpack {
                name: name.to_string(),
                version: version.to_string(),
                source,
            });
        }
        let unpacked = layout.addon_dir(name, version);
        if settings.reuse_unpacked && !cached.exists() {
            return read_unpacked(&unpacked).map_err(|source| EngineError::Unpack {
                name: name.to_string(),
                version: version.to_string(),
                source,
            });
        }
        // A cached package is trusted only as far as its digest; unpack checks it again.
        if cached_digest(layout, &file) != Some(expected) {
            settings.dist.fetch(&file, &cached).map_err(fetch_error)?;
        }
        let staging = layout.work_dir().join(format!("unpack-{name}-{version}"));
        let result = unpack(
            &cached,
            &expected,
            (name, version),
            &staging,
            &layout.install_dir(),
        );
        match result {
            Ok(index) => {
                let checksum = berth_formats::package_index::checksum_file_text(&expected, &file);
                fs_err::write(cache.join(checksum_file(&file)), checksum)
                    .map_err(io_error(&cache))?;
                Ok(index)
            }
            Err(source) => {
                // A package that fails its check is not kept: the next run fetches it again.
                let _ = fs_err::remove_file(&cached);
                let _ = fs_err::remove_file(cache.join(checksum_file(&file)));
                Err(EngineError::Unpack {
                    name: name.to_string(),
                    version: version.to_string(),
                    source,
                })
            }
        }
    }
}

impl Run<'_> {
    /// Starts every applying add-on's image import in the background, when nothing of the
    /// run installs the runtime and it already answers (see [`super::imports`]).
    pub(super) fn import_ahead(&mut self) {
        let applying = |member: &Member| member.planned.decision.applies();
        if self
            .members
            .iter()
            .any(|member| applying(member) && installs_runtime(&member.planned.name))
        {
            return;
        }
        let jobs: Vec<super::imports::Job> = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, member)| applying(member))
            .filter_map(|(index, member)| {
                let package = member.index.as_ref()?;
                (!package.images.is_empty()).then(|| super::imports::Job {
                    member: index,
                    layout: self
                        .settings
                        .layout
                        .addon_dir(&member.planned.name, &member.planned.version)
                        .join("images"),
                    images: package.images.clone(),
                })
            })
            .collect();
        if jobs.is_empty() {
            return;
        }
        if let Some(runtime) = Runtime::detect() {
            self.imports.start(&runtime, jobs);
        }
    }

    /// Records what the imports still running ahead imported, for a run that stops: a reset
    /// then knows every image Berth brought.
    pub(super) fn record_imports_ahead(&mut self) {
        for (index, result) in self.imports.drain() {
            if let Ok((imported, _)) = result
                && !imported.is_empty()
            {
                let member = &mut self.members[index];
                member.state.imported_images.extend(imported);
                let _ = self.store.save(&member.state);
            }
        }
    }

    pub(super) fn load_images(
        &mut self,
        index: usize,
        runtime: &mut Option<Runtime>,
        reporter: &dyn Reporter,
    ) -> Result<(), EngineError> {
        let member = &self.members[index];
        let Some(package) = &member.index else {
            return Ok(());
        };
        if package.images.is_empty() {
            return Ok(());
        }
        let (name, version) = (member.planned.name.clone(), member.planned.version.clone());
        // Detected once it answers: until then an earlier add-on may still be installing it.
        if runtime.is_none() {
            *runtime = Runtime::detect();
        }
        let images_error = |source| EngineError::Images {
            name: name.clone(),
            version: version.clone(),
            source,
        };
        let Some(runtime) = runtime else {
            return Err(images_error(ImageError::NoRuntime {
                addon: name.clone(),
            }));
        };
        let layout = self
            .settings
            .layout
            .addon_dir(&name, &version)
            .join("images");
        let count = package.images.len();
        let (imported, took, ahead) = match self.imports.wait(index) {
            Some(Ok((imported, took))) => (imported, took, true),
            // Started ahead and failed (the runtime restarted meanwhile?): done again here,
            // where its error is the run's. What was missing before the first try is what
            // Berth brought, whatever that try left.
            failed => {
                let before = match failed {
                    Some(Err((_, before))) => before,
                    _ => Vec::new(),
                };
                let started = Instant::now();
                let mut imported = runtime
                    .load(&layout, &package.images)
                    .map_err(images_error)?;
                for reference in before {
                    if !imported.contains(&reference) {
                        imported.push(reference);
                    }
                }
                (imported, started.elapsed(), false)
            }
        };
        reporter.step(&format!(
            "{name} {version}: {count} image(s) {} ({:.1}s{})",
            if imported.is_empty() {
                "already present"
            } else {
                "imported"
            },
            took.as_secs_f64(),
            if ahead { ", ahead of the hooks" } else { "" }
        ));
        // Recorded at once: a reset after a failed hook still knows what Berth brought.
        if !imported.is_empty() {
            let member = &mut self.members[index];
            member.state.imported_images.extend(imported);
            self.store.save(&member.state)?;
        }
        Ok(())
    }
}
