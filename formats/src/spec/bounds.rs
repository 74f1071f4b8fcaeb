//! What a spec may be before the YAML parser reads it (its size, depth and characters), and
//! where a key is, for an error that names its line.

/// Control characters a spec may not hold (tabs and line ends are text).
pub(super) fn is_forbidden(character: char) -> bool {
    character.is_control() && !matches!(character, '\t' | '\n' | '\r')
}

/// The 1-based line where `text` first nests deeper than `limit`, counting open block
/// indentation levels, `- ` items opened on the line, and open flow brackets. It errs on the
/// side of counting (brackets inside quotes count too): a real spec is far from the limit.
pub(super) fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow: usize = 0;
    for (index, line) in text.lines().enumerate() {
        let content = line.trim_start_matches(' ');
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = line.len() - content.len();
        if flow == 0 {
            while indents.last().is_some_and(|&open| open >= indent) {
                indents.pop();
            }
            indents.push(indent);
        }
        let mut items = 0;
        let mut rest = content;
        // `- ` items and `? ` complex keys each open a level on the line.
        while let Some(after) = ["- ", "-\t", "? ", "?\t"]
            .iter()
            .find_map(|marker| rest.strip_prefix(marker))
        {
            items += 1;
            rest = after.trim_start();
        }
        let mut deepest = flow;
        for character in content.chars() {
            match character {
                '[' | '{' => {
                    flow += 1;
                    deepest = deepest.max(flow);
                }
                ']' | '}' => flow = flow.saturating_sub(1),
                _ => {}
            }
        }
        if indents.len() + items + deepest > limit {
            return Some(index + 1);
        }
    }
    None
}

/// The 1-based line where `key:` first appears, for errors the YAML parser does not locate.
pub(super) fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|line| is_key(line.trim_start(), key))
        .map(|index| index + 1)
}

/// Whether `line` (its indentation trimmed) starts with `key:` (the key quoted or not).
fn is_key(line: &str, key: &str) -> bool {
    line.strip_prefix(key)
        .or_else(|| {
            line.strip_prefix('"')
                .and_then(|l| l.strip_prefix(key))
                .and_then(|l| l.strip_prefix('"'))
        })
        .is_some_and(|rest| rest.trim_start().starts_with(':'))
}

/// The line (from 1) of the key at `path` in a block-style YAML `text`: each key looked for
/// in the block under the one before it. When a later key is not found there (it sits in a
/// flow mapping, `demo: {port: 1}`), the line of the deepest key found.
pub(super) fn line_of_path(text: &str, path: &[&str]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = None;
    let mut start = 0;
    let mut parent_indent: Option<usize> = None;
    for key in path {
        let mut hit = None;
        for (index, line) in lines.iter().enumerate().skip(start) {
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let indent = line.len() - trimmed.len();
            if parent_indent.is_some_and(|parent| indent <= parent) {
                break;
            }
            if is_key(trimmed, key) {
                hit = Some((index, indent));
                break;
            }
        }
        let Some((index, indent)) = hit else { break };
        found = Some(index + 1);
        start = index + 1;
        parent_indent = Some(indent);
    }
    found
}
