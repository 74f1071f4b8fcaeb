//! Debian control files (deb822): paragraphs of `Field: value` lines separated by blank lines,
//! a value continued on lines that start with a space or tab.

/// One paragraph, borrowed from the text it was read from: fields in order, names as written,
/// a continued value with its line breaks and leading spaces as in the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paragraph<'a> {
    pub fields: Vec<(&'a str, &'a str)>,
    /// The paragraph's text, as written.
    pub text: &'a str,
}

impl<'a> Paragraph<'a> {
    /// A field's value; field names are case-insensitive.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.fields
            .iter()
            .find(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| *value)
    }
}

/// A line that is not a field, a continuation or a blank.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: `{text}` is neither `Field: value` nor a continuation")]
pub struct ControlError {
    pub line: usize,
    pub text: String,
}

/// Every paragraph of `text`, borrowing from it. A PGP-signed file (InRelease) is read
/// through its signature.
pub fn parse(text: &str) -> Result<Vec<Paragraph<'_>>, ControlError> {
    let text = strip_signature(text);
    let mut paragraphs = Vec::new();
    let mut current = Paragraph::default();
    // Where the current paragraph and the current field's value start, as byte offsets.
    let mut paragraph_start = None;
    let mut value_start = 0;
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let line_start = offset;
        offset += line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        if content.trim().is_empty() {
            if let Some(start) = paragraph_start.take() {
                current.text = &text[start..line_start];
                paragraphs.push(std::mem::take(&mut current));
            }
            continue;
        }
        if content.starts_with(' ') || content.starts_with('\t') {
            match current.fields.last_mut() {
                Some((_, value)) => {
                    *value = text[value_start..line_start + content.len()].trim_end();
                }
                None => {
                    return Err(ControlError {
                        line: index + 1,
                        text: content.to_string(),
                    });
                }
            }
            continue;
        }
        if content.starts_with('#') {
            continue;
        }
        let Some(colon) = content.find(':') else {
            return Err(ControlError {
                line: index + 1,
                text: content.to_string(),
            });
        };
        paragraph_start.get_or_insert(line_start);
        let value = content[colon + 1..].trim();
        value_start = line_start + content.len() - content[colon + 1..].trim_start().len();
        current.fields.push((content[..colon].trim(), value));
    }
    if let Some(start) = paragraph_start {
        current.text = &text[start..];
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
        assert!(paragraphs[0].text.starts_with("Origin: Debian\n"));
    }

    #[test]
    fn a_stray_line_names_its_number() {
        let error = parse("Package: a\nnot a field\n").unwrap_err();
        assert_eq!(error.line, 2);
    }
}
