//! What goes into one package archive: every file is recorded for `package.json` as it is
//! added, under the package's root folder, and `package.json` itself goes in first.

use std::collections::BTreeMap;
use std::path::PathBuf;

use berth_formats::Sha256Digest;
use berth_formats::archive::{ReproducibleArchive, Source, WriteError};
use berth_formats::oci;
use berth_formats::package_index::{FileRecord, PACKAGE_INDEX_FILE, PackageIndex};

use super::PackageError;
use super::image_layout;
use berth_formats::release::BOM_FILE;

use super::sbom::{Scanned, Scanner};
use crate::fetch::asset::FetchedAsset;
use crate::fetch::cache::BlobCache;
use crate::fetch::image::PackagedImage;
use crate::host_packages::DistroArchives;
use crate::source::addon::AddonFile;

pub(super) struct Contents {
    root: String,
    archive: ReproducibleArchive,
    files: Vec<FileRecord>,
}

impl Contents {
    pub fn new(root: String, mtime: u64, compression: berth_formats::compression::Setting) -> Self {
        Self {
            root,
            archive: ReproducibleArchive::new(mtime, compression),
            files: Vec::new(),
        }
    }

    /// Adds one file as it is recorded. The archive refuses a path added twice, which here
    /// means two sources for one file.
    fn add(
        &mut self,
        relative: String,
        source: Source,
        digest: Sha256Digest,
        size: u64,
        executable: bool,
    ) -> Result<(), PackageError> {
        let path = format!("{}/{relative}", self.root);
        self.archive
            .insert(&path, source)
            .map_err(|error| collision_or_write(error, &relative))?;
        self.files.push(FileRecord {
            path: relative,
            size,
            sha256: digest,
            executable,
        });
        Ok(())
    }

    fn add_file(
        &mut self,
        relative: String,
        path: PathBuf,
        digest: Sha256Digest,
        size: u64,
        executable: bool,
    ) -> Result<(), PackageError> {
        let source = Source::File {
            path,
            executable,
            expected: Some(digest),
        };
        self.add(relative, source, digest, size, executable)
    }

    fn add_bytes(&mut self, relative: String, data: Vec<u8>) -> Result<(), PackageError> {
        let digest = Sha256Digest::of(&data);
        let size = data.len() as u64;
        let source = Source::Bytes {
            data,
            executable: false,
        };
        self.add(relative, source, digest, size, false)
    }

    /// Berth's own hooks, as the package's `install.sh`.
    pub fn add_builtin_hooks(&mut self, text: &str) -> Result<(), PackageError> {
        self.add_bytes("install.sh".to_string(), text.as_bytes().to_vec())
    }

    /// Berth's own health file, as the package's `health.yaml`.
    pub fn add_builtin_health(&mut self, text: &str) -> Result<(), PackageError> {
        self.add_bytes(
            berth_formats::health::HEALTH_FILE.to_string(),
            text.as_bytes().to_vec(),
        )
    }

    /// The add-on folder's files and what `dockerout` builds produced, at their own paths.
    pub fn add_addon_files(
        &mut self,
        files: impl IntoIterator<Item = AddonFile>,
    ) -> Result<(), PackageError> {
        for file in files {
            self.add_file(
                file.relative,
                file.path,
                file.digest,
                file.size,
                file.executable,
            )?;
        }
        Ok(())
    }

    /// `asset` files, under `assets/`.
    pub fn add_assets(&mut self, assets: &[FetchedAsset]) -> Result<(), PackageError> {
        for fetched in assets {
            self.add_file(
                format!("assets/{}", fetched.file),
                fetched.path.clone(),
                fetched.digest,
                fetched.size,
                false,
            )?;
        }
        Ok(())
    }

