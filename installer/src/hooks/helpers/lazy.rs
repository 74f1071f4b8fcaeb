//! The library's functions loaded when first called. Bash reads every byte of what it sources,
//! and most of the library is functions a run may never call (a run that changes nothing
//! calls a handful): each such function's text goes in a file of its own, and until it is
//! called a one-line stub stands in its place, which loads that file alone and calls the
//! function again. So a function an add-on defines over a library one stays the add-on's.
//!
//! Only a file made of functions alone (besides comments and blank lines) is split; one with
//! any other statement at its top level (logging's colours, discover's globals) is sourced
//! whole, as it is.

use std::path::{Path, PathBuf};

use berth_formats::shell::quote_line;

/// One function of a library file: its name and its text, `function name() {` to `}`.
#[derive(Debug, PartialEq)]
pub struct Function<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// The functions of a library file in order, or `None` when its top level holds anything else
/// than functions, comments and blank lines (or a function not written `name() {` … `}` on
/// lines of their own).
pub fn functions(text: &str) -> Option<Vec<Function<'_>>> {
    let mut functions = Vec::new();
    let mut offset = 0;
    let mut lines = text.split_inclusive('\n');
    while let Some(line) = lines.next() {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let name = header_name(line.trim_end())?;
        // The body ends at the first `}` in the first column.
        loop {
            let body_line = lines.next()?;
            offset += body_line.len();
            if body_line.trim_end() == "}" {
                break;
            }
        }
        functions.push(Function {
            name,
            text: &text[start..offset],
        });
    }
    Some(functions)
}

/// The name of `function name() {` or `name() {`: letters, digits and `_`, `-`, `:`, `.`
/// (what a file name may hold), not starting with `-`.
fn header_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("function ").unwrap_or(line);
    let (name, after) = rest.split_once("()")?;
    let name = name.trim_end();
    let plain = !name.is_empty()
        && !name.starts_with(['-', '.'])
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b':' | b'.'));
    (plain && after.trim() == "{").then_some(name)
}

/// Writes each of `functions` to `<into>/<name>.sh` and returns the stubs that load them from
/// `folder` (where `into` will be), as a file's text: the loader, then one stub per function.
pub fn write_functions(
    into: &Path,
    folder: &Path,
    functions: &[Function],
) -> std::io::Result<String> {
    fs_err::create_dir_all(into)?;
    // A stub is one command, which bash parses in half the time of the three it stands for.
    // __berth_stub unsets it first: a load that defined nothing fails as not found, never
    // loops. A copy of a stub under another name (an add-on keeping the library's function,
    // `eval "orig_$(declare -f foo)"`, before defining its own foo) becomes the library's
    // function itself, and foo stays the add-on's.
    let mut stubs = format!(
        "# Stubs of the helper library's functions: each loads its function when first called.\n\
         __berth_load() {{ . {}/\"$1.sh\"; }}\n{STUB_LOADER}",
        quote_line(&folder.display().to_string())
    );
    for function in functions {
        fs_err::write(into.join(format!("{}.sh", function.name)), function.text)?;
        let name = function.name;
        stubs.push_str(&format!("{name}() {{ __berth_stub {name} \"$@\"; }}\n"));
    }
    Ok(stubs)
}

/// What a stub calls: loads the function in its place, then calls it.
const STUB_LOADER: &str = r#"__berth_stub() {
    if [ "${FUNCNAME[1]}" = "$1" ]; then
        unset -f "$1"
        __berth_load "$1" && "$@"
        return
    fi
    __berth_copy "${FUNCNAME[1]}" "$1" && "${FUNCNAME[1]}" "${@:2}"
}
__berth_copy() {
    local current library
    current=$(declare -f "$2")
    unset -f "$2"
    if ! __berth_load "$2"; then
        eval "$current"
        return 1
    fi
    library=$(declare -f "$2")
    eval "$1${library#"$2"}"
    eval "$current"
}
"#;

/// The folder of the functions of the library whose text has `digest`.
pub fn folder(helpers: &Path, digest: u64) -> PathBuf {
    helpers.join(format!("functions-{digest:016x}"))
}

/// FNV-1a over `bytes`, from `hash`: the library's digest, made as Berth is compiled.
pub const fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    let mut index = 0;
    while index < bytes.len() {
        hash ^= bytes[index] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        index += 1;
    }
    hash
}

/// The form of the stubs [`write_functions`] writes: a change to it writes the functions'
/// folder anew.
pub const STUBS_FORMAT: &str = "stubs 3: __berth_stub NAME, copies kept";

/// FNV-1a's starting value.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_functions_splits_into_them_and_any_other_statement_keeps_it_whole() {
        let text = "# comment\n\nfunction a() {\n    echo a\n}\n\n# b\nb_c-d() {\n  if x; then\n    y\n  fi\n}\n";
        let split = functions(text).unwrap();
        assert_eq!(
            split,
            [
                Function {
                    name: "a",
                    text: "function a() {\n    echo a\n}\n"
                },
                Function {
                    name: "b_c-d",
                    text: "b_c-d() {\n  if x; then\n    y\n  fi\n}\n"
                },
            ]
        );
        for kept in [
            "A=1\nfunction a() {\n}\n",
            "function a() { echo one line; }\n",
            "function a() {\n    echo unended\n",
            "function ../x() {\n}\n",
            "function a b() {\n}\n",
        ] {
            assert_eq!(functions(kept), None, "{kept}");
        }
    }
}
