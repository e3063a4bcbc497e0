//! A turn printed as it happens: streamed text, tool calls and results,
//! and the projection views a plugin event changes. Used by `run` and
//! `session compact`.

use std::io::Write;

use cordis_engine::agent::{ToolCallRequest, TurnObserver};
use cordis_engine::runtime::Host;
use cordis_engine::tools::ToolResult;
use cordis_session::{event_message, Event, Session};

use crate::cli::render;

/// Prints a turn as it happens.
pub(crate) struct Printer<'a, W: Write> {
    out: &'a mut W,
    host: &'a Host,
    /// Projection views to print after the tool result: (key, view).
    pending_views: Vec<(String, String)>,
    /// The label of the streamed block being printed (`assistant`,
    /// `reasoning`), while its line is open.
    streaming: Option<&'static str>,
    /// Whether the current step's answer was streamed (its text is on the
    /// terminal already).
    streamed: bool,
}

impl<'a, W: Write> Printer<'a, W> {
    pub(crate) fn new(out: &'a mut W, host: &'a Host) -> Printer<'a, W> {
        Printer { out, host, pending_views: Vec::new(), streaming: None, streamed: false }
    }

    /// Ends the line of a streamed block, if one is open.
    pub(crate) fn end_stream(&mut self) {
        if self.streaming.take().is_some() {
            let _ = writeln!(self.out);
        }
    }

    fn stream(&mut self, label: &'static str, text: &str) {
        if self.streaming != Some(label) {
            self.end_stream();
            render::stream_start(self.out, label);
            self.streaming = Some(label);
        }
        self.streamed = true;
        render::stream_text(self.out, text);
        let _ = self.out.flush();
    }
}

impl<W: Write> TurnObserver for Printer<'_, W> {
    fn on_event(&mut self, session: &Session, event: &Event) {
        match event.kind.as_str() {
            "assistant/chunk" => {
                let data = event.data_value();
                let chunk = &data["chunk"];
                let text = chunk["text"].as_str().unwrap_or_default();
                match chunk["type"].as_str() {
                    Some("text-delta") => self.stream("assistant", text),
                    Some("reasoning-delta") => self.stream("reasoning", text),
                    _ => {}
                }
            }
            "step/start" => self.streamed = false,
            "assistant/message" if self.streamed => {
                // The text is on the terminal already: only the calls.
                self.end_stream();
                if let Some(cordis_session::Message::Assistant { tool_calls, .. }) = event_message(event) {
                    render::tool_calls(self.out, &tool_calls);
                }
            }
            "user/message" | "assistant/message" => {
                self.end_stream();
                if let Some(m) = event_message(event) {
                    render::message(self.out, &m);
                }
            }
            "tool/call" | "tool/result" | "turn/start" | "turn/end" | "step/end" => self.end_stream(),
            kind => {
                self.end_stream();
                // A plugin's surface event (a reminder): the model reads it.
                if event.surface_op.is_some() {
                    if let Some(m) = event_message(event) {
                        render::message(self.out, &m);
                    }
                }
                // A plugin event: show every projection it changes.
                for (p, state) in session.states() {
                    if p.folds(kind) {
                        let view = p.render(&state);
                        if !view.is_empty() {
                            self.pending_views.push((p.key.clone(), view));
                        }
                    }
                }
            }
        }
    }

    fn on_notice(&mut self, text: &str) {
        self.end_stream();
        let _ = self.out.flush();
        eprintln!("model     › {}", render::printable(text));
    }

    fn on_tool_result(&mut self, call: &ToolCallRequest, result: &ToolResult) {
        let title = self
            .host
            .services
            .tools
            .get(&call.name)
            .and_then(|t| t.present_call(&call.arguments).get("title").and_then(|v| v.as_str()).map(str::to_string))
            .unwrap_or_else(|| call.name.clone());
        render::tool_result(self.out, &title, result);
        for (key, view) in std::mem::take(&mut self.pending_views) {
            render::view(self.out, &key, &view);
        }
    }
}
