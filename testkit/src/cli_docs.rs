//! What Berth's programs say of themselves: help on every argument, the command reference in
//! `docs/cli/<program>.md`, written from the programs' own clap definitions so that it cannot
//! drift from them (each program's unit test compares the file with its definitions), and
//! the documents they print, checked against their published schemas.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Every argument and subcommand of `command`, to the deepest, that has no help text, by its
/// path (`berth rollout resume name`): what a `--help` would show bare.
pub fn undocumented(command: &clap::Command) -> Vec<String> {
    fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for argument in command.get_arguments() {
            let id = argument.get_id().as_str();
            if id != "help" && id != "version" && argument.get_help().is_none() {
                missing.push(format!("{path} {id}"));
            }
        }
        for sub in command.get_subcommands() {
            let path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() && sub.get_name() != "help" {
                missing.push(format!("{path} (no about)"));
            }
            walk(sub, &path, missing);
        }
    }
    let mut missing = Vec::new();
    walk(command, command.get_name(), &mut missing);
    missing
}

/// Fails unless `document` follows its published JSON Schema, `docs/schemas/<file>`.
pub fn conforms(file: &str, document: &serde_json::Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/schemas")
        .join(file);
    let schema: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(document)
        .map(|error| error.to_string())
        .collect();
    assert!(errors.is_empty(), "{file}: {errors:#?}\n{document:#}");
}

/// What the reference says of every command before the commands: the conventions all share.
const CONVENTIONS: &str = "\
Exit status, unless a command says otherwise below: 0 when it did what was asked; 1 when it \
could not (the error says what, where and what to do); 2 when the command line is wrong; 130 \
after Ctrl-C and 143 after SIGTERM.

A `DURATION` is `90s`, `5m`, `1h30m`, `30d` or a bare number of seconds. `-o` (`--output`) is \
always the output format, never a path: files and folders are given with `--out`.";

/// The reference of `command` (a program's clap definition) as Markdown: each command that
/// users run (hidden ones are left out), its usage, what it does, its flags with their values,
/// units and defaults, what it prints and how it exits.
pub fn reference(command: &clap::Command) -> String {
    let mut command = command.clone();
    command.build();
    let name = command.get_name().to_string();
    let mut text = format!(
        "# `{name}` command reference\n\n<!-- Written from {name}'s own definitions by its tests; \
         rewrite with BERTH_WRITE_DOCS=1 cargo test --bins -- reference. -->\n\n\
         The conventions all commands share are in [the overview](../cli.md).\n\n{CONVENTIONS}\n"
    );
    let mut commands = Vec::new();
    collect(&command, &name, &mut commands);
    text.push_str("\n| Command | What it does |\n|---|---|\n");
    for (path, command) in &commands {
        let _ = writeln!(
            text,
            "| [`{path}`](#{}) | {} |",
            anchor(path),
            cell(&first_sentence(&about(command)))
        );
    }
    for (path, command) in &commands {
        section(&mut text, path, command);
    }
    text
}

/// Panics, saying what differs, unless `docs/cli/<program>.md` in the repository holding the
/// crate at `manifest_dir` is [`reference()`] of `command`: each program's unit test.
pub fn assert_reference(command: &clap::Command, manifest_dir: &str) {
    if let Err(error) = check_reference(command, &Path::new(manifest_dir).join("..")) {
        panic!("{error}");
    }
}

/// Compares `docs/cli/<program>.md` under `repository` with [`reference()`]; with
/// `BERTH_WRITE_DOCS=1` in the environment, writes it instead. The error says what differs
/// and how to mend it.
pub fn check_reference(command: &clap::Command, repository: &Path) -> Result<(), String> {
    let path: PathBuf = repository
        .join("docs/cli")
        .join(format!("{}.md", command.get_name()));
    let written = reference(command);
    if std::env::var_os("BERTH_WRITE_DOCS").is_some() {
        fs_err::create_dir_all(path.parent().expect("a folder"))
            .and_then(|()| fs_err::write(&path, &written))
            .map_err(|error| error.to_string())?;
        return Ok(());
    }
    let on_disk = fs_err::read_to_string(&path).unwrap_or_default();
    if on_disk == written {
        return Ok(());
    }
    let differs = on_disk
        .lines()
        .zip(written.lines())
        .position(|(old, new)| old != new)
        .unwrap_or_else(|| on_disk.lines().count().min(written.lines().count()));
    Err(format!(
        "{} is not what the command line says (from line {}): rewrite it with \
         BERTH_WRITE_DOCS=1 cargo test --bins -- reference, and commit it\n\
         on disk: {:?}\nwritten: {:?}",
        path.display(),
        differs + 1,
        on_disk.lines().nth(differs).unwrap_or("(the end)"),
        written.lines().nth(differs).unwrap_or("(the end)"),
    ))
}

fn collect<'a>(command: &'a clap::Command, path: &str, out: &mut Vec<(String, &'a clap::Command)>) {
    for sub in command.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let path = format!("{path} {}", sub.get_name());
        let has_own_work = sub.get_subcommands().all(|sub| sub.get_name() == "help")
            || sub.get_arguments().any(shown);
        if has_own_work {
            out.push((path.clone(), sub));
        }
        collect(sub, &path, out);
    }
}

