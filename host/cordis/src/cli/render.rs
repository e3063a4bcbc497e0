//! How the CLI prints entries, tools, turns and sessions.

use std::collections::BTreeMap;
use std::io::Write;

use cordis_engine::loader::EntryState;
use cordis_engine::runtime::Host;
use cordis_engine::tools::{ToolResult, ToolSchema};
use cordis_session::{derive_messages, CutShortCompaction, LineProblem, Message, Session, SessionInfo};

/// Text from a log or a composition made safe for a terminal: control
/// characters other than newline and tab are shown escaped (`\u{1b}`).
pub fn printable(text: &str) -> String {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return text.to_string();
    }
    text.chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { c.escape_unicode().to_string() } else { c.to_string() }).collect()
}

/// `n thing` or `n things`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Shortens long text to its first `max` user-perceived characters
/// (extended grapheme clusters: a cut never splits a flag, an emoji
/// sequence or a letter from its combining marks); the log keeps it whole.
fn clip(text: &str, max: usize) -> String {
    match cordis_abi::schema::clip_point(text, max) {
        None => text.to_string(),
        Some(end) => {
            use unicode_segmentation::UnicodeSegmentation;
            format!("{}… ({} characters in all)", &text[..end], text.graphemes(true).count())
        }
    }
}

/// `cordis check`: one line per entry, then its library, notes, the
/// status its tool source reported (an MCP connection) and problems, then
/// the patches that could not apply.
pub fn check(out: &mut impl Write, host: &Host) {
    let _ = writeln!(out, "{}: {}", host.composition.file, count(host.reports.len(), "entry", "entries"));
    let root = &host.composition.file;
    for r in &host.reports {
        let indent = "  ".repeat(r.depth + 1);
        let name = if r.name.is_empty() { "no name".to_string() } else { printable(&r.name) };
        let at = if &r.file == root { format!("line {}", r.line) } else { format!("{}:{}", printable(&r.file), r.line) };
        let mut line = format!("{indent}{:<8} {} ({name}) at {at}", r.state.label(), printable(&r.id));
        if !r.effects.is_empty() {
            line.push_str(&format!(": {}", r.effects.join(", ")));
        }
        let _ = writeln!(out, "{line}");
        if let Some(lib) = &r.library {
            let _ = writeln!(out, "{indent}         from {}", lib.display());
        }
        for note in &r.notes {
            let _ = writeln!(out, "{indent}         {}", printable(note));
        }
        if let Some(status) = host.services.tools.source_status(&r.id) {
            let _ = writeln!(out, "{indent}         {}: {}", status.level, printable(&status.text));
        }
        let label = if matches!(r.state, EntryState::Failed(_)) { "error" } else { "note" };
        for m in r.state.messages() {
            let _ = writeln!(out, "{indent}  {label}: {}", printable(m));
        }
    }
    for w in &host.composition.warnings {
        let _ = writeln!(out, "warning: {}", printable(w));
    }
}

/// How many entries did not load, by state.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NotRunning {
    /// Entries whose row or `apply` failed.
    pub failed: usize,
    /// Entries whose plugin no library provides.
    pub missing: usize,
    /// Entries waiting for a service nothing provides.
    pub waiting: usize,
}

impl NotRunning {
    /// Counts the entries of `host` that did not load.
    pub fn of(host: &Host) -> NotRunning {
        let mut n = NotRunning::default();
        for r in &host.reports {
            match r.state {
                EntryState::Failed(_) => n.failed += 1,
                EntryState::Missing(_) => n.missing += 1,
                EntryState::Waiting(_) => n.waiting += 1,
                _ => {}
            }
        }
        n
    }

    /// Whether every entry loaded (or is disabled).
    pub fn none(&self) -> bool {
        *self == NotRunning::default()
    }

    /// One line for the end of a report: `2 of 5 entries are not running:
    /// 1 failed, 1 missing`; `None` when every entry loaded.
    pub fn summary(&self, total: usize) -> Option<String> {
        if self.none() {
            return None;
        }
        let parts: Vec<String> = [(self.failed, "failed"), (self.missing, "missing"), (self.waiting, "waiting for a service")]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        let not = self.failed + self.missing + self.waiting;
        let verb = if not == 1 { "is" } else { "are" };
        Some(format!("{not} of {} {verb} not running: {}", count(total, "entry", "entries"), parts.join(", ")))
    }
}

