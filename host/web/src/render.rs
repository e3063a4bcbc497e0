//! The pages and the fragments a live page replaces, as HTML text.
//!
//! Every piece of session text passes through [`crate::html::text`] or
//! [`crate::html::attr`]. The markup carries no inline script or style (the
//! pages' Content-Security-Policy forbids both): behaviour is in
//! `assets/app.js`, looks in `assets/app.css`.

use crate::data::{Status, Strip, Summary, Window};
use crate::html::{attr, cut, dom_id, iso, one_line, path_segment, text, utc};
use crate::i18n::{Lang, Noun, Text};
use crate::items::{Item, Kind, Tool};
use crate::plan::{row_summary, Counts, Status as ItemStatus};

/// The characters of one text block a page shows; the rest is one link
/// away, as plain text.
pub const SHOWN_CHARS: usize = 100_000;

/// How a tool call presents itself: its title, from the tool's
/// `present_call` when the tool is loaded (`Update todo list`).
pub type TitleOf<'a> = &'a dyn Fn(&str, &str) -> Option<String>;

/// The live stream a page follows.
#[derive(Debug, Clone, Copy)]
pub struct Live<'a> {
    /// The stream's address.
    pub url: &'a str,
    /// How often the server sends a heartbeat; the page says it is stale
    /// after two intervals without one.
    pub beat: std::time::Duration,
}

/// How the tools loaded in `source` present their calls: the title their
/// `present_call` gives, if any.
pub fn title_of(source: &crate::data::Source) -> impl Fn(&str, &str) -> Option<String> + '_ {
    move |name, arguments| {
        let tool = source.tools.get(name)?;
        tool.present_call(arguments).get("title")?.as_str().map(str::to_string)
    }
}

/// A whole page: `title` and `body` in the layout, with the language
/// switch linking to `here` (the page's path and query, without `lang`).
pub fn page(lang: Lang, title: &str, here: &str, body: &str, live: Option<Live<'_>>) -> String {
    let sep = if here.contains('?') { '&' } else { '?' };
    let switch: String = Lang::ALL
        .into_iter()
        .map(|l| {
            let current = if l == lang { " aria-current=\"true\"" } else { "" };
            format!("<a href=\"{}{sep}lang={}\" lang=\"{}\" hreflang=\"{}\"{current}>{}</a>", attr(here), l.tag(), l.tag(), l.tag(), l.own_name())
        })
        .collect::<Vec<_>>()
        .join(" ");
    let live_attrs = match live {
        Some(Live { url, beat }) => format!(
            " data-live=\"{}\" data-beat=\"{}\" data-live-on=\"{}\" data-live-stale=\"{}\" data-live-off=\"{}\"",
            attr(url),
            beat.as_millis(),
            attr(lang.t(Text::Live)),
            attr(lang.t(Text::Stale)),
            attr(lang.t(Text::Offline))
        ),
        None => String::new(),
    };
    let live_status = if live.is_some() { "<p class=\"live-status\" role=\"status\" id=\"live-status\"></p>" } else { "" };
    format!(
        "<!doctype html>\n<html lang=\"{tag}\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title} · cordis</title>\n<link rel=\"stylesheet\" href=\"/assets/app.css\">\n<script src=\"/assets/app.js\" defer></script>\n</head>\n\
         <body>\n<header class=\"top\"><a class=\"home\" href=\"/\">cordis</a>{live_status}\
         <nav class=\"langs\" aria-label=\"{language}\">{switch}</nav></header>\n<main id=\"main\"{live_attrs}>\n{body}\n</main>\n</body>\n</html>\n",
        tag = lang.tag(),
        title = text(&one_line(title)),
        language = attr(lang.t(Text::Language)),
    )
}

/// The label of a session status.
pub fn status_label(lang: Lang, status: Status) -> &'static str {
    lang.t(match status {
        Status::Empty => Text::Empty,
        Status::Running => Text::Running,
        Status::Completed => Text::Completed,
        Status::Interrupted => Text::Interrupted,
        Status::Failed => Text::Failed,
    })
}