fn section(text: &mut String, path: &str, command: &clap::Command) {
    let _ = write!(text, "\n## {path}\n\n{}\n", about(command));
    let aliases: Vec<&str> = command.get_visible_aliases().collect();
    if !aliases.is_empty() {
        let _ = write!(text, "\nAlso: `{}`.\n", aliases.join("`, `"));
    }
    let usage = command
        .clone()
        .render_usage()
        .to_string()
        .replace("Usage: ", "");
    let _ = write!(text, "\n```\n{usage}\n```\n");
    let arguments: Vec<&clap::Arg> = command.get_arguments().filter(|a| shown(a)).collect();
    if !arguments.is_empty() {
        text.push_str("\n| Argument | Value | Default | What it is |\n|---|---|---|---|\n");
        for argument in arguments {
            let _ = writeln!(
                text,
                "| {} | {} | {} | {} |",
                cell(&flag(argument)),
                cell(&value(argument)),
                cell(&default(argument)),
                cell(&help(argument)),
            );
        }
    }
    if let Some(after) = command.get_after_help() {
        // Each line its own paragraph, as `--help` shows them.
        for line in after.to_string().trim_end().lines() {
            let _ = write!(text, "\n{line}\n");
        }
    }
}

fn shown(argument: &clap::Arg) -> bool {
    let id = argument.get_id().as_str();
    !argument.is_hide_set() && id != "help" && id != "version"
}

fn about(command: &clap::Command) -> String {
    command
        .get_long_about()
        .or(command.get_about())
        .map(|about| about.to_string())
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

fn first_sentence(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.find(". ") {
        Some(end) => line[..=end].trim_end().to_string(),
        None => line.to_string(),
    }
}

fn flag(argument: &clap::Arg) -> String {
    if argument.is_positional() {
        let name = argument
            .get_value_names()
            .and_then(|names| names.first())
            .map_or_else(
                || argument.get_id().to_string().to_uppercase(),
                ToString::to_string,
            );
        return format!("`{name}`");
    }
    let mut names = Vec::new();
    if let Some(short) = argument.get_short() {
        names.push(format!("`-{short}`"));
    }
    if let Some(long) = argument.get_long() {
        names.push(format!("`--{long}`"));
    }
    for alias in argument.get_visible_aliases().unwrap_or_default() {
        names.push(format!("`--{alias}`"));
    }
    names.join(", ")
}

fn value(argument: &clap::Arg) -> String {
    if !argument.get_action().takes_values() {
        return String::new();
    }
    let possible: Vec<String> = argument
        .get_possible_values()
        .iter()
        .filter(|value| !value.is_hide_set())
        .map(|value| value.get_name().to_string())
        .collect();
    let mut text = if !possible.is_empty() {
        possible.join(" | ")
    } else {
        argument
            .get_value_names()
            .map(|names| {
                names
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|| argument.get_id().to_string().to_uppercase())
    };
    if matches!(argument.get_action(), clap::ArgAction::Append) {
        text.push_str(" …");
    }
    text
}

fn default(argument: &clap::Arg) -> String {
    let defaults: Vec<String> = argument
        .get_default_values()
        .iter()
        .map(|value| value.to_string_lossy().into_owned())
        .collect();
    let mut text = defaults.join(" ");
    if let Some(env) = argument.get_env() {
        if !text.is_empty() {
            text.push(' ');
        }
        let _ = write!(text, "(`${}`)", env.to_string_lossy());
    }
    text
}

fn help(argument: &clap::Arg) -> String {
    let mut text = argument
        .get_long_help()
        .or(argument.get_help())
        .map(|help| help.to_string())
        .unwrap_or_default();
    if argument.is_required_set() {
        text.push_str(" Required.");
    }
    text
}

/// `text` as one Markdown table cell: on one line, its bars escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// GitHub's anchor of a heading: lower case, spaces as dashes, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program() -> clap::Command {
        clap::Command::new("tool")
            .subcommand(
                clap::Command::new("run")
                    .about("Runs it. Then more.")
                    .after_help("Exit status: 0 when it ran, 4 when it warned.")
                    .arg(
                        clap::Arg::new("wait")
                            .long("wait")
                            .value_name("DURATION")
                            .default_value("5m")
                            .env("TOOL_WAIT")
                            .help("How long to wait | at most."),
                    )
                    .arg(
                        clap::Arg::new("output")
                            .short('o')
                            .long("output")
                            .value_parser(["table", "json"])
                            .default_value("table")
                            .help("The format."),
                    )
                    .arg(
                        clap::Arg::new("secret")
                            .long("secret")
                            .hide(true)
                            .help("no"),
                    ),
            )
            .subcommand(
                clap::Command::new("inner")
                    .about("Hook-internal.")
                    .hide(true),
            )
    }

    #[test]
    fn the_reference_names_commands_flags_units_defaults_and_exit_codes() {
        let text = reference(&program());
        assert!(
            text.contains("| [`tool run`](#tool-run) | Runs it. |"),
            "{text}"
        );
        assert!(
            text.contains("\n## tool run\n\nRuns it. Then more.\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "| `--wait` | DURATION | 5m (`$TOOL_WAIT`) | How long to wait \\| at most. |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| `-o`, `--output` | table \\| json | table | The format. |"),
            "{text}"
        );
        assert!(
            text.contains("Exit status: 0 when it ran, 4 when it warned."),
            "{text}"
        );
        assert!(
            !text.contains("secret") && !text.contains("inner"),
            "{text}"
        );
    }

    #[test]
    fn a_reference_that_drifted_is_named_with_its_line() {
        let repository = tempfile::tempdir().unwrap();
        let error = check_reference(&program(), repository.path()).unwrap_err();
        assert!(
            error.contains("tool.md is not what the command line says"),
            "{error}"
        );
        fs_err::create_dir_all(repository.path().join("docs/cli")).unwrap();
        fs_err::write(
            repository.path().join("docs/cli/tool.md"),
            reference(&program()),
        )
        .unwrap();
        assert_eq!(check_reference(&program(), repository.path()), Ok(()));
    }
}
