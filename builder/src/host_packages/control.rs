//! Debian control files (deb822): paragraphs of `Field: value` lines separated by blank lines,
//! a value continued on lines that start with a space or tab.

/// One paragraph: fields in order, names as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paragraph {
    pub fields: Vec<(String, String)>,
}

impl Paragraph {
    /// A field's value; field names are case-insensitive.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The paragraph as text, with a final newline.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for (name, value) in &self.fields {
            text.push_str(name);
            text.push(':');
            if !value.starts_with('\n') {
                text.push(' ');
            }
            text.push_str(value);
            text.push('\n');
        }
        text
    }
}

/// A line that is not a field, a continuation or a blank.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: `{text}` is neither `Field: value` nor a continuation")]
pub struct ControlError {
    pub line: usize,
    pub text: String,
}

/// Every paragraph of `text`. A PGP-signed file (InRelease) is read through its signature.
pub fn parse(text: &str) -> Result<Vec<Paragraph>, ControlError> {
    let text = strip_signature(text);
    let mut paragraphs = Vec::new();
    let mut current = Paragraph::default();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            if !current.fields.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
            continue;
        }
        if line.starts_with(' ') || line.starts_with('\t') {
            match current.fields.last_mut() {
                Some((_, value)) => {
                    value.push('\n');
                    value.push_str(line);
                }
                None => {
                    return Err(ControlError {
                        line: index + 1,
                        text: line.to_string(),
                    });
                }
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(ControlError {
                line: index + 1,
                text: line.to_string(),
            });
        };
        current
            .fields
            .push((name.trim().to_string(), value.trim().to_string()));
    }
    if !current.fields.is_empty() {
        paragraphs.push(current);
    }
    Ok(paragraphs)
}

/// The signed text of a clear-signed message, or `text` itself.
fn strip_signature(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("-----BEGIN PGP SIGNED MESSAGE-----") else {
        return text;
    };
    // Armor headers (`Hash: SHA256`) end at the first blank line.
    let body = rest.split_once("\n\n").map_or(rest, |(_, body)| body);
    body.split_once("\n-----BEGIN PGP SIGNATURE-----")
        .map_or(body, |(signed, _)| signed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_fields_and_continuations() {
        let paragraphs = parse(
            "Package: a\nVersion: 1.0\nDescription: short\n more\n .\n\n\nPackage: b\nDepends: a (>= 1.0),\n c\n",
        )
        .unwrap();
        assert_eq!(paragraphs.len(), 2);
        assert_eq!(paragraphs[0].get("package"), Some("a"));
        assert_eq!(paragraphs[0].get("Description"), Some("short\n more\n ."));
        assert_eq!(paragraphs[1].get("Depends"), Some("a (>= 1.0),\n c"));
    }

    #[test]
    fn a_signed_release_reads_through_its_signature() {
        let paragraphs = parse(
            "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nOrigin: Debian\nSHA256:\n abc 12 main/Packages\n-----BEGIN PGP SIGNATURE-----\n\nxyz\n-----END PGP SIGNATURE-----\n",
        )
        .unwrap();
        assert_eq!(paragraphs.len(), 1);
        assert_eq!(paragraphs[0].get("Origin"), Some("Debian"));
        assert_eq!(paragraphs[0].get("SHA256"), Some("\n abc 12 main/Packages"));
    }

    #[test]
    fn a_stray_line_names_its_number() {
        let error = parse("Package: a\nnot a field\n").unwrap_err();
        assert_eq!(error.line, 2);
    }
}
