//! The grid's inputs, read as kURL's testgrid writes them: test specs (`testgrid/specs/*.yaml`,
//! `addons/<name>/template/testgrid/*.yaml`) and OS specs (`os-*.yaml`), with Berth's few
//! additions, each named where it is declared. Fields neither knows are refused with their
//! name, as a typo in a grid must not silently run a different test.

use std::path::Path;

use serde::Deserialize;

/// Grid files are small: a bound keeps a crafted file from taking the runner's memory.
const MAX_SPEC_BYTES: u64 = 4 << 20;

/// One test: what to install, on how many nodes, and the scripts around it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestSpec {
    pub name: String,
    /// The Installer's `spec` (kURL's testgrid writes the spec alone, without its envelope).
    pub installer_spec: serde_norway::Value,
    /// The spec every node is upgraded to after the install, when given.
    #[serde(default)]
    pub upgrade_spec: Option<serde_norway::Value>,
    /// Install from the airgap bundle, with no route to the server.
    #[serde(default)]
    pub airgap: bool,
    #[serde(default = "one")]
    pub num_primary_nodes: u32,
    #[serde(default)]
    pub num_secondary_nodes: u32,
    /// Run on every node before the install.
    #[serde(default)]
    pub pre_install_script: String,
    /// Run on the first primary after every node installed or joined.
    #[serde(default)]
    pub post_install_script: String,
    /// Run on the first primary after every node upgraded.
    #[serde(default)]
    pub post_upgrade_script: String,
    /// Words for the install and join scripts (`yes`, `key=value`, …).
    #[serde(default)]
    pub flags: String,
    /// OS ids (the OS spec's `id`) this test does not run on.
    #[serde(default, rename = "unsupportedOSIDs")]
    pub unsupported_os_ids: Vec<String>,
    /// Berth's: reboot every secondary after the post-install script, wait for it, and check
    /// that what was installed is still healthy there.
    #[serde(default)]
    pub reboot_secondaries: bool,
    /// Berth's: run on each rebooted secondary once it is back.
    #[serde(default)]
    pub post_reboot_script: String,
    /// Fields this grid does not read: kURL's own infrastructure (`installerApiEndpoint`,
    /// `cpu`, `memory`, …) and anything else, which is named in a warning.
    #[serde(flatten)]
    pub other: std::collections::BTreeMap<String, serde_norway::Value>,
}

fn one() -> u32 {
    1
}

/// kURL's test-spec fields about its own infrastructure, which a grid here has no use for:
/// read without a warning.
const KURL_INFRASTRUCTURE: [&str; 7] = [
    "installerApiEndpoint",
    "cpu",
    "memory",
    "kurlUrl",
    "upgradeUrl",
    "supportbundleYaml",
    "id",
];

impl TestSpec {
    /// The fields of this test the grid does not read (a typo, or a newer kURL's), each named.
    pub fn ignored_fields(&self) -> Vec<&str> {
        self.other
            .keys()
            .map(String::as_str)
            .filter(|field| !KURL_INFRASTRUCTURE.contains(field))
            .collect()
    }
}

/// One operating system a test runs on.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OsSpec {
    pub id: String,
    pub name: String,
    pub version: String,
    /// A cloud image (kURL's); the `qemu` provider boots Berth's `debootstrap` images only.
    #[serde(default, rename = "vmimageuri")]
    pub vm_image_uri: Option<String>,
    /// Run on every node once it boots, before the test's own scripts.
    #[serde(default)]
    pub preinit: String,
    /// Berth's: the Debian suite the `qemu` provider builds this OS from with debootstrap
    /// (`bullseye`, `bookworm`, `trixie`).
    #[serde(default)]
    pub debootstrap: Option<String>,
    /// Berth's: packages the image has from the start (a VM here reaches no mirror).
    #[serde(default)]
    pub packages: Vec<String>,
}

impl OsSpec {
    /// `Name Version` as kURL's grid shows an OS.
    pub fn title(&self) -> String {
        format!("{} {}", self.name, self.version)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file} is {size} bytes; a grid file may have at most {MAX_SPEC_BYTES}")]
    TooLarge { file: String, size: u64 },
    #[error("{file}: {source}")]
    Parse {
        file: String,
        source: serde_norway::Error,
    },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
}