fn status_class(status: Status) -> &'static str {
    match status {
        Status::Empty => "st-empty",
        Status::Running => "st-running",
        Status::Completed => "st-completed",
        Status::Interrupted => "st-interrupted",
        Status::Failed => "st-failed",
    }
}

/// A plan's header: `1 completed · 2 in progress · 1 pending`, localized,
/// zero counts left out; `no todos` for an empty plan.
pub fn plan_header(lang: Lang, counts: &Counts) -> String {
    let segments: Vec<String> = counts.segments().into_iter().map(|(n, s)| format!("{} {}", lang.number(n), item_status_label(lang, s))).collect();
    if segments.is_empty() {
        lang.t(Text::NoTodos).to_string()
    } else {
        segments.join(" · ")
    }
}

fn item_status_label(lang: Lang, s: ItemStatus) -> &'static str {
    lang.t(match s {
        ItemStatus::Completed => Text::Completed,
        ItemStatus::InProgress => Text::InProgress,
        ItemStatus::Pending => Text::Pending,
    })
}

/// The link to session `id` (page `before`, when given).
pub fn session_href(id: &str) -> String {
    format!("/s/{}", path_segment(id))
}

/// One row of the session list (a `<tr>` whose id is derived from the
/// session's id).
pub fn list_row(lang: Lang, s: &Summary) -> String {
    let title = if s.title.is_empty() { format!("<span class=\"muted\">{}</span>", lang.t(Text::Untitled)) } else { text(&s.title) };
    let plans: Vec<String> = s.plans.iter().map(|c| text(&plan_header(lang, c))).collect();
    let plan = if plans.is_empty() { format!("<span class=\"muted\">{}</span>", lang.t(Text::NoPlan)) } else { plans.join("<br>") };
    format!(
        "<tr id=\"{row}\" data-updated=\"{updated}\"><td class=\"c-title\"><a href=\"{href}\"><bdi>{title}</bdi></a><span class=\"id\">{id}</span></td>\
         <td class=\"c-updated\"><time datetime=\"{iso}\">{utc}</time></td>\
         <td class=\"c-status\"><span class=\"status {class}\">{status}</span></td>\
         <td class=\"c-plan\">{plan}</td><td class=\"c-events\">{events}</td></tr>",
        row = dom_id("row-", &s.id),
        updated = s.updated,
        href = attr(&session_href(&s.id)),
        id = text(&s.id),
        iso = iso(s.updated),
        utc = utc(s.updated),
        class = status_class(s.status),
        status = status_label(lang, s.status),
        events = lang.count(s.events, Noun::Event),
    )
}

/// Every row of the list, the most recently updated first.
pub fn list_rows(lang: Lang, sessions: &[Summary]) -> String {
    let mut rows: Vec<&Summary> = sessions.iter().collect();
    rows.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| a.id.cmp(&b.id)));
    rows.iter().map(|s| list_row(lang, s)).collect::<Vec<_>>().join("\n")
}

/// The list page's body: every session, the most recently updated first.
pub fn list_body(lang: Lang, sessions: &[Summary], skipped: &[String]) -> String {
    let body = list_rows(lang, sessions);
    let empty = if sessions.is_empty() { format!("<p id=\"empty\" class=\"muted\">{}</p>", lang.t(Text::NoSessions)) } else { String::new() };
    let skipped: String = skipped.iter().map(|s| format!("<p class=\"warning\">{}</p>", text(s))).collect();
    format!(
        "<h1>{h}</h1>\n{skipped}{empty}\n<table class=\"sessions\"><thead><tr><th scope=\"col\">{t}</th><th scope=\"col\">{u}</th>\
         <th scope=\"col\">{st}</th><th scope=\"col\">{p}</th><th scope=\"col\"><span class=\"sr-only\">{ev}</span></th></tr></thead>\n\
         <tbody id=\"rows\">\n{body}\n</tbody></table>",
        h = lang.t(Text::Sessions),
        t = lang.t(Text::Title),
        u = lang.t(Text::Updated),
        st = lang.t(Text::Status),
        p = lang.t(Text::Plan),
        ev = lang.count(2, Noun::Event).trim_start_matches("2 "),
    )
}

