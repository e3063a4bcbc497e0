//! Plans as the pages show them.
//!
//! The host knows nothing about todos, and neither does this crate: a
//! *plan* is any projection state shaped as a list of
//! `{"content": string, "status": "completed" | "in_progress" | "pending"}`
//! (the `todos` projection of `tool-todo` is one), and a *plan row* is any
//! tool call whose arguments carry such a list under `todos` (a
//! `todo_write` call).
//!
//! - The strip's header gives the count of each status joined by ` · `, in
//!   the order completed, in progress, pending, zero counts left out
//!   ([`Counts`]); it names no task, so nothing in it can be clipped.
//! - A row ([`row_summary`]) names the first `in_progress` item of the call
//!   and counts the others apart, so a narrow page ellipsizes the name and
//!   keeps the count. Call arguments are not validated, so the row reads
//!   them as they are: when the first active item's content is unusable
//!   (missing, not a string, blank once trimmed), the active clause and its
//!   count are dropped, and done/total stay.

use serde_json::Value;

/// A plan item's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `completed`.
    Completed,
    /// `in_progress`.
    InProgress,
    /// `pending`.
    Pending,
}

impl Status {
    /// The status a JSON string names, if it is one of the three.
    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "completed" => Some(Status::Completed),
            "in_progress" => Some(Status::InProgress),
            "pending" => Some(Status::Pending),
            _ => None,
        }
    }
}

/// One item of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// What the task is, as stored.
    pub content: String,
    /// Its status.
    pub status: Status,
}

/// The number of items of each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Items `completed`.
    pub completed: usize,
    /// Items `in_progress`.
    pub in_progress: usize,
    /// Items `pending`.
    pub pending: usize,
}

impl Counts {
    /// The counts of `items`.
    pub fn of(items: &[Item]) -> Counts {
        let mut c = Counts::default();
        for item in items {
            match item.status {
                Status::Completed => c.completed += 1,
                Status::InProgress => c.in_progress += 1,
                Status::Pending => c.pending += 1,
            }
        }
        c
    }

    /// The non-zero counts in header order: completed, in progress, pending.
    pub fn segments(&self) -> Vec<(usize, Status)> {
        [(self.completed, Status::Completed), (self.in_progress, Status::InProgress), (self.pending, Status::Pending)]
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .collect()
    }
}

/// The plan a projection state holds: `Some` for a list whose every element
/// is `{content: string, status: one of the three}` (other keys ignored),
/// `None` for anything else (`null`, the state of a projection that is not
/// a plan).
pub fn plan_of(state: &Value) -> Option<Vec<Item>> {
    state
        .as_array()?
        .iter()
        .map(|v| {
            let content = v.get("content")?.as_str()?.to_string();
            let status = Status::parse(v.get("status")?.as_str()?)?;
            Some(Item { content, status })
        })
        .collect()
}

/// The one-line summary of a plan row, in parts (see the [module](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSummary {
    /// Items whose status is `completed`.
    pub done: usize,
    /// Items in the list.
    pub total: usize,
    /// The first `in_progress` item's content, trimmed and on one line,
    /// when it is usable.
    pub active: Option<String>,
    /// How many other items are `in_progress` (0 when `active` is `None`).
    pub more_active: usize,
}

/// The summary of a call whose arguments are `args` (the call's JSON
/// arguments, unvalidated); `None` when `args.todos` is not a list.
pub fn row_summary(args: &Value) -> Option<RowSummary> {
    let todos = args.get("todos")?.as_array()?;
    let status = |v: &Value| v.get("status").and_then(Value::as_str).and_then(Status::parse);
    let done = todos.iter().filter(|v| status(v) == Some(Status::Completed)).count();
    let active_count = todos.iter().filter(|v| status(v) == Some(Status::InProgress)).count();
    let active = todos
        .iter()
        .find(|v| status(v) == Some(Status::InProgress))
        .and_then(|v| v.get("content"))
        .and_then(Value::as_str)
        .map(crate::html::one_line)
        .filter(|s| !s.is_empty());
    let more_active = if active.is_some() { active_count - 1 } else { 0 };
    Some(RowSummary { done, total: todos.len(), active, more_active })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn four() -> Value {
        json!({"todos": [
            {"content": "read the code", "status": "in_progress"},
            {"content": "ship it", "status": "completed"},
            {"content": "watch the background build", "status": "in_progress"},
            {"content": "write the fix", "status": "pending"},
        ]})
    }

    #[test]
    fn the_parallel_plan_counts_every_status() {
        let plan = plan_of(&four()["todos"]).unwrap();
        let counts = Counts::of(&plan);
        assert_eq!(counts.segments(), vec![(1, Status::Completed), (2, Status::InProgress), (1, Status::Pending)]);
        assert_eq!(plan_of(&json!(null)), None);
        assert_eq!(plan_of(&json!([{"content": "x", "status": "done"}])), None);
        assert_eq!(plan_of(&json!([])), Some(vec![]));
    }

    #[test]
    fn the_row_names_the_first_active_item_and_counts_the_rest() {
        let s = row_summary(&four()).unwrap();
        assert_eq!(s, RowSummary { done: 1, total: 4, active: Some("read the code".into()), more_active: 1 });
    }

    #[test]
    fn an_unusable_first_active_item_drops_the_clause_and_keeps_the_counts() {
        for bad in [json!(null), json!(7), json!("   "), json!("\n\t")] {
            let args = json!({"todos": [
                {"content": bad, "status": "in_progress"},
                {"content": "b", "status": "in_progress"},
                {"content": "c", "status": "completed"},
            ]});
            assert_eq!(row_summary(&args).unwrap(), RowSummary { done: 1, total: 3, active: None, more_active: 0 });
        }
        let missing = json!({"todos": [{"status": "in_progress"}, {"content": "b", "status": "in_progress"}]});
        assert_eq!(row_summary(&missing).unwrap(), RowSummary { done: 0, total: 2, active: None, more_active: 0 });
        assert_eq!(row_summary(&json!({"todos": "[]"})), None);
        assert_eq!(row_summary(&json!([])), None);
    }
}