    /// The images as one OCI layout under `images/`, blobs read from the cache.
    pub fn add_images(
        &mut self,
        images: &[PackagedImage],
        cache: &BlobCache,
    ) -> Result<(), PackageError> {
        if images.is_empty() {
            return Ok(());
        }
        let images_dir = oci::IMAGES_DIR;
        self.add_bytes(
            format!("{images_dir}/{}", oci::LAYOUT_FILE),
            oci::LAYOUT_CONTENT.as_bytes().to_vec(),
        )?;
        self.add_bytes(
            format!("{images_dir}/{}", oci::INDEX_FILE),
            image_layout::layout_index(images),
        )?;
        for (digest, size) in image_layout::blobs(images) {
            self.add_file(
                format!("{images_dir}/{}/{}", oci::BLOBS_DIR, digest.hex()),
                cache.path(&digest),
                digest,
                size,
                false,
            )?;
        }
        Ok(())
    }

    /// Host packages per distro: `<distro>/Deps` when the distro has dependencies to install,
    /// `<distro>/archives/` with the package files and repository metadata. Returns the file
    /// names per distro for `package.json`.
    pub fn add_host_archives(
        &mut self,
        host_archives: Vec<DistroArchives>,
    ) -> Result<BTreeMap<String, Vec<String>>, PackageError> {
        let mut listed = BTreeMap::new();
        for archives in host_archives {
            if !archives.deps.is_empty() {
                let data = format!("{}\n", archives.deps.join("\n")).into_bytes();
                self.add_bytes(format!("{}/Deps", archives.distro), data)?;
            }
            if archives.files.is_empty() {
                continue;
            }
            let folder = format!("{}/archives", archives.distro);
            for file in &archives.files {
                self.add_file(
                    format!("{folder}/{}", file.file_name),
                    file.path.clone(),
                    file.digest,
                    file.size,
                    false,
                )?;
            }
            for (relative, data) in archives.metadata {
                self.add_bytes(format!("{folder}/{relative}"), data)?;
            }
            listed.insert(
                archives.distro,
                archives
                    .files
                    .into_iter()
                    .map(|file| file.file_name)
                    .collect(),
            );
        }
        Ok(listed)
    }

    /// The files recorded so far, sorted by path.
    pub fn files(&self) -> Vec<FileRecord> {
        let mut files = self.files.clone();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }

    /// Reads what the bill of materials needs from the files added so far, as the package
    /// will hold them: so the BOM can go inside the package it describes.
    pub fn scan(&self, index: PackageIndex) -> Result<Scanned, PackageError> {
        let mut scanner = Scanner::default();
        let prefix = format!("{}/", self.root);
        for (path, source) in self.archive.entries() {
            let Some(relative) = path.strip_prefix(&prefix) else {
                continue;
            };
            if !Scanner::reads(relative) {
                continue;
            }
            let read = match source {
                Source::File { path, .. } => fs_err::File::open(path).and_then(|mut file| {
                    let size = file.metadata()?.len();
                    scanner.file(relative, size, &mut file)
                }),
                Source::Bytes { data, .. } => {
                    scanner.file(relative, data.len() as u64, &mut data.as_slice())
                }
                Source::Directory | Source::Symlink { .. } => Ok(()),
            };
            read.map_err(|source| PackageError::Io {
                path: PathBuf::from(path),
                source,
            })?;
        }
        Ok(scanner.finish(index, None))
    }

    /// The bill of materials, inside the package.
    pub fn add_sbom(&mut self, bom: &serde_json::Value) -> Result<(), PackageError> {
        let mut bytes = serde_json::to_vec_pretty(bom).expect("a JSON value serializes");
        bytes.push(b'\n');
        self.add_bytes(BOM_FILE.to_string(), bytes)
    }

    /// Puts `package.json` first in the archive and hands the archive over for writing.
    pub fn finish(mut self, index: &PackageIndex) -> Result<ReproducibleArchive, PackageError> {
        let source = Source::Bytes {
            data: index.to_bytes(),
            executable: false,
        };
        self.archive
            .insert_lead(&format!("{}/{PACKAGE_INDEX_FILE}", self.root), source)
            .map_err(|error| collision_or_write(error, PACKAGE_INDEX_FILE))?;
        Ok(self.archive)
    }
}

fn collision_or_write(error: WriteError, relative: &str) -> PackageError {
    match error {
        WriteError::Duplicate { .. } => PackageError::Collision {
            path: relative.to_string(),
        },
        other => PackageError::Write(other),
    }
}
