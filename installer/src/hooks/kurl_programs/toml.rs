//! kURL's `toml` (`kurl_util/cmd/toml`): `-basefile FILE -patchfile PATCH` sets every leaf of
//! the patch in the base file, which containerd 1.x's install hook uses for the spec's
//! `containerd.tomlConfig`. The base keeps its comments, order and every key the patch does
//! not name.

use toml_edit::{DocumentMut, Item, Table, Value};

use super::Failure;
use super::go_flags::{Flag, FlagSet};

const FLAGS: FlagSet = FlagSet {
    program: "toml",
    flags: &[
        Flag {
            name: "basefile",
            boolean: false,
            default: "/etc/containerd/config.toml",
            usage: "filename the patch will be applied to",
        },
        Flag {
            name: "patchfile",
            boolean: false,
            default: "/tmp/containerd.toml",
            usage: "filename of the patch",
        },
    ],
};

/// The largest file read: containerd's configuration is a few KiB.
const MAX_BYTES: u64 = 16 << 20;

pub fn main(arguments: &[String]) -> Result<(), Failure> {
    let parsed = FLAGS.parse(arguments)?;
    let (base_path, patch_path) = (parsed.get("basefile"), parsed.get("patchfile"));
    let load = |path: &str| -> Result<DocumentMut, Failure> {
        let fail = |why: String| Failure::Error(format!("Failed to load {path}: {why}"));
        let text = crate::files::read_to_string_at_most(std::path::Path::new(path), MAX_BYTES)
            .map_err(|error| fail(error.to_string()))?;
        text.parse::<DocumentMut>()
            .map_err(|error| fail(error.to_string()))
    };
    let mut base = load(base_path)?;
    let patch = load(patch_path)?;
    merge(base.as_table_mut(), patch.as_table());
    fs_err::write(base_path, base.to_string())
        .map_err(|_| Failure::Error(format!("Failed to write {base_path}")))
}

/// Sets each leaf of `patch` at its path in `base`, making the tables on the way. A leaf is a
/// value that is not a table (an array of tables is one leaf, as kURL's go-toml reads it).
fn merge(base: &mut Table, patch: &Table) {
    for (key, item) in patch.iter() {
        match as_table(item) {
            Some(patch_table) => {
                let slot = base.entry(key).or_insert_with(|| {
                    let mut table = Table::new();
                    table.set_implicit(true);
                    Item::Table(table)
                });
                if let Item::Value(Value::InlineTable(inline)) = slot {
                    *slot = Item::Table(inline.clone().into_table());
                }
                if !slot.is_table() {
                    let mut table = Table::new();
                    table.set_implicit(true);
                    *slot = Item::Table(table);
                }
                if let Item::Table(base_table) = slot {
                    merge(base_table, &patch_table);
                }
            }
            None => {
                let mut leaf = item.clone();
                if let Item::Value(value) = &mut leaf {
                    value.decor_mut().clear();
                }
                base.insert(key, leaf);
            }
        }
    }
}

fn as_table(item: &Item) -> Option<Table> {
    match item {
        Item::Table(table) => Some(table.clone()),
        Item::Value(Value::InlineTable(inline)) => Some(inline.clone().into_table()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// containerd's config with kURL's test grid's `tomlConfig` patch: the patch's leaves are
    /// set, the rest of the file stays as written.
    #[test]
    fn every_leaf_of_the_patch_is_set_and_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("config.toml");
        let patch = dir.path().join("patch.toml");
        fs_err::write(
            &base,
            "# containerd\nversion = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"pause:3.6\"\n  [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n    snapshotter = \"overlayfs\"\n",
        )
        .unwrap();
        fs_err::write(
            &patch,
            "[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"pause:3.9\"\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\n  endpoint = [\"https://mirror.example\"]\n[metrics]\naddress = { host = \"127.0.0.1\" }\n",
        )
        .unwrap();
        main(&[
            format!("-basefile={}", base.display()),
            "-patchfile".into(),
            patch.display().to_string(),
        ])
        .unwrap();
        let merged: toml_edit::DocumentMut =
            fs_err::read_to_string(&base).unwrap().parse().unwrap();
        let cri = &merged["plugins"]["io.containerd.grpc.v1.cri"];
        assert_eq!(cri["sandbox_image"].as_str(), Some("pause:3.9"));
        assert_eq!(cri["containerd"]["snapshotter"].as_str(), Some("overlayfs"));
        assert_eq!(
            cri["registry"]["mirrors"]["docker.io"]["endpoint"][0].as_str(),
            Some("https://mirror.example")
        );
        assert_eq!(
            merged["metrics"]["address"]["host"].as_str(),
            Some("127.0.0.1")
        );
        assert_eq!(merged["version"].as_integer(), Some(2));
        assert!(merged.to_string().starts_with("# containerd\n"));
        // A patch that is not TOML fails and leaves the base as it was.
        let before = fs_err::read_to_string(&base).unwrap();
        fs_err::write(&patch, "[[[").unwrap();
        let error = main(&[
            format!("-basefile={}", base.display()),
            format!("-patchfile={}", patch.display()),
        ])
        .unwrap_err();
        assert!(matches!(&error, Failure::Error(text) if text.starts_with("Failed to load")));
        assert_eq!(fs_err::read_to_string(&base).unwrap(), before);
    }
}
