//! The bash helper library hooks call (`scripts/common/*.sh`), carried inside the binary so a
//! node needs nothing but `berth`. It is written under `$DIR/scripts/common/` and sourced into
//! the hook session before any add-on's install.sh; `$DIR/bin/kurl`, the utility program
//! kURL's hooks run as `$BIN_KURL`, and kURL's other programs (`$DIR/bin/bcrypt`, `htpasswd`,
//! `toml`, `yamlutil`, `pvmigrate`) are links to `berth` itself.

use std::path::{Path, PathBuf};

use crate::layout::Layout;

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

/// Writes the library into the node's helpers folder, leaving files that already hold the same
/// text, and links `bin/kurl` and kURL's other programs to this program.
pub fn install(layout: &Layout) -> std::io::Result<()> {
    for program in std::iter::once("kurl").chain(crate::kurl_programs::PROGRAMS) {
        link_to_berth(&layout.programs_dir().join(program))?;
    }
    let dir = layout.helpers_dir();
    fs_err::create_dir_all(&dir)?;
    let mut entry = String::from("# Sources the Berth helper library.\n");
    for (name, text) in FILES {
        write_if_changed(&dir.join(name), text)?;
        // Quoted as one word: a root may hold `$(…)`, backticks or quotes.
        let path = dir.join(name).display().to_string();
        entry.push_str(&format!(". {}\n", berth_formats::shell::quote_line(&path)));
    }
    write_if_changed(&dir.join(ENTRY_POINT), &entry)
}

/// Empties (or makes) `$DIR/kustomize/kubeadm/init-patches` and `join-patches`, as kURL's
/// `setup_kubeadm_kustomize` does before every run's hooks: kURL's `_pre_init` and `_join`
/// hooks copy their kubeadm patches there without making the folder.
pub fn fresh_kubeadm_patches(layout: &Layout) -> std::io::Result<()> {
    for kind in ["init-patches", "join-patches"] {
        let dir = layout.kustomize_dir("kubeadm").join(kind);
        if dir.exists() {
            fs_err::remove_dir_all(&dir)?;
        }
        fs_err::create_dir_all(&dir)?;
    }
    Ok(())
}

/// The file that sources the whole library.
pub fn entry_point(layout: &Layout) -> PathBuf {
    layout.helpers_dir().join(ENTRY_POINT)
}

/// `bin/kurl` → the running `berth`, replacing whatever stood there (an older binary's link).
/// Links `link` to this program, unless it already is.
fn link_to_berth(link: &Path) -> std::io::Result<()> {
    let berth = std::env::current_exe()?;
    if fs_err::read_link(link).is_ok_and(|target| target == berth) {
        return Ok(());
    }
    let programs = link.parent().unwrap_or(Path::new("."));
    fs_err::create_dir_all(programs)?;
    let fresh = programs.join(".kurl.new");
    let _ = fs_err::remove_file(&fresh);
    fs_err::os::unix::fs::symlink(&berth, &fresh)?;
    fs_err::rename(&fresh, link)
}

fn write_if_changed(path: &Path, text: &str) -> std::io::Result<()> {
    if fs_err::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    fs_err::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_that_looks_like_shell_is_only_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir
            .path()
            .join("root $(touch substituted) `touch quoted` \"'");
        let layout = Layout::new(&root);
        install(&layout).unwrap();
        let status = std::process::Command::new("bash")
            .arg("-c")
            .arg(". \"$1\" >/dev/null 2>&1; true")
            .arg("bash")
            .arg(entry_point(&layout))
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        for marker in ["substituted", "quoted"] {
            assert!(!dir.path().join(marker).exists(), "{marker} ran");
        }
        let entry = fs_err::read_to_string(entry_point(&layout)).unwrap();
        assert!(entry.contains("'\\''"), "{entry}");
    }
}
