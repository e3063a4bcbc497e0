//! The plan view: a multi-line rendering of the list and a one-line summary.
//! The display surfaces are part of the todo semantics: a plan with several
//! items in progress must read right on every one of them.
//!
//! - The header counts every status, omits zero counts and joins the rest
//!   with ` · ` in the order completed, in progress, pending:
//!   `1 completed · 2 in progress · 1 pending`. An empty list reads
//!   `no todos`.
//! - Each item is one line: `✓ content` (completed), `● content`
//!   (in progress), `○ content` (pending).
//! - The summary is `done/total completed · <first in-progress content>` and,
//!   when more items are in progress, ` +N` for the rest. It names the first
//!   active item and counts the others, so a parallel plan never reads as if
//!   one task were running. [`PlanSummary`] keeps the parts apart because a
//!   UI ellipsizes the name but must keep the `+N` visible.
//!
//! The view is one line per item, so line breaks inside a content (a content
//! is trimmed, not flattened) are shown as single spaces here; the stored list
//! keeps them.

use std::fmt;

use crate::item::{Counts, Status, Todo};
use crate::trim::is_js_line_terminator;

/// The header rendered for an empty list.
pub const EMPTY_HEADER: &str = "no todos";

/// The separator between header segments and between summary parts.
pub const SEPARATOR: &str = " · ";

/// The marker of an item line for `status`: `✓` completed, `●` in progress,
/// `○` pending.
pub fn marker(status: Status) -> char {
    match status {
        Status::Completed => '✓',
        Status::InProgress => '●',
        Status::Pending => '○',
    }
}

/// The header for `counts`: non-zero counts in the order completed, in
/// progress, pending, joined by ` · ` (`1 completed · 2 in progress · 1 pending`);
/// [`EMPTY_HEADER`] when every count is zero.
pub fn plan_header(counts: &Counts) -> String {
    let segments: Vec<String> = [(counts.completed, "completed"), (counts.in_progress, "in progress"), (counts.pending, "pending")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, label)| format!("{n} {label}"))
        .collect();
    if segments.is_empty() {
        EMPTY_HEADER.to_string()
    } else {
        segments.join(SEPARATOR)
    }
}

/// The multi-line view of a list: [`plan_header`], then one line per item
/// (`✓ content`, `● content`, `○ content`), joined by `\n` with no trailing
/// newline.
pub fn render_plan(todos: &[Todo]) -> String {
    let mut out = plan_header(&Counts::of(todos));
    for todo in todos {
        out.push('\n');
        out.push(marker(todo.status));
        out.push(' ');
        out.push_str(&one_line(&todo.content));
    }
    out
}

/// The one-line summary of a plan, in separate parts so a narrow UI can
/// ellipsize [`active`](PlanSummary::active) while keeping
/// [`more_active`](PlanSummary::more_active) visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanSummary {
    /// `done/total completed`, e.g. `1/4 completed`.
    pub counts: String,
    /// The content of the first `in_progress` item (line breaks shown as
    /// spaces), if any.
    pub active: Option<String>,
    /// How many further items are `in_progress` besides `active`; `0` when
    /// there are none (or no active item at all).
    pub more_active: usize,
}

impl PlanSummary {
    /// The `+N` suffix for the further active items, if there are any.
    pub fn suffix(&self) -> Option<String> {
        (self.more_active > 0).then(|| format!("+{}", self.more_active))
    }
}

/// Joins the parts: `1/4 completed · read the code +2`, `1/4 completed · read the code`,
/// or `1/4 completed` with no active item.
impl fmt::Display for PlanSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.counts)?;
        if let Some(active) = &self.active {
            write!(f, "{SEPARATOR}{active}")?;
            if let Some(suffix) = self.suffix() {
                write!(f, " {suffix}")?;
            }
        }
        Ok(())
    }
}

/// The summary of `todos`: completed over total, the first `in_progress`
/// item in list order (the model's order is the only order the view
/// honours), and how many more are `in_progress`.
pub fn plan_summary(todos: &[Todo]) -> PlanSummary {
    let counts = Counts::of(todos);
    let active = todos.iter().find(|t| t.status == Status::InProgress).map(|t| one_line(&t.content));
    PlanSummary {
        counts: format!("{}/{} completed", counts.completed, counts.total()),
        more_active: if active.is_some() { counts.in_progress - 1 } else { 0 },
        active,
    }
}

/// `text` on one line: every run of line terminators becomes one space.
fn one_line(text: &str) -> String {
    if !text.contains(is_js_line_terminator) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut in_break = false;
    for c in text.chars() {
        if is_js_line_terminator(c) {
            if !in_break {
                out.push(' ');
            }
            in_break = true;
        } else {
            out.push(c);
            in_break = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Vec<Todo> {
        vec![
            Todo::new("read the code", Status::InProgress),
            Todo::new("ship it", Status::Completed),
            Todo::new("watch the background build", Status::InProgress),
            Todo::new("write the fix", Status::Pending),
        ]
    }

    #[test]
    fn header_orders_and_omits_zero_counts() {
        assert_eq!(plan_header(&Counts { pending: 1, in_progress: 2, completed: 1 }), "1 completed · 2 in progress · 1 pending");
        assert_eq!(plan_header(&Counts { pending: 3, in_progress: 0, completed: 0 }), "3 pending");
        assert_eq!(plan_header(&Counts { pending: 1, in_progress: 0, completed: 2 }), "2 completed · 1 pending");
        assert_eq!(plan_header(&Counts::default()), "no todos");
    }

    #[test]
    fn renders_one_line_per_item() {
        assert_eq!(
            render_plan(&plan()),
            "1 completed · 2 in progress · 1 pending\n● read the code\n✓ ship it\n● watch the background build\n○ write the fix"
        );
        assert_eq!(render_plan(&[]), "no todos");
    }

    #[test]
    fn summary_names_first_active_and_counts_the_rest() {
        let summary = plan_summary(&plan());
        assert_eq!(summary, PlanSummary { counts: "1/4 completed".into(), active: Some("read the code".into()), more_active: 1 });
        assert_eq!(summary.suffix().as_deref(), Some("+1"));
        assert_eq!(summary.to_string(), "1/4 completed · read the code +1");
    }

    #[test]
    fn summary_with_one_or_no_active_item() {
        let one = vec![Todo::new("a", Status::Completed), Todo::new("b", Status::InProgress), Todo::new("c", Status::Pending)];
        assert_eq!(plan_summary(&one).to_string(), "1/3 completed · b");
        assert_eq!(plan_summary(&one).suffix(), None);
        let none = vec![Todo::new("a", Status::Completed), Todo::new("b", Status::Completed)];
        let summary = plan_summary(&none);
        assert_eq!(summary, PlanSummary { counts: "2/2 completed".into(), active: None, more_active: 0 });
        assert_eq!(summary.to_string(), "2/2 completed");
        assert_eq!(plan_summary(&[]).to_string(), "0/0 completed");
    }

    #[test]
    fn line_breaks_inside_content_stay_on_one_line() {
        let todos = vec![Todo::new("first\r\nsecond\u{2028}third", Status::InProgress)];
        assert_eq!(render_plan(&todos), "1 in progress\n● first second third");
        assert_eq!(plan_summary(&todos).active.as_deref(), Some("first second third"));
    }
}