/// `cordis check --json`: `{"entries": [{"id", "name", "state", "source":
/// "FILE:LINE", "reason"?, "library"?, "status"?}], "warnings": [...]}`,
/// entries flat in load order with scoped ids. Groups and includes report
/// `loaded` when mounted. `reason` joins the entry's messages; `status`
/// (`{"level", "text"}`) is what the entry's tool source last reported,
/// such as an MCP server's connection.
pub fn check_json(host: &Host) -> serde_json::Value {
    let entries: Vec<serde_json::Value> = host
        .reports
        .iter()
        .map(|r| {
            let state = match r.state {
                EntryState::Group => "loaded",
                ref other => other.label(),
            };
            let mut v = serde_json::json!({
                "id": r.id,
                "name": r.name,
                "state": state,
                "source": format!("{}:{}", r.file, r.line),
            });
            let messages = r.state.messages();
            if !messages.is_empty() {
                v["reason"] = serde_json::Value::String(messages.join("\n"));
            }
            if let Some(lib) = &r.library {
                v["library"] = serde_json::Value::String(lib.display().to_string());
            }
            if let Some(status) = host.services.tools.source_status(&r.id) {
                v["status"] = serde_json::json!(status);
            }
            v
        })
        .collect();
    serde_json::json!({"entries": entries, "warnings": host.composition.warnings})
}

/// `cordis plugins`: each library with its plugins.
pub fn plugins(out: &mut impl Write, libraries: &[cordis_engine::loader::catalog::LibraryInfo], plugin_path: &cordis_engine::loader::PluginPath) {
    if libraries.is_empty() {
        let searched: Vec<String> = plugin_path.dirs.iter().map(|(d, from)| format!("{} ({from})", d.display())).collect();
        let _ = writeln!(out, "no plugin libraries found; searched {}", searched.join(", "));
        return;
    }
    for lib in libraries {
        let abi = lib.abi.as_deref().map(|v| format!(", cordis-abi {v}")).unwrap_or_default();
        let _ = writeln!(out, "{} ({}{abi})", lib.file.display(), lib.found_through);
        if let Some(e) = &lib.error {
            let _ = writeln!(out, "  not usable: {}", printable(e));
        }
        for p in &lib.plugins {
            let _ = writeln!(out, "  plugin {}", printable(&p.name));
            if !p.packages.is_empty() {
                let _ = writeln!(out, "    package names: {}", p.packages.join(", "));
            }
            let list = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
            let _ = writeln!(out, "    injects: {}", list(&p.inject));
            let _ = writeln!(out, "    provides: {}", list(&p.provides));
            if !p.requires.is_empty() || !p.uses.is_empty() {
                let _ = writeln!(out, "    host capabilities: requires {}; uses {}", list(&p.requires), list(&p.uses));
            }
            let keys: Vec<String> = p
                .config
                .properties
                .iter()
                .map(|(k, t)| format!("{k}: {t}{}", if p.config.required.contains(k) { " (required)" } else { "" }))
                .collect();
            let _ = writeln!(out, "    config: {}", if keys.is_empty() { "no keys".to_string() } else { keys.join(", ") });
            if let Some(e) = &p.error {
                let _ = writeln!(out, "    not usable: {}", printable(e));
            }
            for problem in &p.problems {
                let _ = writeln!(out, "    problem: {}", printable(problem));
            }
        }
    }
}

/// `cordis tools`: each tool with its description and parameter schema.
pub fn tools(out: &mut impl Write, schemas: &[ToolSchema]) {
    if schemas.is_empty() {
        let _ = writeln!(out, "no tools registered");
        return;
    }
    for s in schemas {
        let _ = writeln!(out, "{}\n", s.name);
        for line in wrap(&s.description, 78) {
            let _ = writeln!(out, "  {line}");
        }
        let params = serde_json::to_string_pretty(&s.parameters).unwrap_or_default();
        let _ = writeln!(out, "\n  parameters:");
        for line in params.lines() {
            let _ = writeln!(out, "    {line}");
        }
        let _ = writeln!(out);
    }
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for paragraph in text.lines() {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(line);
    }
    lines
}

/// One message of a transcript.
pub fn message(out: &mut impl Write, m: &Message) {
    match m {
        Message::User { text } => {
            let _ = writeln!(out, "\nuser      › {}", indent_rest(&printable(&clip(text, 4000)), 12));
        }
        Message::Assistant { text, tool_calls, .. } => {
            if !text.is_empty() {
                let _ = writeln!(out, "assistant › {}", indent_rest(&printable(&clip(text, 4000)), 12));
            } else if !tool_calls.is_empty() {
                let _ = writeln!(out, "assistant › ({})", count(tool_calls.len(), "tool call", "tool calls"));
            }
            tool_calls_lines(out, tool_calls);
        }
        Message::Tool { call_id, text, is_error } => {
            let mark = if *is_error { "✗" } else { "✓" };
            let _ = writeln!(out, "tool      › {mark} {} ({})", indent_rest(&printable(&clip(text, 4000)), 12), printable(call_id));
        }
    }
}

/// The tool calls of an assistant message whose text was streamed.
pub fn tool_calls(out: &mut impl Write, calls: &[cordis_session::history::ToolCallPart]) {
    tool_calls_lines(out, calls);
}