/// The session header fragment (`#head`): status, id, events, last update.
pub fn session_head(lang: Lang, s: &Summary) -> String {
    let problems = if s.problems > 0 { format!(" · <span class=\"warning\">{}</span>", lang.problems(s.problems)) } else { String::new() };
    format!(
        "<p id=\"head\" class=\"meta\"><span class=\"status {class}\">{status}</span> · <span class=\"id\">{id}</span> · {events} · \
         <time datetime=\"{iso}\">{utc}</time>{problems}</p>",
        class = status_class(s.status),
        status = status_label(lang, s.status),
        id = text(&s.id),
        events = lang.count(s.events, Noun::Event),
        iso = iso(s.updated),
        utc = utc(s.updated),
    )
}

/// The plan strips fragment (`#plans`): one disclosure per plan.
pub fn plans(lang: Lang, strips: &[Strip]) -> String {
    let mut out = String::from("<div id=\"plans\">");
    for strip in strips {
        let key = dom_id("plan-", &strip.key);
        let header = plan_header(lang, &Counts::of(&strip.plan));
        let items: String = strip
            .plan
            .iter()
            .map(|item| {
                let (glyph, class) = match item.status {
                    ItemStatus::Completed => ("✓", "completed"),
                    ItemStatus::InProgress => ("●", "in_progress"),
                    ItemStatus::Pending => ("○", "pending"),
                };
                format!(
                    "<li class=\"pi pi-{class}\"><span class=\"glyph\" role=\"img\" aria-label=\"{label}\">{glyph}</span> <bdi class=\"pi-text\">{content}</bdi></li>",
                    label = attr(item_status_label(lang, item.status)),
                    content = text(&one_line(&item.content)),
                )
            })
            .collect();
        out.push_str(&format!(
            "<section class=\"plan\" aria-label=\"{label}: {key_text}\"><button type=\"button\" class=\"plan-head\" aria-expanded=\"false\" aria-controls=\"{key}-list\">\
             <span class=\"plan-label\">{label}</span> <span class=\"plan-counts\">{header}</span></button>\
             <ul id=\"{key}-list\" class=\"plan-items\" hidden>{items}</ul></section>",
            label = lang.t(Text::Plan),
            key_text = text(&strip.key),
            header = text(&header),
        ));
    }
    out.push_str("</div>");
    out
}

/// The pager of a window: links to the previous and next pages.
pub fn pager(lang: Lang, w: &Window) -> String {
    let href = session_href(&w.summary.id);
    let earlier = if w.start > 0 {
        format!("<a rel=\"prev\" href=\"{}?before={}\">{}</a>", attr(&href), w.start, lang.t(Text::Earlier))
    } else {
        String::new()
    };
    let later = if w.is_tail() {
        String::new()
    } else {
        let next = w.end + crate::data::PAGE_EVENTS;
        let link = if next >= w.summary.events { attr(&href) } else { format!("{}?before={next}", attr(&href)) };
        let label = if next >= w.summary.events { lang.t(Text::Latest) } else { lang.t(Text::Later) };
        format!("<a rel=\"next\" href=\"{link}\">{label}</a>")
    };
    let range = if w.end > w.start { lang.window(w.start + 1, w.end, w.summary.events) } else { lang.count(w.summary.events, Noun::Event) };
    format!(
        "<nav class=\"pager\" id=\"pager\" aria-label=\"{range_label}\">{earlier} <span class=\"range\">{range}</span> {later}</nav>",
        range_label = attr(&range)
    )
}

/// A session page's body.
pub fn session_body(lang: Lang, w: &Window, title_of: TitleOf<'_>) -> String {
    let title = if w.summary.title.is_empty() { lang.t(Text::Untitled).to_string() } else { text(&w.summary.title) };
    let items: String = w.items.iter().map(|i| item(lang, &w.summary.id, i, title_of)).collect::<Vec<_>>().join("\n");
    format!(
        "<nav class=\"crumbs\"><a href=\"/\">{all}</a></nav>\n<h1 class=\"title\"><bdi>{title}</bdi></h1>\n{head}\n{plans}\n\
         <p id=\"plan-said\" class=\"sr-only\" aria-live=\"polite\"></p>\n{pager}\n\
         <ol id=\"items\" class=\"conversation\" data-from=\"{from}\">\n{items}\n</ol>",
        all = lang.t(Text::AllSessions),
        head = session_head(lang, &w.summary),
        plans = plans(lang, &w.strips),
        pager = pager(lang, w),
        from = w.start,
    )
}

