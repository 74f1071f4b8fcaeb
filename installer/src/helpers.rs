//! The bash helper library hooks call (`scripts/common/*.sh`), carried inside the binary so a
//! node needs nothing but `berth`. It is written under `$DIR/scripts/common/` and sourced into
//! the hook session before any add-on's install.sh.

use std::path::{Path, PathBuf};

/// The library's files, in the order `berth.sh` sources them: logging first, since every file
/// logs; discover.sh sets kURL's globals as it is sourced, from itself and common.sh alone.
const FILES: [(&str, &str); 15] = [
    (
        "logging.sh",
        include_str!("../../scripts/common/logging.sh"),
    ),
    ("common.sh", include_str!("../../scripts/common/common.sh")),
    (
        "discover.sh",
        include_str!("../../scripts/common/discover.sh"),
    ),
    (
        "prompts.sh",
        include_str!("../../scripts/common/prompts.sh"),
    ),
    (
        "waiting.sh",
        include_str!("../../scripts/common/waiting.sh"),
    ),
    (
        "systemd.sh",
        include_str!("../../scripts/common/systemd.sh"),
    ),
    (
        "network.sh",
        include_str!("../../scripts/common/network.sh"),
    ),
    ("distro.sh", include_str!("../../scripts/common/distro.sh")),
    (
        "kubernetes.sh",
        include_str!("../../scripts/common/kubernetes.sh"),
    ),
    ("yaml.sh", include_str!("../../scripts/common/yaml.sh")),
    ("images.sh", include_str!("../../scripts/common/images.sh")),
    (
        "host-packages.sh",
        include_str!("../../scripts/common/host-packages.sh"),
    ),
    (
        "object-store.sh",
        include_str!("../../scripts/common/object-store.sh"),
    ),
    (
        "storage.sh",
        include_str!("../../scripts/common/storage.sh"),
    ),
    ("addons.sh", include_str!("../../scripts/common/addons.sh")),
];

const ENTRY_POINT: &str = "berth.sh";

/// Writes the library into `dir`, leaving files that already hold the same text.
pub fn install(dir: &Path) -> std::io::Result<()> {
    fs_err::create_dir_all(dir)?;
    let mut entry = String::from("# Sources the Berth helper library.\n");
    for (name, text) in FILES {
        write_if_changed(&dir.join(name), text)?;
        entry.push_str(&format!(". \"{}\"\n", dir.join(name).display()));
    }
    write_if_changed(&dir.join(ENTRY_POINT), &entry)
}

/// The file that sources the whole library.
pub fn entry_point(dir: &Path) -> PathBuf {
    dir.join(ENTRY_POINT)
}

fn write_if_changed(path: &Path, text: &str) -> std::io::Result<()> {
    if fs_err::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    fs_err::write(path, text)
}