fn tool_calls_lines(out: &mut impl Write, calls: &[cordis_session::history::ToolCallPart]) {
    for c in calls {
        let _ = writeln!(out, "          → {} {}", printable(&c.name), printable(&clip(&c.arguments, 400)));
    }
}

/// Starts a streamed block's line: its label (`assistant`, `reasoning`).
pub fn stream_start(out: &mut impl Write, label: &str) {
    let _ = write!(out, "{label:<10}› ");
}

/// A piece of a streamed block, as it arrives (control characters
/// escaped, continuation lines indented under the label).
pub fn stream_text(out: &mut impl Write, text: &str) {
    let _ = write!(out, "{}", indent_rest(&printable(text), 12));
}

fn indent_rest(text: &str, n: usize) -> String {
    text.replace('\n', &format!("\n{}", " ".repeat(n)))
}

/// A tool call's result during `cordis run`: the card title the tool gives
/// the call (`presentCall`), then the result text.
pub fn tool_result(out: &mut impl Write, title: &str, result: &ToolResult) {
    let mark = if result.is_error { "✗" } else { "✓" };
    let _ = writeln!(out, "tool      › {mark} {} — {}", printable(title), indent_rest(&printable(&clip(&result.text, 4000)), 12));
}

/// A projection's view during `cordis run`, labelled with its key
/// (`todos`: the plan).
pub fn view(out: &mut impl Write, key: &str, view: &str) {
    let label: String = printable(key).chars().take(9).collect();
    let _ = writeln!(out, "{label:<10}┌ {}", indent_rest(&printable(view), 10).replace("\n          ", "\n          │ "));
}

/// What `cordis check --sessions` found in the composition's store.
#[derive(Debug)]
pub enum SessionsCheck {
    /// The store was listed: its place, how many sessions it holds, those
    /// whose log ends in a compaction cut short, and the sessions that
    /// could not be read (one message each).
    Read { store: String, sessions: usize, cut_short: Vec<(String, CutShortCompaction)>, skipped: Vec<String> },
    /// The flat store's `sessions/` folder (this path) does not exist yet:
    /// no session was kept.
    NoFolder(String),
    /// The store could not be opened or listed (`store`: its place when it
    /// was opened).
    Unreadable { store: Option<String>, error: String },
}

impl SessionsCheck {
    /// The lines after `check`'s table: one per compaction cut short, then
    /// a count; or why the store was not read.
    pub fn print(&self, out: &mut impl Write) {
        match self {
            SessionsCheck::Read { store, sessions, cut_short, skipped } => {
                for s in skipped {
                    let _ = writeln!(out, "sessions: {}", printable(s));
                }
                for (id, c) in cut_short {
                    let _ = writeln!(out, "session {}: {}", printable(id), printable(&c.describe()));
                }
                let cut = match cut_short.len() {
                    0 => "none has a compaction cut short".to_string(),
                    1 => "1 has a compaction cut short".to_string(),
                    n => format!("{n} have a compaction cut short"),
                };
                let _ = writeln!(out, "sessions: {} in {}; {cut}", count(*sessions, "session", "sessions"), printable(store));
            }
            SessionsCheck::NoFolder(dir) => {
                let _ = writeln!(out, "sessions: none kept yet (no folder {})", printable(dir));
            }
            SessionsCheck::Unreadable { store, error } => {
                let at = store.as_ref().map_or_else(String::new, |s| format!(" in {}", printable(s)));
                let _ = writeln!(out, "sessions: not read{at}: {}", printable(error));
            }
        }
    }

    /// `check --json`'s `sessions` object: `{store, sessions, cutShort:
    /// [{id, compactionId, seq, landed, carried, closing}], skipped}`;
    /// `{store: null, sessions: 0, cutShort: [], noFolder}` when no session
    /// was kept; `{store, error}` when the store could not be read.
    pub fn json(&self) -> serde_json::Value {
        match self {
            SessionsCheck::Read { store, sessions, cut_short, skipped } => serde_json::json!({
                "store": store,
                "sessions": sessions,
                "cutShort": cut_short.iter().map(|(id, c)| serde_json::json!({
                    "id": id,
                    "compactionId": c.compaction_id,
                    "seq": c.start,
                    "landed": c.landed,
                    "carried": c.carried,
                    "closing": if c.landed { "completed" } else { "failed" },
                    "message": c.describe(),
                })).collect::<Vec<_>>(),
                "skipped": skipped,
            }),
            SessionsCheck::NoFolder(dir) => serde_json::json!({"store": null, "sessions": 0, "cutShort": [], "noFolder": dir}),
            SessionsCheck::Unreadable { store, error } => serde_json::json!({"store": store, "error": error}),
        }
    }
}