fn read_bounded(path: &Path) -> Result<String, SpecError> {
    let file = path.display().to_string();
    let size = fs_err::metadata(path)
        .map_err(|source| SpecError::Read {
            file: file.clone(),
            source,
        })?
        .len();
    if size > MAX_SPEC_BYTES {
        return Err(SpecError::TooLarge { file, size });
    }
    fs_err::read_to_string(path).map_err(|source| SpecError::Read { file, source })
}

/// A name that becomes a folder of the report: letters, digits, `.`, `-` and `_`.
pub fn is_plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// The tests of a test-spec file, checked.
pub fn read_tests(path: &Path) -> Result<Vec<TestSpec>, SpecError> {
    let file = path.display().to_string();
    let text = read_bounded(path)?;
    let tests: Vec<TestSpec> =
        serde_norway::from_str(&text).map_err(|source| SpecError::Parse {
            file: file.clone(),
            source,
        })?;
    let invalid = |message: String| SpecError::Invalid {
        file: file.clone(),
        message,
    };
    let mut names = std::collections::BTreeSet::new();
    for test in &tests {
        if test.name.trim().is_empty() || test.name.len() > 200 {
            return Err(invalid(
                "a test needs a name of 1 to 200 characters".to_string(),
            ));
        }
        if !names.insert(test.name.as_str()) {
            return Err(invalid(format!("two tests are named `{}`", test.name)));
        }
        if test.num_primary_nodes == 0 || test.num_primary_nodes + test.num_secondary_nodes > 16 {
            return Err(invalid(format!(
                "`{}`: a test runs on 1 to 16 nodes, with at least one primary",
                test.name
            )));
        }
        if !test.installer_spec.is_mapping() {
            return Err(invalid(format!(
                "`{}`: installerSpec is the Installer's spec, a mapping of add-ons",
                test.name
            )));
        }
    }
    Ok(tests)
}

/// The operating systems of an OS-spec file, checked.
pub fn read_oses(path: &Path) -> Result<Vec<OsSpec>, SpecError> {
    let file = path.display().to_string();
    let text = read_bounded(path)?;
    let oses: Vec<OsSpec> = serde_norway::from_str(&text).map_err(|source| SpecError::Parse {
        file: file.clone(),
        source,
    })?;
    let mut ids = std::collections::BTreeSet::new();
    for os in &oses {
        if !is_plain_id(&os.id) {
            return Err(SpecError::Invalid {
                file: file.clone(),
                message: format!(
                    "OS id `{}`: use letters, digits, `.`, `-` and `_` (at most 64)",
                    os.id
                ),
            });
        }
        if !ids.insert(os.id.as_str()) {
            return Err(SpecError::Invalid {
                file: file.clone(),
                message: format!("two OSes have the id `{}`", os.id),
            });
        }
    }
    Ok(oses)
}

/// The Installer a test's spec stands for, as Berth reads it.
pub fn installer_yaml(test: &str, spec: &serde_norway::Value) -> String {
    let mut document = serde_norway::Mapping::new();
    document.insert("apiVersion".into(), "cluster.kurl.sh/v1beta1".into());
    document.insert("kind".into(), "Installer".into());
    let mut metadata = serde_norway::Mapping::new();
    metadata.insert("name".into(), cell_slug(test).into());
    document.insert("metadata".into(), metadata.into());
    document.insert("spec".into(), spec.clone());
    serde_norway::to_string(&document).expect("a YAML value serialises")
}

/// A test's name as a folder and an Installer name: lower case, runs of anything else as `-`.
pub fn cell_slug(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    let mut slug: String = slug.chars().take(60).collect();
    if slug.is_empty() {
        slug.push_str("test");
    }
    slug
}

