//! The plain-text tables both binaries print (`berth status`, `berth-build inspect`): each
//! column as wide as its widest cell, so long names and 64-hex paths keep the columns in line.

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    /// Numbers and sizes.
    Right,
}

/// The table of `header` and `rows`, one line each, columns two spaces apart, no trailing
/// spaces.
pub fn render<const N: usize>(
    header: [&str; N],
    align: [Align; N],
    rows: &[[String; N]],
) -> String {
    let rows: Vec<Vec<String>> = rows.iter().map(|row| row.to_vec()).collect();
    render_columns(&header, &align, &rows)
}

/// As [`render`], for a table whose columns are known only when it is printed (`-o wide`
/// adds some): each row as long as `header`, each column aligned as `align` says (the last
/// alignment holds for the columns after it).
pub fn render_columns(header: &[&str], align: &[Align], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|title| title.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(column, (cell, &width))| {
                match align
                    .get(column)
                    .or(align.last())
                    .copied()
                    .unwrap_or(Align::Left)
                {
                    Align::Left => format!("{cell:<width$}"),
                    Align::Right => format!("{cell:>width$}"),
                }
            })
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut text = line(header.to_vec());
    for row in rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let long = "a".repeat(70);
        let rows = [
            [long.clone(), "1.2 KiB".to_string()],
            ["b".to_string(), "12 B".to_string()],
        ];
        let text = render(["FILE", "SIZE"], [Align::Left, Align::Right], &rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("FILE{}     SIZE", " ".repeat(66)));
        assert_eq!(lines[1], format!("{long}  1.2 KiB"));
        assert_eq!(lines[2], format!("b{}     12 B", " ".repeat(69)));
    }
}
