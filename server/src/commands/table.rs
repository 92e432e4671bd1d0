//! The CLI's plain text tables (`channel list`, `lane-group list`): columns padded by display
//! width with comfy-table (which measures with unicode-width), so Chinese app names and notes
//! (two columns each) line up with ASCII ones. No borders; two spaces between columns.

use comfy_table::presets::NOTHING;
use comfy_table::{CellAlignment, Table};

/// A table of `header` and `rows`, the columns in `right` aligned right, lines trimmed at the
/// end.
pub fn plain(header: &[&str], rows: Vec<Vec<String>>, right: &[usize]) -> String {
    let mut t = Table::new();
    t.load_preset(NOTHING).set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    let last = header.len().saturating_sub(1);
    for (i, c) in t.column_iter_mut().enumerate() {
        c.set_padding((0, if i == last { 0 } else { 2 }));
        if right.contains(&i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.to_string()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
pub(crate) mod tests {
    use unicode_width::UnicodeWidthStr;

    use super::*;

    /// The display column at which each of `cells` starts in `line`, found left to right.
    pub(crate) fn starts(line: &str, cells: &[&str]) -> Vec<usize> {
        let mut from = 0;
        cells
            .iter()
            .map(|c| {
                let at = from
                    + line[from..]
                        .find(c)
                        .unwrap_or_else(|| panic!("{c:?} in {line:?}"));
                from = at + c.len();
                line[..at].width()
            })
            .collect()
    }

    #[test]
    fn cjk_and_mixed_width_cells_keep_every_column_at_one_display_column() {
        let rows = vec![
            vec![
                "trade".into(),
                "发布中".into(),
                "10".into(),
                "order,cart".into(),
            ],
            vec![
                "支付通道".into(),
                "idle".into(),
                "100".into(),
                "订单服务,库存".into(),
            ],
            vec![
                "mix混合x".into(),
                "releasing".into(),
                "0".into(),
                "app".into(),
            ],
        ];
        let t = plain(&["id", "state", "blue_percent", "apps"], rows.clone(), &[2]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        // Left-aligned columns start at the same display column on every line; the
        // right-aligned one ends at the same column.
        let head = starts(lines[0], &["id", "state", "blue_percent", "apps"]);
        for (line, row) in lines[1..].iter().zip(&rows) {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            let at = starts(line, &cells);
            assert_eq!((at[0], at[1], at[3]), (head[0], head[1], head[3]), "{t}");
            assert_eq!(
                at[2] + cells[2].width(),
                head[2] + "blue_percent".width(),
                "{t}"
            );
        }
    }
}
