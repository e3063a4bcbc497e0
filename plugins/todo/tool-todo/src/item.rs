//! The todo item, its status, and per-status counts.
//!
//! An item is exactly `{content, status}` (the design drops
//! claude-code's `activeForm`, ids and priority on purpose: every dropped field
//! is one less thing the model has to produce per call). The list is always
//! sent and stored whole, so items need no identity of their own.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use cordis_abi::sdk::prelude::JsonSchema;

/// Where a todo stands: `pending`, `in_progress` or `completed` (the triple
/// codex's `update_plan` uses).
///
/// Serialized in snake case. The variants deliberately carry no doc comments:
/// `schemars` would turn documented unit variants into a `oneOf`, while the
/// tool schema must say plainly `{"type": "string", "enum": [...]}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[allow(missing_docs)]
    Pending,
    #[allow(missing_docs)]
    InProgress,
    #[allow(missing_docs)]
    Completed,
}

impl Status {
    /// Every status, in the order the schema lists them.
    pub const ALL: [Status; 3] = [Status::Pending, Status::InProgress, Status::Completed];

    /// The wire name: `pending`, `in_progress` or `completed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
        }
    }

    /// The status with wire name `name` (case-sensitive), if any.
    pub fn from_wire(name: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// One task of the plan: `{"content": "...", "status": "..."}`.
///
/// As a tool argument the schema rejects any other key; in a stored `todo/write` event, `content` is already
/// trimmed, non-empty and unique within its list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = drop_description)]
pub struct Todo {
    /// The task itself, as one short imperative line.
    pub content: String,
    /// pending (not started yet), in_progress (being worked on right now) or completed (finished).
    pub status: Status,
}

impl Todo {
    /// A todo with the given content and status.
    pub fn new(content: impl Into<String>, status: Status) -> Self {
        Todo { content: content.into(), status }
    }
}

/// A [`Todo`] as a call's arguments give it, with its `content` borrowed
/// from the host's parse of the arguments instead of copied: the tool's
/// call path deserializes these (see `TypedTool::execute_parsed`).
///
/// Same JSON as [`Todo`] both ways: the keys `content` and `status`, and
/// no other key. A `content` with escapes
/// that serde has to unescape from JSON text comes out owned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoRef<'a> {
    /// The task itself.
    #[serde(borrow)]
    pub content: Cow<'a, str>,
    /// Where it stands.
    pub status: Status,
}

impl TodoRef<'_> {
    /// The same todo with its content owned.
    pub fn to_todo(&self) -> Todo {
        Todo::new(self.content.as_ref(), self.status)
    }
}

/// Removes the `description` a type's doc comment gives its schema: these doc
/// comments are written for Rust readers, while the model-facing schema
/// carries only the field descriptions.
pub(crate) fn drop_description(schema: &mut schemars::Schema) {
    schema.remove("description");
}

/// The data of a `todo/write` event: the whole list after the write,
/// `{"todos": [...]}` (whole-list replace, last write wins).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoWrite {
    /// The complete list, contents trimmed.
    pub todos: Vec<Todo>,
}

/// How many todos have each status.
///
/// Serializes as `{"pending": P, "inProgress": I, "completed": C}`, in that
/// key order: the `counts` part of the tool's structured value, matching the
/// reference implementation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Todos not started yet.
    pub pending: usize,
    /// Todos being worked on now.
    pub in_progress: usize,
    /// Finished todos.
    pub completed: usize,
}

impl Counts {
    /// Counts the statuses of `todos`.
    pub fn of(todos: &[Todo]) -> Counts {
        Counts::of_statuses(todos.iter().map(|t| t.status))
    }

    /// Counts `statuses`.
    pub fn of_statuses(statuses: impl IntoIterator<Item = Status>) -> Counts {
        let mut counts = Counts::default();
        for status in statuses {
            match status {
                Status::Pending => counts.pending += 1,
                Status::InProgress => counts.in_progress += 1,
                Status::Completed => counts.completed += 1,
            }
        }
        counts
    }

    /// The number of todos counted.
    pub fn total(&self) -> usize {
        self.pending + self.in_progress + self.completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_round_trips_in_snake_case() {
        for status in Status::ALL {
            let text = serde_json::to_value(status).unwrap();
            assert_eq!(text, json!(status.as_str()));
            assert_eq!(Status::from_wire(status.as_str()), Some(status));
        }
        assert_eq!(Status::from_wire("PENDING"), None);
        assert_eq!(Status::from_wire("done"), None);
    }

    #[test]
    fn counts_serialize_in_reference_key_order() {
        let todos = vec![
            Todo::new("a", Status::Completed),
            Todo::new("b", Status::InProgress),
            Todo::new("c", Status::InProgress),
            Todo::new("d", Status::Pending),
        ];
        let counts = Counts::of(&todos);
        assert_eq!(counts, Counts { pending: 1, in_progress: 2, completed: 1 });
        assert_eq!(counts.total(), 4);
        assert_eq!(serde_json::to_string(&counts).unwrap(), r#"{"pending":1,"inProgress":2,"completed":1}"#);
    }

    #[test]
    fn todo_rejects_other_keys() {
        let err = serde_json::from_value::<Todo>(json!({"content": "x", "status": "pending", "id": 1}));
        assert!(err.is_err());
    }
}