/// `cordis session ls`.
pub fn session_list(out: &mut impl Write, list: &[SessionInfo], place: &str) {
    if list.is_empty() {
        let _ = writeln!(out, "no sessions in {place}");
        return;
    }
    for s in list {
        let mut line = format!("{}  {}  {}", printable(&s.id), format_time(s.created_at), count(s.events, "event", "events"));
        for (key, summary) in &s.summaries {
            line.push_str(&format!("  {key}: {}", printable(summary)));
        }
        if s.problems > 0 {
            line.push_str(&format!("  ({})", count(s.problems, "problem line", "problem lines")));
        }
        if let Some(c) = &s.cut_short {
            line.push_str(&format!("  (compaction cut short at seq {})", c.start));
        }
        let _ = writeln!(out, "{line}");
    }
    let cut = list.iter().filter(|s| s.cut_short.is_some()).count();
    if cut > 0 {
        let _ = writeln!(
            out,
            "{} a compaction with no compaction/end; the next run or `cordis session compact` of each closes it (`cordis session show ID` says how)",
            if cut == 1 { "1 session has".to_string() } else { format!("{cut} sessions have") }
        );
    }
}

/// `cordis session show`: header, problems, transcript, projections, and a
/// count of opaque events by type.
pub fn session_show(out: &mut impl Write, s: &Session, problems: &[LineProblem], understood: &dyn Fn(&str) -> bool) {
    let header = s.header();
    let (messages, total, opaque, unfinished) = s.with_events(|events| {
        let mut opaque: BTreeMap<String, usize> = BTreeMap::new();
        let mut unfinished = Vec::new();
        for e in events {
            if !understood(&e.kind) {
                *opaque.entry(e.kind.clone()).or_default() += 1;
            }
            if e.kind == "turn/end" {
                let data = e.data_value();
                let kind = data["reason"]["kind"].as_str().unwrap_or("");
                if kind != "completed" {
                    let detail = data["reason"]["message"].as_str().map(|m| format!(": {m}")).unwrap_or_default();
                    unfinished.push(format!("turn {} ended {kind}{detail}", data["turn"]));
                }
            }
        }
        (derive_messages(events), events.len(), opaque, unfinished)
    });
    let _ = writeln!(out, "session {} · created {} · {}", printable(&header.id), format_time(header.created_at), count(total, "event", "events"));
    for p in problems {
        let _ = writeln!(out, "  problem: {}", printable(&p.to_string()));
    }
    for u in &unfinished {
        let _ = writeln!(out, "  {}", printable(u));
    }
    let _ = writeln!(out, "\ntranscript ({}):", count(messages.len(), "message", "messages"));
    for m in &messages {
        message(out, m);
    }
    for (p, state) in s.states() {
        let view = p.render(&state);
        let _ = writeln!(out, "\n{}:", p.key);
        if view.is_empty() {
            let _ = writeln!(out, "  (none)");
        } else {
            for line in view.lines() {
                let _ = writeln!(out, "  {}", printable(line));
            }
        }
    }
    if !opaque.is_empty() {
        let total: usize = opaque.values().sum();
        let parts: Vec<String> = opaque.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
        let _ = writeln!(out, "\nopaque events (kept, not understood here): {total}: {}", parts.join(", "));
    }
}

/// Formats ms since the epoch (negative: before it) as
/// `YYYY-MM-DD HH:MM:SS UTC` ([`cordis_session::event::format_utc`]).
pub fn format_time(ms: impl Into<i128>) -> String {
    cordis_session::event::format_utc(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_for_the_terminal() {
        assert_eq!(printable("plain\nline\ttab"), "plain\nline\ttab");
        assert_eq!(printable("red \u{1b}[31m bell \u{7}"), "red \\u{1b}[31m bell \\u{7}");
        assert_eq!(count(1, "entry", "entries"), "1 entry");
        assert_eq!(count(2, "entry", "entries"), "2 entries");
    }

    #[test]
    fn clips_at_grapheme_cluster_boundaries() {
        let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}";
        let flag = "\u{1F1EB}\u{1F1F7}";
        let accent = "e\u{301}";
        assert_eq!(clip(&format!("ab{family}cd"), 3), format!("ab{family}… (5 characters in all)"));
        assert_eq!(clip(&format!("a{flag}{flag}"), 2), format!("a{flag}… (3 characters in all)"));
        assert_eq!(clip(&format!("{accent}{accent}x"), 1), format!("{accent}… (3 characters in all)"));
        assert_eq!(clip("short", 5), "short");
    }

    #[test]
    fn formats_times() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_time(1_785_987_077_399_u64), "2026-08-06 03:31:17 UTC");
        assert_eq!(format_time(-960_585_284_i64), "1969-12-20 21:10:14 UTC");
        assert_eq!(format_time(-1_i64), "1969-12-31 23:59:59 UTC");
        assert!(format_time(i64::MIN).ends_with(" UTC"));
    }
}
