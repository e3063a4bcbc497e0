//! What a running prompt needs: the user's content blocks as the turn's
//! text, the observer that sends the log's updates, and the editor's
//! permission for the tools the composition marks.

use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use cordis_engine::agent::{Approval, Approver, ToolCallRequest, TurnObserver};
use cordis_engine::loader::acp::AcpConfig;
use cordis_engine::tools::ToolRegistry;
use cordis_session::{Event, Session};
use cordis_sync::LockExt;
use serde_json::{json, Value};

use crate::live::Live;
use crate::rpc::{Outgoing, RpcError};
use crate::updates::{kind, ToolLook, UpdateStream};

/// Titles from the tools' own `present_call` (`title`), else the name.
pub(crate) struct Titles<'a>(pub(crate) &'a ToolRegistry);

impl ToolLook for Titles<'_> {
    fn title(&self, name: &str, arguments: &str) -> String {
        self.0
            .get(name)
            .and_then(|t| t.present_call(arguments).get("title").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| name.to_string())
    }
}

/// The turn's text from a prompt's content blocks: text as it is, a
/// resource link as `[name](uri)`, an embedded text resource fenced under
/// its URI. Images, audio and binary resources are refused (the agent's
/// prompt capabilities do not offer them).
///
/// # Errors
/// [`RpcError`] `-32602` naming the block that cannot be used.
pub(crate) fn prompt_text(prompt: &Value) -> Result<String, RpcError> {
    let blocks = prompt.as_array().ok_or_else(|| RpcError::params("`prompt` (an array of content blocks) is required"))?;
    let mut parts = Vec::with_capacity(blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        let at = format!("prompt[{i}]");
        match block["type"].as_str() {
            Some("text") => parts.push(block["text"].as_str().ok_or_else(|| RpcError::params(format!("{at}: `text` must be a string")))?.to_string()),
            Some("resource_link") => {
                let uri = block["uri"].as_str().ok_or_else(|| RpcError::params(format!("{at}: a resource link needs `uri`")))?;
                let name = block["name"].as_str().unwrap_or(uri).replace('\\', "\\\\").replace('[', "\\[").replace(']', "\\]");
                parts.push(format!("[{name}](<{}>)", uri.replace('<', "%3C").replace('>', "%3E")));
            }
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or("(no uri)");
                match resource["text"].as_str() {
                    Some(text) => {
                        // A fence longer than any run of backticks inside.
                        let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
                        let fence = "`".repeat(longest.max(2) + 1);
                        parts.push(format!("{uri}:\n{fence}\n{text}\n{fence}"));
                    }
                    None => {
                        return Err(RpcError::params(format!("{at}: the embedded resource {uri} has no text (binary resources are not supported)")))
                    }
                }
            }
            Some(other @ ("image" | "audio")) => {
                return Err(RpcError::params(format!("{at}: {other} content is not supported (see promptCapabilities)")));
            }
            Some(other) => return Err(RpcError::params(format!("{at}: unknown content type `{other}`"))),
            None => return Err(RpcError::params(format!("{at}: a content block needs `type`"))),
        }
    }
    let text = parts.join("\n\n");
    if text.trim().is_empty() {
        return Err(RpcError::params("the prompt is empty"));
    }
    Ok(text)
}

/// Sends each appended event's updates to the client.
pub(crate) struct Observer<'a> {
    out: &'a Outgoing,
    live: &'a Live,
    config: &'a AcpConfig,
    titles: &'a Titles<'a>,
    stream: UpdateStream,
}

impl<'a> Observer<'a> {
    pub(crate) fn new(out: &'a Outgoing, live: &'a Live, config: &'a AcpConfig, titles: &'a Titles<'a>) -> Observer<'a> {
        let stream = UpdateStream::live().with_plan_shown(live.plan_shown.load(Ordering::SeqCst));
        Observer { out, live, config, titles, stream }
    }
}

impl Drop for Observer<'_> {
    fn drop(&mut self) {
        self.live.plan_shown.store(self.stream.plan_shown(), Ordering::SeqCst);
    }
}

impl TurnObserver for Observer<'_> {
    fn on_event(&mut self, session: &Session, event: &Event) {
        for mut update in self.stream.updates(event, self.titles) {
            // A call that waits for the user's permission is pending
            // until it is given.
            if update["sessionUpdate"] == "tool_call" {
                let name = event.data_value()["name"].as_str().unwrap_or_default().to_string();
                let decided = self.live.decided.lock_or_recover().get(&name).copied();
                if self.config.needs_approval(&name) && decided.is_none() {
                    update["status"] = json!("pending");
                }
            }
            self.out.notify("session/update", json!({"sessionId": session.id(), "update": update}));
        }
    }

    fn on_notice(&mut self, text: &str) {
        eprintln!("cordis acp: session {}: {text}", self.live.session.id());
    }
}