/// A test's folder in a report (`cells/<this>/<os>`), one of its own for each name: its slug
/// alone when the name is its slug (`online`, `k8s-ctrd-latest`), else its slug (at most 55
/// characters) then `_` and 8 hex digits of the SHA-256 of the whole name
/// (`basic-containerd_fa65a27c`). No slug has a `_`, so a name that is its own slug never
/// shares its folder with another, as `a-b` and `a b` or two names alike in their first 60
/// characters would share their slug; two other names share one only when their hashes agree,
/// which `merge` refuses. It depends on the name alone, so every shard and run agree on it.
pub fn cell_folder_name(name: &str) -> String {
    use sha2::Digest as _;
    let slug = cell_slug(name);
    if slug == name {
        return slug;
    }
    let readable: String = slug.chars().take(55).collect();
    let digest = sha2::Sha256::digest(name.as_bytes());
    format!(
        "{}_{}",
        readable.trim_end_matches('-'),
        hex::encode(&digest[..4])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        fs_err::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn kurls_own_addon_testgrid_spec_reads() {
        let path = berth_testkit::kurl_fixtures(
            "kurl-addons/addons/containerd/template/testgrid/k8s-ctrd.yaml",
        );
        let tests = read_tests(&path).unwrap();
        assert!(tests.len() >= 2, "{tests:?}");
        assert!(tests[0].airgap);
        assert!(tests[0].post_install_script.contains("config.toml"));
        assert!(tests.iter().any(|test| test.upgrade_spec.is_some()));
    }

    /// This repository's own grid files (`testgrid/specs`): OS specs (`os-*.yaml`) and test
    /// specs read, with no field the grid would ignore, and the Kubernetes tests all get the
    /// one check their file writes once (a YAML alias).
    #[test]
    fn the_repositorys_own_grid_files_read() {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs");
        let mut tests_read = 0;
        for entry in fs_err::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("os-") {
                assert!(!read_oses(&path).unwrap().is_empty(), "{name}");
                continue;
            }
            let tests = read_tests(&path).unwrap_or_else(|error| panic!("{name}: {error}"));
            for test in &tests {
                assert!(test.ignored_fields().is_empty(), "{name}: {test:?}");
                if name.starts_with("kubernetes") {
                    assert!(
                        test.post_install_script
                            .contains("kubectl rollout status daemonset/reach"),
                        "{name}: {}",
                        test.name
                    );
                }
            }
            tests_read += tests.len();
        }
        assert!(
            tests_read >= 8,
            "{tests_read} tests in {}",
            folder.display()
        );
    }

    #[test]
    fn a_misspelt_field_is_named_and_kurls_infrastructure_is_not() {
        let file = write(
            "- name: a\n  installerSpec: {demo: {version: 1.0.0}}\n  airgapp: true\n  installerApiEndpoint: https://kurl.sh\n",
        );
        let tests = read_tests(file.path()).unwrap();
        assert!(!tests[0].airgap);
        assert_eq!(tests[0].ignored_fields(), ["airgapp"]);
    }

    #[test]
    fn duplicate_names_and_bad_ids_are_refused() {
        let file = write("- name: a\n  installerSpec: {}\n- name: a\n  installerSpec: {}\n");
        assert!(
            read_tests(file.path())
                .unwrap_err()
                .to_string()
                .contains("two tests")
        );
        let file = write("- id: ../etc\n  name: x\n  version: '1'\n");
        assert!(
            read_oses(file.path())
                .unwrap_err()
                .to_string()
                .contains("OS id")
        );
    }

    #[test]
    fn slugs_are_plain() {
        assert_eq!(
            cell_slug("basic containerd, 1.32 → 1.33"),
            "basic-containerd-1-32-1-33"
        );
        assert_eq!(cell_slug("../.."), "test");
        assert!(is_plain_id(&cell_slug(&"x".repeat(500))));
    }

    #[test]
    fn names_of_one_slug_get_folders_of_their_own() {
        // A name that is its own slug keeps it: reports and links stay as they were.
        assert_eq!(cell_folder_name("online"), "online");
        assert_eq!(cell_folder_name("k8s-ctrd-1-32"), "k8s-ctrd-1-32");
        // Names that read alike differ in their folders, each still readable and plain.
        let long = "x".repeat(60);
        let names = [
            "a b".to_string(),
            "a-b".to_string(),
            "A B".to_string(),
            "a_b".to_string(),
            format!("{long} one"),
            format!("{long} two"),
            long.clone(),
            format!("{long}y"),
            "../..".to_string(),
            "test".to_string(),
        ];
        let folders: std::collections::BTreeSet<String> =
            names.iter().map(|name| cell_folder_name(name)).collect();
        assert_eq!(folders.len(), names.len(), "{folders:?}");
        for name in &names {
            let folder = cell_folder_name(name);
            assert!(is_plain_id(&folder), "{folder}");
            assert!(folder.starts_with(&cell_slug(name)[..cell_slug(name).len().min(50)]));
        }
        assert!(cell_folder_name("a b").starts_with("a-b_"));
        // Stable: the same name gives the same folder in every shard and run.
        assert_eq!(
            cell_folder_name("basic containerd"),
            "basic-containerd_fa65a27c"
        );
    }
}
