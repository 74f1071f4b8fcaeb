//! The bash helper library hooks call (`scripts/common/*.sh`), carried inside the binary so a
//! node needs nothing but `berth`. It is written under `$DIR/scripts/common/` and sourced into
//! the hook session before any add-on's install.sh; `$DIR/bin/kurl`, the utility program
//! kURL's hooks run as `$BIN_KURL`, and kURL's other programs (`$DIR/bin/bcrypt`, `htpasswd`,
//! `toml`, `yamlutil`, `pvmigrate`) are links to `berth` itself.

use std::path::{Path, PathBuf};

use crate::node::layout::Layout;

mod lazy;

/// The library's files, in the order `berth.sh` sources them: logging first, since every file
/// logs; discover.sh sets kURL's globals as it is sourced, from itself and common.sh alone
/// (unless sourced for the definitions alone, `library.sh`).
const FILES: [(&str, &str); 15] = [
    (
        "logging.sh",
        include_str!("../../../../scripts/common/logging.sh"),
    ),
    (
        "common.sh",
        include_str!("../../../../scripts/common/common.sh"),
    ),
    (
        "discover.sh",
        include_str!("../../../../scripts/common/discover.sh"),
    ),
    (
        "prompts.sh",
        include_str!("../../../../scripts/common/prompts.sh"),
    ),
    (
        "waiting.sh",
        include_str!("../../../../scripts/common/waiting.sh"),
    ),
    (
        "systemd.sh",
        include_str!("../../../../scripts/common/systemd.sh"),
    ),
    (
        "network.sh",
        include_str!("../../../../scripts/common/network.sh"),
    ),
    (
        "distro.sh",
        include_str!("../../../../scripts/common/distro.sh"),
    ),
    (
        "kubernetes.sh",
        include_str!("../../../../scripts/common/kubernetes.sh"),
    ),
    (
        "yaml.sh",
        include_str!("../../../../scripts/common/yaml.sh"),
    ),
    (
        "images.sh",
        include_str!("../../../../scripts/common/images.sh"),
    ),
    (
        "host-packages.sh",
        include_str!("../../../../scripts/common/host-packages.sh"),
    ),
    (
        "object-store.sh",
        include_str!("../../../../scripts/common/object-store.sh"),
    ),
    (
        "storage.sh",
        include_str!("../../../../scripts/common/storage.sh"),
    ),
    (
        "addons.sh",
        include_str!("../../../../scripts/common/addons.sh"),
    ),
];

/// The digest of the library's text and of how its functions are split, made as Berth is
/// compiled: it names the folder of the functions loaded when first called, so a new library
/// (or new stubs) writes them anew.
const LIBRARY_DIGEST: u64 = {
    let mut hash = lazy::fnv1a(lazy::FNV_OFFSET, lazy::STUBS_FORMAT.as_bytes());
    let mut index = 0;
    while index < FILES.len() {
        hash = lazy::fnv1a(hash, FILES[index].0.as_bytes());
        hash = lazy::fnv1a(hash, FILES[index].1.as_bytes());
        index += 1;
    }
    hash
};

/// In the functions' folder: the stubs that stand in for them until called.
const STUBS: &str = "stubs.sh";

const ENTRY_POINT: &str = "berth.sh";

/// The library's definitions alone: what a session sources before the run's variables are
/// known, to set kURL's globals once they are.
const DEFINITIONS: &str = "library.sh";

/// The function that sets kURL's globals from the host and the session's variables.
pub const GLOBALS_FUNCTION: &str = "berth_kurl_globals";

/// Writes the library into the node's helpers folder, leaving files that already hold the same
/// text, and links `bin/kurl` and kURL's other programs to this program.
pub fn install(layout: &Layout) -> std::io::Result<()> {
    link_programs(layout)?;
    write_library(layout)
}

/// Links `bin/kurl` and kURL's other programs to this program: what a run's hooks call, so
/// only once the run goes ahead.
pub fn link_programs(layout: &Layout) -> std::io::Result<()> {
    for program in std::iter::once("kurl").chain(crate::hooks::kurl_programs::PROGRAMS) {
        link_to_berth(&layout.programs_dir().join(program))?;
    }
    Ok(())
}

/// Writes the library into the node's helpers folder, leaving files that already hold the same
/// text.
pub fn write_library(layout: &Layout) -> std::io::Result<()> {
    let dir = layout.helpers_dir();
    fs_err::create_dir_all(&dir)?;
    // Paths quoted as one word: a root may hold `$(…)`, backticks or quotes.
    let source = |path: &Path| {
        format!(
            ". {}\n",
            berth_formats::shell::quote_line(&path.display().to_string())
        )
    };
    let mut entry = String::from("# Sources the Berth helper library.\n");
    for (name, text) in FILES {
        write_if_changed(&dir.join(name), text)?;
        entry.push_str(&source(&dir.join(name)));
    }
    write_if_changed(&dir.join(ENTRY_POINT), &entry)?;
    // What a session sources: the files that are more than functions whole, the others'
    // functions as stubs that load each when first called. discover.sh leaves kURL's globals
    // unset while __berth_definitions_only is set.
    let functions = lazy::folder(&dir, LIBRARY_DIGEST);
    if !functions.join(STUBS).exists() {
        write_lazy_functions(&dir, &functions)?;
    }
    let mut definitions = String::from(
        "# Defines the Berth helper library's functions; sets no global of kURL's.\n\
         __berth_definitions_only=1\n",
    );
    for (name, text) in FILES {
        if lazy::functions(text).is_none() {
            definitions.push_str(&source(&dir.join(name)));
        }
    }
    definitions.push_str(&source(&functions.join(STUBS)));
    definitions.push_str("unset __berth_definitions_only\n");
    write_if_changed(&definitions_file(layout), &definitions)
}

