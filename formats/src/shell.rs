//! Values made into bash words, for every script and command line Berth writes: the scripts
//! `berth-build` renders, the hook session's commands, the join command a node prints, the
//! commands the builder shows. One place, so no writer quotes differently.

/// `text` as one bash word in single quotes, each `'` written as `'\''`. Inside single quotes
/// bash reads every character as itself, line breaks included.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `text` as one bash word: as it is when it holds only characters bash reads as themselves,
/// else [`quote`]d. For commands a person reads.
pub fn word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c));
    if plain { text.to_string() } else { quote(text) }
}

/// `text` as one bash word on one line: [`quote`]d, or `$'…'` with escapes when it holds line
/// breaks or other control characters.
pub fn quote_line(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return quote(text);
    }
    let mut quoted = String::from("$'");
    for character in text.chars() {
        match character {
            '\\' => quoted.push_str(r"\\"),
            '\'' => quoted.push_str(r"\'"),
            '\n' => quoted.push_str(r"\n"),
            '\t' => quoted.push_str(r"\t"),
            '\r' => quoted.push_str(r"\r"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('\'');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_reads_each_word_back_as_written() {
        for text in [
            "plain",
            "",
            "it's",
            "a b",
            "$(touch x)",
            "line\nbreak",
            "tab\there",
            "\u{1}",
        ] {
            for quoted in [quote(text), word(text), quote_line(text)] {
                let output = std::process::Command::new("bash")
                    .arg("-c")
                    .arg(format!("printf '%s' {quoted}"))
                    .output()
                    .unwrap();
                assert_eq!(String::from_utf8_lossy(&output.stdout), text, "{quoted}");
            }
        }
        assert!(!quote_line("line\nbreak").contains('\n'));
        assert_eq!(
            word("demo-address=10.0.0.1:8080"),
            "demo-address=10.0.0.1:8080"
        );
    }
}