/// Which text of an event a link to the whole text names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'a> {
    /// The message's text (a prompt, an answer, a tool's result, a
    /// reminder).
    Text,
    /// The reasoning of the assistant's message.
    Reasoning,
    /// The arguments of the call with this id.
    Arguments(&'a str),
}

/// The address of the whole text of `part` of event `seq` of session `id`.
pub fn text_href(id: &str, seq: u64, part: Part<'_>) -> String {
    let base = format!("{}/text/{seq}", session_href(id));
    match part {
        Part::Text => base,
        Part::Reasoning => format!("{base}?part=reasoning"),
        Part::Arguments(call) => format!("{base}?part=arguments&call={}", path_segment(call)),
    }
}

/// `s` cut at [`SHOWN_CHARS`], as HTML text, and when it was cut, the note
/// that says how much is shown and links the whole text (`href`).
fn shown_and_note(lang: Lang, s: &str, href: &str) -> (String, String) {
    let (shown, was_cut) = cut(s, SHOWN_CHARS);
    let more = if was_cut {
        format!("<p class=\"cut\">{} · <a href=\"{}\">{}</a></p>", lang.cut_note(SHOWN_CHARS, s.chars().count()), attr(href), lang.t(Text::ShowAll))
    } else {
        String::new()
    };
    (text(shown), more)
}

/// A block of session text, cut at [`SHOWN_CHARS`] with a link to the
/// whole text (event `seq` of session `id`).
fn block(lang: Lang, id: &str, seq: u64, s: &str, class: &str) -> String {
    let (shown, more) = shown_and_note(lang, s, &text_href(id, seq, Part::Text));
    format!("<div class=\"{class}\" dir=\"auto\">{shown}</div>{more}")
}

/// One conversation item as a `<li>` whose id is the item's.
pub fn item(lang: Lang, id: &str, it: &Item, title_of: TitleOf<'_>) -> String {
    let open = format!("<li id=\"{}\" class=\"item", attr(&it.id));
    match &it.kind {
        Kind::Turn(n) => format!("{open} turn\"><h2 class=\"turn\">{}</h2></li>", lang.turn(*n)),
        Kind::User { text: t, seq } => {
            format!("{open} user\"><div class=\"who\">{}</div>{}</li>", lang.t(Text::You), block(lang, id, *seq, t, "text"))
        }
        Kind::Reminder { text: t, seq } => {
            format!("{open} reminder\"><div class=\"who\">{}</div>{}</li>", lang.t(Text::Reminder), block(lang, id, *seq, t, "text"))
        }
        Kind::Assistant { text: t, reasoning, streaming, seq } => {
            if t.is_empty() && reasoning.is_empty() && !streaming {
                // A message of tool calls only: the rows say it all.
                return format!("{open} empty\" hidden></li>");
            }
            let thinking = if reasoning.is_empty() {
                String::new()
            } else {
                let (shown, more) = shown_and_note(lang, reasoning, &text_href(id, *seq, Part::Reasoning));
                format!(
                    "<div class=\"reasoning\"><button type=\"button\" class=\"fold\" aria-expanded=\"false\" aria-controls=\"{rid}\">{label}</button>\
                     <div id=\"{rid}\" hidden><div class=\"text muted\" dir=\"auto\">{shown}</div>{more}</div></div>",
                    rid = attr(&format!("{}-r", it.id)),
                    label = lang.t(Text::Reasoning),
                )
            };
            let writing = if *streaming { format!(" <span class=\"muted\">{}</span>", lang.t(Text::Streaming)) } else { String::new() };
            let body = if t.is_empty() { String::new() } else { block(lang, id, *seq, t, "text") };
            format!("{open} assistant\"><div class=\"who\">{}{writing}</div>{thinking}{body}</li>", lang.t(Text::Assistant))
        }
        Kind::Tool(tool) => format!("{open} tool\">{}</li>", tool_row(lang, id, &it.id, tool, title_of)),
        Kind::TurnEnded { turn, reason, message } => {
            let what = match reason.as_str() {
                "interrupted" => lang.t(Text::Interrupted).to_string(),
                "error" => lang.t(Text::Failed).to_string(),
                other => other.to_string(),
            };
            let message = if message.is_empty() { String::new() } else { format!(": {}", text(message)) };
            format!("{open} notice\"><p>{} {}{message}</p></li>", lang.turn(*turn), text(&what))
        }
    }
}

