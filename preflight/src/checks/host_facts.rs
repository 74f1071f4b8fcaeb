//! What several kinds read of the host: a tool's output, the kernel's `uname`, and
//! `/etc/os-release`.

use std::collections::BTreeMap;
use std::process::Command;

/// What a host tool prints, or why it printed nothing useful (its error output).
pub(super) fn tool_output(program: &str, arguments: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(arguments)
        .output()
        .map_err(|error| format!("{program}: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "{program} {}: {}",
            arguments.first().unwrap_or(&""),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The kernel's `uname`: its release (`6.1.0-13-amd64`) and machine (`x86_64`).
pub(super) fn uname() -> Result<(String, String), String> {
    let name = nix::sys::utsname::uname().map_err(|error| format!("uname: {error}"))?;
    Ok((
        name.release().to_string_lossy().into_owned(),
        name.machine().to_string_lossy().into_owned(),
    ))
}

/// `/etc/os-release` (or `/usr/lib/os-release`) as keys and unquoted values.
pub fn os_release() -> Result<BTreeMap<String, String>, String> {
    let text = fs_err::read_to_string("/etc/os-release")
        .or_else(|_| fs_err::read_to_string("/usr/lib/os-release"))
        .map_err(|error| error.to_string())?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| {
            (
                key.trim().to_string(),
                value.trim().trim_matches(['"', '\'']).to_string(),
            )
        })
        .collect())
}
