//! Script flags that change what hooks see without changing any add-on's fields
//! (`labels=` is NODE_LABELS, `public-address=` is the spec's `kurl.publicAddress`, which hooks
//! see as PUBLIC_ADDRESS). kURL runs every hook on every run, so such a flag always reaches
//! them; Berth skips an add-on applied as asked, so it re-runs one whose scripts read a
//! variable a flag now sets to another value than when it was applied.
//!
//! Values are kept as digests: a flag may carry a secret (`kubeadm-token=`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::Path;

use berth_formats::Sha256Digest;
use berth_formats::package_index::PackageIndex;
use berth_formats::spec::flags::ScriptFlags;
use berth_formats::spec::kurl_type::kurl_environment;
use serde_json::{Map, Value};

/// The largest file of an add-on's folder read for the variables it names; larger ones
/// (assets, archives) are not scripts.
const MAX_SCRIPT_BYTES: u64 = 1024 * 1024;

/// What the run's flags set that hooks see, by variable name, each value's digest: kURL's flag
/// variables, and each spec setting a flag sets, under the variable hooks see it as.
pub fn flag_inputs(
    flags: &ScriptFlags,
    settings: &BTreeMap<String, Map<String, Value>>,
) -> BTreeMap<String, String> {
    let mut inputs: BTreeMap<String, String> = flags
        .variables
        .iter()
        .map(|variable| (variable.name.to_string(), digest(&variable.value)))
        .collect();
    let changed: BTreeSet<String> = flags
        .changes
        .iter()
        .map(|change| format!("spec.{}.{}", change.key, change.field))
        .collect();
    for variable in kurl_environment(|key| settings.get(key)) {
        if changed.contains(&variable.origin) {
            inputs.insert(variable.variable, digest(&variable.value));
        }
    }
    inputs
}

fn digest(value: &str) -> String {
    Sha256Digest::of(value.as_bytes()).to_string()
}

/// The variables of `inputs` the add-on unpacked in `folder` names (`$NAME` or `${NAME…`) in
/// any of its own files; none when the folder holds no unpacked package.
pub fn read_by(folder: &Path, inputs: &BTreeMap<String, String>) -> BTreeSet<String> {
    if inputs.is_empty() {
        return BTreeSet::new();
    }
    match crate::dist::unpack::read_unpacked(folder) {
        Ok(index) => named_in(folder, own_files(&index), inputs),
        Err(_) => BTreeSet::new(),
    }
}

/// The files of a package its hooks may read as text: those its index lists, less its images,
/// its host packages' folders and anything larger than a script.
fn own_files(index: &PackageIndex) -> impl Iterator<Item = &str> {
    index
        .files
        .iter()
        .filter(|file| file.size <= MAX_SCRIPT_BYTES)
        .map(|file| file.path.as_str())
        .filter(|path| {
            let top = path.split('/').next().unwrap_or_default();
            top != berth_formats::oci::IMAGES_DIR && !index.host_packages.contains_key(top)
        })
}

/// The variables of `inputs` that any of `files` (below `folder`) names.
fn named_in<'a>(
    folder: &Path,
    files: impl Iterator<Item = &'a str>,
    inputs: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let mut read = BTreeSet::new();
    for file in files {
        let mut bytes = Vec::new();
        let Ok(opened) = fs_err::File::open(folder.join(file)) else {
            continue;
        };
        if opened
            .take(MAX_SCRIPT_BYTES)
            .read_to_end(&mut bytes)
            .is_err()
        {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for name in inputs.keys() {
            if !read.contains(name) && names(&text, name) {
                read.insert(name.clone());
            }
        }
    }
    read
}

/// Whether `text` names shell variable `name`: `$NAME` or `${NAME` not followed by more of a
/// name.
fn names(text: &str, name: &str) -> bool {
    ["$", "${"].iter().any(|prefix| {
        let wanted = format!("{prefix}{name}");
        text.match_indices(&wanted).any(|(at, _)| {
            text[at + wanted.len()..]
                .chars()
                .next()
                .is_none_or(|next| !(next.is_ascii_alphanumeric() || next == '_'))
        })
    })
}

/// The variables among `read` whose value now differs from what the add-on was applied with.
pub fn changed(
    read: &BTreeSet<String>,
    inputs: &BTreeMap<String, String>,
    applied: &BTreeMap<String, String>,
) -> Vec<String> {
    read.iter()
        .filter(|name| applied.get(*name) != inputs.get(*name))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_is_read_by_its_name_not_by_a_longer_one() {
        assert!(names("echo $NODE_LABELS\n", "NODE_LABELS"));
        assert!(names("x=\"${NODE_LABELS:-}\"", "NODE_LABELS"));
        assert!(names("$NODE_LABELS", "NODE_LABELS"));
        assert!(!names("echo $NODE_LABELS_EXTRA", "NODE_LABELS"));
        assert!(!names("NODE_LABELS=1", "NODE_LABELS"));
    }

    #[test]
    fn flags_give_their_variables_and_the_settings_they_set() {
        let words = [("labels", "zone=edge"), ("public-address", "10.0.0.9")];
        let arguments: Vec<(String, String)> = words
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        let flags = ScriptFlags::read(&arguments).unwrap();
        let mut spec = berth_formats::spec::InstallerSpec::parse(
            Path::new("spec.yaml"),
            "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  kurl: {}\n",
        )
        .unwrap();
        spec.apply_script_flags(&flags).unwrap();
        let inputs = flag_inputs(&flags, &spec.settings_sections());
        assert_eq!(
            inputs.keys().collect::<Vec<_>>(),
            ["NODE_LABELS", "PUBLIC_ADDRESS"]
        );
        assert_eq!(inputs["PUBLIC_ADDRESS"], digest("10.0.0.9"));

        let folder = tempfile::tempdir().unwrap();
        fs_err::write(
            folder.path().join("install.sh"),
            "function x() { echo \"$PUBLIC_ADDRESS\"; }\n",
        )
        .unwrap();
        let read = named_in(folder.path(), ["install.sh"].into_iter(), &inputs);
        assert_eq!(read.iter().collect::<Vec<_>>(), ["PUBLIC_ADDRESS"]);
        let before = BTreeMap::from([("PUBLIC_ADDRESS".to_string(), digest("10.0.0.8"))]);
        assert_eq!(changed(&read, &inputs, &before), ["PUBLIC_ADDRESS"]);
        assert!(changed(&read, &inputs, &inputs).is_empty());
    }

    #[test]
    fn only_the_package_s_own_small_files_are_read() {
        use berth_formats::package_index::FileRecord;
        let file = |path: &str, size: u64| FileRecord {
            path: path.into(),
            size,
            sha256: Sha256Digest::of(b""),
            executable: false,
        };
        let index = PackageIndex {
            schema_version: 1,
            name: "kubernetes".into(),
            version: "1.20.2".into(),
            arch: "amd64".into(),
            inputs_digest: Sha256Digest::of(b""),
            files: vec![
                file("install.sh", 100),
                file("images/blobs/sha256/ab", 100),
                file("debian-12/archives/kubelet.deb", 100),
                file("assets/kubeadm", 40 << 20),
                file("kustomize/deployment.yaml", 100),
            ],
            images: Vec::new(),
            host_packages: BTreeMap::from([("debian-12".into(), vec!["kubelet.deb".into()])]),
        };
        assert_eq!(
            own_files(&index).collect::<Vec<_>>(),
            ["install.sh", "kustomize/deployment.yaml"]
        );
    }
}