/// The option ids offered in a permission request.
const OPTIONS: [(&str, &str, &str); 4] = [
    ("allow-once", "Allow", "allow_once"),
    ("allow-always", "Always allow", "allow_always"),
    ("reject-once", "Reject", "reject_once"),
    ("reject-always", "Always reject", "reject_always"),
];

/// Asks the editor (`session/request_permission`) before a call of a tool
/// the ACP entry's `approve` lists; "always" answers hold for the rest of
/// the session.
pub(crate) struct EditorApproval<'a> {
    pub(crate) out: &'a Outgoing,
    pub(crate) live: &'a Live,
    pub(crate) config: &'a AcpConfig,
    pub(crate) titles: &'a Titles<'a>,
}

impl Approver for EditorApproval<'_> {
    fn approve(&self, call: &ToolCallRequest) -> Approval {
        if !self.config.needs_approval(&call.name) {
            return Approval::Allowed;
        }
        let session = self.live.session.id();
        match self.live.decided.lock_or_recover().get(&call.name) {
            Some(true) => return Approval::Allowed,
            Some(false) => return Approval::Rejected(format!("the user rejected every call of {} in this session; do not call it again", call.name)),
            None => {}
        }
        let raw_input = serde_json::from_str::<Value>(&call.arguments).unwrap_or_else(|_| Value::String(call.arguments.clone()));
        let options: Vec<Value> = OPTIONS.iter().map(|(id, name, kind)| json!({"optionId": id, "name": name, "kind": kind})).collect();
        let (request, answer) = self.out.request(
            "session/request_permission",
            json!({"sessionId": session, "options": options, "toolCall": {
                "toolCallId": call.id,
                "title": self.titles.title(&call.name, &call.arguments),
                "kind": kind(&call.name),
                "status": "pending",
                "rawInput": raw_input,
            }}),
        );
        let outcome = loop {
            match answer.recv_timeout(Duration::from_millis(10)) {
                Ok(outcome) => break outcome,
                Err(RecvTimeoutError::Timeout) if self.live.interrupt.is_set() => {
                    // A cancel answers the question: the call does not run.
                    self.out.forget(request);
                    return Approval::Cancelled;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Approval::Cancelled,
            }
        };
        let chosen = match outcome {
            Ok(v) => match (v["outcome"]["outcome"].as_str(), v["outcome"]["optionId"].as_str()) {
                (Some("selected"), Some(id)) => id.to_string(),
                (Some("cancelled"), _) => {
                    self.live.interrupt.set();
                    return Approval::Cancelled;
                }
                _ => {
                    return Approval::Rejected(format!("the editor's answer to the permission request could not be read ({v}); the call was not run"))
                }
            },
            Err(e) => return Approval::Rejected(format!("the editor could not ask for permission ({}); the call was not run", e.message)),
        };
        let allowed = match chosen.as_str() {
            "allow-once" => true,
            "allow-always" => {
                self.live.decided.lock_or_recover().insert(call.name.clone(), true);
                true
            }
            "reject-always" => {
                self.live.decided.lock_or_recover().insert(call.name.clone(), false);
                false
            }
            _ => false,
        };
        if allowed {
            self.out.notify(
                "session/update",
                json!({"sessionId": session, "update": {"sessionUpdate": "tool_call_update", "toolCallId": call.id, "status": "in_progress"}}),
            );
            Approval::Allowed
        } else {
            Approval::Rejected(format!("the user rejected this call of {}; nothing was run", call.name))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_blocks_become_the_turn_text() {
        let text = prompt_text(&json!([
            {"type": "text", "text": "Fix the bug in"},
            {"type": "resource_link", "uri": "file:///w/src/lib.rs", "name": "lib.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/notes.md", "text": "be careful"}}
        ]))
        .unwrap();
        assert_eq!(text, "Fix the bug in\n\n[lib.rs](<file:///w/src/lib.rs>)\n\nfile:///w/notes.md:\n```\nbe careful\n```");
        let tricky = prompt_text(&json!([
            {"type": "resource_link", "uri": "file:///w/a>b", "name": "a](evil)"},
            {"type": "resource", "resource": {"uri": "file:///w/r.md", "text": "```rust\nfn x() {}\n```"}}
        ]))
        .unwrap();
        assert_eq!(tricky, "[a\\](evil)](<file:///w/a%3Eb>)\n\nfile:///w/r.md:\n````\n```rust\nfn x() {}\n```\n````");
        assert!(prompt_text(&json!([{"type": "image", "data": "", "mimeType": "image/png"}])).unwrap_err().message.contains("image"));
        assert!(prompt_text(&json!([])).is_err());
        assert!(prompt_text(&json!("hi")).is_err());
    }
}