/// A tool row: a disclosure whose button is the one-line summary (status
/// glyph, title, ellipsized summary, and the `+N` suffix that never
/// shrinks), and whose panel holds the arguments and the result.
fn tool_row(lang: Lang, id: &str, item_id: &str, tool: &Tool, title_of: TitleOf<'_>) -> String {
    let title = title_of(&tool.name, &tool.arguments).map_or_else(|| tool.name.clone(), |t| lang.tool_title(&t));
    let (glyph, class, label) = match &tool.result {
        None => ("…", "running", lang.t(Text::Running)),
        Some((_, false)) => ("✓", "ok", lang.t(Text::Succeeded)),
        Some((_, true)) => ("✗", "error", lang.t(Text::Failed)),
    };
    let args: Option<serde_json::Value> = serde_json::from_str(&tool.arguments).ok();
    // An error row shows its failure line, and no suffix.
    let (summary, more) = match (&tool.result, args.as_ref().and_then(row_summary)) {
        (Some((t, true)), _) => (one_line(t.lines().find(|l| !l.trim().is_empty()).unwrap_or_default()), 0),
        (_, Some(row)) => {
            let mut s = lang.done_of(row.done, row.total);
            if let Some(active) = &row.active {
                s.push_str(" · ");
                s.push_str(active);
            }
            (s, row.more_active)
        }
        _ => (one_line(&tool.arguments), 0),
    };
    let summary = cut(&summary, 500).0;
    let suffix = if more > 0 {
        let name = lang.more_in_progress(more);
        format!(
            "<span class=\"suffix\" title=\"{name}\"><span aria-hidden=\"true\">+{more}</span><span class=\"sr-only\"> {name}</span></span>",
            name = attr(&name)
        )
    } else {
        String::new()
    };
    let body = format!("{item_id}-body");
    let arguments = if tool.arguments.is_empty() {
        String::new()
    } else {
        let (shown, more) = shown_and_note(lang, &tool.arguments, &text_href(id, tool.seq, Part::Arguments(&tool.call_id)));
        format!("<h3>{}</h3><pre class=\"text\" dir=\"auto\">{shown}</pre>{more}", lang.t(Text::Arguments))
    };
    let result = match (&tool.result, tool.result_seq) {
        (Some((t, _)), Some(seq)) => format!("<h3>{}</h3>{}", lang.t(Text::Result), block(lang, id, seq, t, "text pre")),
        _ => format!("<p class=\"muted\">{}</p>", lang.t(Text::NoResultYet)),
    };
    format!(
        "<button type=\"button\" class=\"row-head {class}\" aria-expanded=\"false\" aria-controls=\"{body_id}\">\
         <span class=\"glyph\" role=\"img\" aria-label=\"{label}\">{glyph}</span>\
         <span class=\"tool-name\">{title}</span> <span class=\"summary\" dir=\"auto\">{summary}</span>{suffix}</button>\
         <div id=\"{body_id}\" class=\"row-body\" hidden>{arguments}{result}</div>",
        body_id = attr(&body),
        title = text(&title),
        summary = text(summary),
    )
}

/// The body of an error page (404, 400, 500): the message, escaped.
pub fn error_body(lang: Lang, heading: &str, message: &str) -> String {
    format!(
        "<nav class=\"crumbs\"><a href=\"/\">{}</a></nav><h1>{}</h1><p class=\"warning\">{}</p>",
        lang.t(Text::AllSessions),
        text(heading),
        text(message)
    )
}
