//! What rmcp drops or refuses, told under the server's name.
//!
//! rmcp reports what its transports discard only through `tracing`: an
//! SSE event whose data is not a JSON-RPC message (at `debug`), a body of
//! an unexpected content type, an error body that does not parse, a
//! stream that failed (at `warn` or `error`). This library is a plugin of
//! its own, with its own copy of `tracing` and no subscriber, so without
//! this module all of that vanishes. [`Forward`] is a subscriber set as
//! the default on the threads of one entry's runtime (the only threads
//! that run that entry's rmcp code), so every such event is the entry's:
//! it is written to the host's stderr through the entry's [`Sink`] as
//! `mcp-client(NAME): rmcp dropped or refused something: MESSAGE (FIELDS)`.
//! What it forwards: rmcp's events at `warn` and `error`, and every event
//! of its SSE reader (`rmcp::transport::common::client_side_sse`), which
//! is where undecodable events are skipped.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::{DefaultGuard, Interest};
use tracing::{Event, Level, Metadata, Subscriber};

use crate::stderr::Sink;

/// The module of rmcp whose every event is told: its SSE reader.
const SSE_READER: &str = "rmcp::transport::common::client_side_sse";

/// Longest text of one told event, in bytes.
const MAX_TEXT: usize = 2048;

/// A subscriber forwarding rmcp's events of one entry to its sink.
pub struct Forward {
    label: String,
    sink: Sink,
    next_span: AtomicU64,
}

impl Forward {
    /// Forwards to `sink` under `label` (`mcp-client(NAME)`).
    pub fn new(label: String, sink: Sink) -> Forward {
        Forward { label, sink, next_span: AtomicU64::new(1) }
    }

    /// Whether an event of `metadata` is told.
    pub fn wants(metadata: &Metadata<'_>) -> bool {
        let target = metadata.target();
        if !(target == "rmcp" || target.starts_with("rmcp::")) {
            return false;
        }
        *metadata.level() <= Level::WARN || target.starts_with(SSE_READER)
    }

    /// The line told for an event: its message, then its other fields.
    pub fn line(&self, event: &Event<'_>) -> String {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut text = fields.message;
        if !fields.rest.is_empty() {
            let _ = write!(text, " ({})", fields.rest.join(", "));
        }
        if text.len() > MAX_TEXT {
            let mut cut = MAX_TEXT;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        let text: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        format!("{}: rmcp dropped or refused something ({}): {text}", self.label, event.metadata().level().as_str().to_ascii_lowercase())
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.rest.push(format!("{}={value:?}", field.name()));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.rest.push(format!("{}={value}", field.name()));
        }
    }
}

impl Subscriber for Forward {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        // Other entries' subscribers (and threads with none) decide for
        // themselves: ask each time.
        if Forward::wants(metadata) {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        Forward::wants(metadata)
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed).max(1))
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        self.sink.notice(self.line(event));
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

thread_local! {
    static DEFAULT: RefCell<Option<DefaultGuard>> = const { RefCell::new(None) };
}

/// Makes `dispatch` the default subscriber of the calling thread until
/// [`leave`] (for a runtime's `on_thread_start`).
pub fn enter(dispatch: &tracing::Dispatch) {
    let guard = tracing::dispatcher::set_default(dispatch);
    DEFAULT.with(|d| *d.borrow_mut() = Some(guard));
}

/// Undoes [`enter`] on the calling thread (for `on_thread_stop`).
pub fn leave() {
    DEFAULT.with(|d| d.borrow_mut().take());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmcp_warnings_and_the_sse_reader_are_told_under_the_server_name() {
        let (sink, queue) = Sink::capture();
        let dispatch = tracing::Dispatch::new(Forward::new("mcp-client(remote)".into(), sink));
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::warn!(target: "rmcp::transport::common::reqwest::streamable_http_client", "unexpected content type: {:?}", "text/html");
            tracing::debug!(target: "rmcp::transport::common::client_side_sse", last_event_id = "7", "failed to deserialize server message: expected value");
            tracing::debug!(target: "rmcp::service", "a debug line of another module");
            tracing::warn!(target: "hyper", "not rmcp's");
        });
        let lines: Vec<String> = queue.try_iter().collect();
        assert_eq!(
            lines,
            [
                "mcp-client(remote): rmcp dropped or refused something (warn): unexpected content type: \"text/html\"",
                "mcp-client(remote): rmcp dropped or refused something (debug): failed to deserialize server message: expected value (last_event_id=7)",
            ]
        );
    }
}