/// Writes the functions of the library's files made of functions alone into `folder`, with
/// their stubs last, whole or not at all (a folder made aside, then renamed); the folders of
/// other libraries go.
fn write_lazy_functions(helpers: &Path, folder: &Path) -> std::io::Result<()> {
    let aside = helpers.join(format!(".functions.{}", std::process::id()));
    let _ = fs_err::remove_dir_all(&aside);
    let functions: Vec<lazy::Function> = FILES
        .iter()
        .filter_map(|(_, text)| lazy::functions(text))
        .flatten()
        .collect();
    let stubs = lazy::write_functions(&aside, folder, &functions)?;
    fs_err::write(aside.join(STUBS), stubs)?;
    for entry in fs_err::read_dir(helpers)? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with("functions-") && path != folder {
            fs_err::remove_dir_all(&path)?;
        }
    }
    if folder.exists() {
        fs_err::remove_dir_all(folder)?;
    }
    fs_err::rename(&aside, folder)
}

/// The file that defines the library's functions and sets nothing.
pub fn definitions_file(layout: &Layout) -> PathBuf {
    layout.helpers_dir().join(DEFINITIONS)
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
    let berth = crate::own_program()?;
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
        let entry = fs_err::read_to_string(definitions_file(&layout)).unwrap();
        assert!(entry.contains("'\\''"), "{entry}");
    }

    /// bash with the installed library: `script` gets the file to source as `$1`, and
    /// the functions' folder as `$2`.
    fn bash(script: &str, file: &Path) -> String {
        let folder = lazy::folder(file.parent().unwrap(), LIBRARY_DIGEST);
        let output = std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .arg("bash")
            .arg(file)
            .arg(folder)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    #[test]
    fn each_stub_loads_its_function_as_the_whole_library_defines_it() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        install(&layout).unwrap();
        let eager = bash(
            "__berth_definitions_only=1; . \"$1\"; declare -f",
            &entry_point(&layout),
        );
        let folder = lazy::folder(&layout.helpers_dir(), LIBRARY_DIGEST);
        let loaded = bash(
            r#". "$1"
            for file in "$2"/*.sh; do
                name=$(basename "$file" .sh)
                [ "$name" = stubs ] && continue
                unset -f "$name"; __berth_load "$name"
            done
            unset -f __berth_load __berth_stub __berth_copy; declare -f"#,
            &definitions_file(&layout),
        );
        assert_eq!(eager, loaded);
        let stubbed = fs_err::read_dir(&folder).unwrap().count() - 1;
        let defined = eager.lines().filter(|line| line.ends_with(" () ")).count();
        assert!(stubbed > 100 && stubbed < defined, "{stubbed} of {defined}");
        // A run's session reads a small part of the library's text.
        let sourced: usize = ["logging.sh", "discover.sh"]
            .iter()
            .map(|name| {
                fs_err::metadata(layout.helpers_dir().join(name))
                    .unwrap()
                    .len() as usize
            })
            .sum();
        let whole: usize = FILES.iter().map(|(_, text)| text.len()).sum();
        assert!(sourced * 3 < whole, "{sourced} of {whole}");
    }

    #[test]
    fn a_function_an_addon_defines_over_the_library_stays_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        install(&layout).unwrap();
        // Two functions of one library file: the add-on's own kubernetes_is_master stays
        // when the library's kubelet_version is loaded.
        let printed = bash(
            r#". "$1"
            kubernetes_is_master() { echo "the add-on's"; }
            declare -F kubelet_version >/dev/null
            unset -f kubelet_version; __berth_load kubelet_version
            declare -F kubelet_version >/dev/null && kubernetes_is_master"#,
            &definitions_file(&layout),
        );
        assert_eq!(printed, "the add-on's\n");

        // An add-on that wraps a library function, keeping it under another name first: the
        // wrapper stays, and the kept copy is the library's function, on every call.
        let printed = bash(
            r#". "$1"
            eval "orig_$(declare -f kubernetes_version_minor)"
            kubernetes_version_minor() { echo "wrapped"; orig_kubernetes_version_minor "$@"; }
            kubernetes_version_minor v1.29.3
            kubernetes_version_minor 1.30.0"#,
            &definitions_file(&layout),
        );
        assert_eq!(printed, "wrapped\n29\nwrapped\n30\n");
    }

    #[test]
    fn a_new_library_writes_its_functions_anew_and_the_old_ones_go() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let old = layout.helpers_dir().join("functions-0000000000000001");
        fs_err::create_dir_all(&old).unwrap();
        install(&layout).unwrap();
        assert!(!old.exists());
        let folder = lazy::folder(&layout.helpers_dir(), LIBRARY_DIGEST);
        let stubs = folder.join(STUBS);
        assert!(stubs.exists());
        // Written once: a second install leaves the folder as it is.
        let written = fs_err::metadata(&stubs).unwrap().modified().unwrap();
        install(&layout).unwrap();
        assert_eq!(
            fs_err::metadata(&stubs).unwrap().modified().unwrap(),
            written
        );
    }
}
