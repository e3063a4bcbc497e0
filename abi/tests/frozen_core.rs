//! The gate on cordis-abi 1's frozen core (docs/abi.md, "A frozen core").
//!
//! Every type that crosses the boundary by layout (each `#[derive(StableAbi)]`
//! type and `#[sabi_trait]` interface in `ffi.rs`, `json.rs` and `tape.rs`),
//! the root module's names and version string, and the aliases of the
//! interface objects are rendered as text: each item's attributes
//! (`#[repr]`, `#[sabi]`), generics and supertraits, then its members in
//! order, fields with their names and types, methods with every parameter's
//! name and type. abi_stable's load-time check sees layouts only; this text
//! also sees parameter names and order, so two arguments of one type swapped
//! or a parameter renamed is caught here.
//!
//! The rendering of today's sources must equal `abi/frozen-core-1.0.txt`,
//! which is the rendering of the 1.0 release (the frozen copy in
//! `tests/compat/abi-1.0` renders to it too). The frozen core never grows in
//! 1.x: a release adds capabilities, extensions and SDK helpers, none of
//! which is rendered here. Changing the file is changing ABI major.
//!
//! The gate is parsed with `syn`, the Rust parser the proc-macro ecosystem
//! (abi_stable's derive included) is built on, rather than rustdoc's JSON,
//! which a stable toolchain only writes with unstable flags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use quote::ToTokens;

/// The files whose items form the frozen core, relative to a crate root.
const FILES: [&str; 4] = ["src/ffi.rs", "src/json.rs", "src/tape.rs", "src/lib.rs"];

/// The committed rendering of the 1.0 core.
const SNAPSHOT: &str = "frozen-core-1.0.txt";

/// One rendered item: its header lines, then one line per member keyed by
/// the member's name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    header: Vec<String>,
    members: Vec<(String, String)>,
}

/// `path::Name` → item, over every frozen file of a crate root.
type Surface = BTreeMap<String, Item>;

fn tokens(t: &impl ToTokens) -> String {
    // proc-macro2 prints a space between every two tokens; close the gaps
    // Rust's own style leaves out, so the text reads like the source.
    let mut out = t.to_token_stream().to_string();
    for (from, to) in [
        (" :: ", "::"),
        (" ,", ","),
        ("& ", "&"),
        (" < ", "<"),
        (" >", ">"),
        ("< ", "<"),
        ("' ", "'"),
        (" (", "("),
        ("( ", "("),
        (" )", ")"),
        ("# [", "#["),
        (" : ", ": "),
        (" ]", "]"),
    ] {
        out = out.replace(from, to);
    }
    // One space after every comma.
    let mut spaced = String::with_capacity(out.len());
    let mut chars = out.chars().peekable();
    while let Some(c) = chars.next() {
        spaced.push(c);
        if c == ',' && chars.peek().is_some_and(|n| *n != ' ') {
            spaced.push(' ');
        }
    }
    spaced
}

fn attributes(attrs: &[syn::Attribute]) -> Vec<String> {
    attrs.iter().filter(|a| a.path().is_ident("repr") || a.path().is_ident("sabi")).map(tokens).collect()
}

fn derives_stable_abi(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("derive") && tokens(a).contains("StableAbi"))
}

fn is_sabi_trait(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("sabi_trait"))
}

fn fields(fields: &syn::Fields) -> Vec<(String, String)> {
    fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let name = f.ident.as_ref().map_or_else(|| i.to_string(), ToString::to_string);
            let attrs = attributes(&f.attrs);
            let prefix = if attrs.is_empty() { String::new() } else { format!("{} ", attrs.join(" ")) };
            (name.clone(), format!("{prefix}{}: {}", name, tokens(&f.ty)))
        })
        .collect()
}

/// Renders the frozen items of one file's source text.
///
/// # Errors
/// When the text does not parse.
fn render_file(module: &str, text: &str) -> Result<Surface, String> {
    let file = syn::parse_file(text).map_err(|e| format!("{module}: {e}"))?;
    let mut out = Surface::new();
    for item in &file.items {
        match item {
            syn::Item::Struct(s) if derives_stable_abi(&s.attrs) => {
                let mut header = attributes(&s.attrs);
                header.push(format!("struct {}{}", s.ident, tokens(&s.generics)));
                out.insert(format!("{module}::{}", s.ident), Item { header, members: fields(&s.fields) });
            }
            syn::Item::Enum(e) if derives_stable_abi(&e.attrs) => {
                let mut header = attributes(&e.attrs);
                header.push(format!("enum {}{}", e.ident, tokens(&e.generics)));
                let members = e
                    .variants
                    .iter()
                    .map(|v| {
                        let shape = match &v.fields {
                            syn::Fields::Unit => String::new(),
                            other => tokens(other),
                        };
                        let discriminant = v.discriminant.as_ref().map_or_else(String::new, |(_, d)| format!(" = {}", tokens(d)));
                        (v.ident.to_string(), format!("{}{shape}{discriminant}", v.ident))
                    })
                    .collect();
                out.insert(format!("{module}::{}", e.ident), Item { header, members });
            }
            syn::Item::Trait(t) if is_sabi_trait(&t.attrs) => {
                let mut header = attributes(&t.attrs);
                let supertraits = if t.supertraits.is_empty() { String::new() } else { format!(": {}", tokens(&t.supertraits)) };
                header.push(format!("trait {}{}{supertraits}", t.ident, tokens(&t.generics)));
                let members = t
                    .items
                    .iter()
                    .filter_map(|i| match i {
                        syn::TraitItem::Fn(f) => {
                            let attrs = attributes(&f.attrs);
                            let prefix = if attrs.is_empty() { String::new() } else { format!("{} ", attrs.join(" ")) };
                            Some((f.sig.ident.to_string(), format!("{prefix}{}", tokens(&f.sig))))
                        }
                        _ => None,
                    })
                    .collect();
                out.insert(format!("{module}::{}", t.ident), Item { header, members });
            }
            // The aliases plugins and hosts name the interface objects by.
            syn::Item::Type(t) if module == "ffi" => {
                out.insert(
                    format!("{module}::{}", t.ident),
                    Item { header: vec![format!("type {}{} = {}", t.ident, tokens(&t.generics), tokens(&t.ty))], members: Vec::new() },
                );
            }
            // The root module's identity: its names and version string.
            syn::Item::Impl(i) if module == "ffi" && i.trait_.as_ref().is_some_and(|(_, p, _)| tokens(p).ends_with("RootModule")) => {
                let members = i
                    .items
                    .iter()
                    .filter_map(|m| match m {
                        syn::ImplItem::Const(c) => Some((c.ident.to_string(), format!("const {}: {} = {}", c.ident, tokens(&c.ty), tokens(&c.expr)))),
                        _ => None,
                    })
                    .collect();
                out.insert(format!("{module}::impl RootModule for {}", tokens(&i.self_ty)), Item { header: Vec::new(), members });
            }
            syn::Item::Const(c) if module == "lib" && c.ident == "ROOT_MODULE_NAME" => {
                out.insert(
                    format!("{module}::{}", c.ident),
                    Item { header: vec![format!("const {}: {} = {}", c.ident, tokens(&c.ty), tokens(&c.expr))], members: Vec::new() },
                );
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Renders the frozen core of the crate at `root` from each file's text,
/// read through `read` (so a test can hand in an edited copy).
fn render(root: &Path, read: impl Fn(&Path) -> String) -> Result<Surface, String> {
    let mut out = Surface::new();
    for file in FILES {
        let module = Path::new(file).file_stem().and_then(|s| s.to_str()).unwrap_or(file);
        out.extend(render_file(module, &read(&root.join(file)))?);
    }
    Ok(out)
}

/// The surface as the snapshot file writes it: each item's key, its header
/// lines, and its members indented, in key order.
fn to_text(surface: &Surface) -> String {
    let mut out = String::new();
    for (key, item) in surface {
        out.push_str(&format!("[{key}]\n"));
        for h in &item.header {
            out.push_str(&format!("{h}\n"));
        }
        for (_, m) in &item.members {
            out.push_str(&format!("    {m}\n"));
        }
        out.push('\n');
    }
    out
}

/// Reads a snapshot back: the inverse of [`to_text`] (members are keyed by
/// the name before the first `:` or `(`).
fn from_text(text: &str) -> Surface {
    let mut out = Surface::new();
    let mut current: Option<(String, Item)> = None;
    for line in text.lines() {
        if let Some(key) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if let Some((k, item)) = current.take() {
                out.insert(k, item);
            }
            current = Some((key.to_string(), Item { header: Vec::new(), members: Vec::new() }));
        } else if let Some(member) = line.strip_prefix("    ") {
            if let Some((_, item)) = current.as_mut() {
                item.members.push((member_name(member), member.to_string()));
            }
        } else if !line.is_empty() {
            if let Some((_, item)) = current.as_mut() {
                item.header.push(line.to_string());
            }
        }
    }
    if let Some((k, item)) = current {
        out.insert(k, item);
    }
    out
}

/// The name of a rendered member: a field's or variant's name, or a
/// method's, after any `#[sabi(...)]` attribute.
fn member_name(line: &str) -> String {
    let mut rest = line;
    while let Some(after) = rest.strip_prefix("#[") {
        let Some(end) = after.find("] ") else { break };
        rest = &after[end + 2..];
    }
    let rest = rest.strip_prefix("fn ").or_else(|| rest.strip_prefix("const ")).unwrap_or(rest);
    rest.split([':', '(', ' ', '<']).next().unwrap_or(rest).to_string()
}

/// Every difference between the frozen core and `now`, one line each,
/// naming the item and member: removed, added, changed (frozen and now
/// shown), or reordered.
fn differences(frozen: &Surface, now: &Surface) -> Vec<String> {
    let mut out = Vec::new();
    for (key, was) in frozen {
        let Some(is) = now.get(key) else {
            out.push(format!("{key}: removed from the frozen core"));
            continue;
        };
        if was.header != is.header {
            out.push(format!("{key}: declaration changed: frozen `{}`, now `{}`", was.header.join(" "), is.header.join(" ")));
        }
        let by_name = |item: &Item| item.members.iter().cloned().collect::<BTreeMap<String, String>>();
        let (old, new) = (by_name(was), by_name(is));
        for (name, line) in &old {
            match new.get(name) {
                None => out.push(format!("{key}::{name}: removed (frozen `{line}`)")),
                Some(now_line) if now_line != line => out.push(format!("{key}::{name}: changed: frozen `{line}`, now `{now_line}`")),
                Some(_) => {}
            }
        }
        for (name, line) in &new {
            if !old.contains_key(name) {
                out.push(format!("{key}::{name}: added (`{line}`); the frozen core never grows in 1.x"));
            }
        }
        let order =
            |item: &Item| item.members.iter().map(|(n, _)| n.clone()).filter(|n| old.contains_key(n) && new.contains_key(n)).collect::<Vec<_>>();
        if order(was) != order(is) {
            out.push(format!("{key}: members reordered: frozen {:?}, now {:?}", order(was), order(is)));
        }
    }
    for key in now.keys().filter(|k| !frozen.contains_key(*k)) {
        out.push(format!("{key}: added to the frozen core; 1.x grows by capabilities and extensions instead (docs/abi.md)"));
    }
    out
}

fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn frozen() -> Surface {
    from_text(&read(&crate_root().join(SNAPSHOT)))
}

/// Today's sources with one edit applied to one file: `(file, from, to)`,
/// `from` required to occur exactly once.
fn edited(file: &'static str, from: &'static str, to: &'static str) -> Surface {
    let root = crate_root();
    render(&root, |path| {
        let text = read(path);
        if path.ends_with(file) {
            assert_eq!(text.matches(from).count(), 1, "the edit's text must occur once in {file}: {from}");
            text.replace(from, to)
        } else {
            text
        }
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn todays_core_is_the_frozen_one() {
    let now = render(&crate_root(), read).unwrap_or_else(|e| panic!("{e}"));
    let found = differences(&frozen(), &now);
    assert!(
        found.is_empty(),
        "cordis-abi's frozen 1.x core changed; that needs ABI major 2 (docs/abi.md):\n  {}\n\ntoday's rendering:\n{}",
        found.join("\n  "),
        to_text(&now)
    );
}

#[test]
fn the_snapshot_is_the_release_of_1_0() {
    let released = crate_root().join("../tests/compat/abi-1.0");
    let then = render(&released, read).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(differences(&frozen(), &then), Vec::<String>::new());
    // Every interface and the root module are in it, with their methods.
    let snapshot = frozen();
    for key in [
        "ffi::PluginLibrary",
        "ffi::PluginDecl",
        "ffi::HostContext",
        "ffi::ExecContext",
        "ffi::Tool",
        "ffi::EventValidator",
        "ffi::Projection",
        "ffi::Service",
        "ffi::TurnEndHook",
        "tape::ArgToken",
        "json::JsonText",
        "lib::ROOT_MODULE_NAME",
    ] {
        assert!(snapshot.contains_key(key), "{key} is missing from the snapshot");
    }
    assert_eq!(snapshot["ffi::HostContext"].members.len(), 12);
    // The text round-trips, so the snapshot is exactly what `render` gives.
    assert_eq!(from_text(&to_text(&then)), then);
}

#[test]
fn two_arguments_of_one_type_swapped_are_caught() {
    let found = differences(
        &frozen(),
        &edited(
            "src/ffi.rs",
            "fn apply(&self, state: RStr<'_>, event_type: RStr<'_>, data: RStr<'_>)",
            "fn apply(&self, state: RStr<'_>, data: RStr<'_>, event_type: RStr<'_>)",
        ),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("ffi::Projection::apply: changed: frozen `fn apply(&self, state: RStr<'_>, event_type: RStr<'_>, data: RStr<'_>)"),
        "{found:?}"
    );
}

#[test]
fn a_renamed_parameter_is_caught() {
    let found = differences(
        &frozen(),
        &edited("src/ffi.rs", "fn has_service(&self, name: RStr<'_>) -> bool;", "fn has_service(&self, service: RStr<'_>) -> bool;"),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("ffi::HostContext::has_service: changed"), "{found:?}");
}

#[test]
fn a_changed_signature_a_moved_method_and_a_new_field_are_caught() {
    let changed = differences(
        &frozen(),
        &edited(
            "src/ffi.rs",
            "fn capability(&self, name: RStr<'_>, version: u32, request: RStr<'_>, object: ROption<ServiceBox>) -> RResult<RString, RString>;\n}\n\n/// A hook",
            "fn capability(&self, name: RStr<'_>, version: u64, request: RStr<'_>, object: ROption<ServiceBox>) -> RResult<RString, RString>;\n}\n\n/// A hook",
        ),
    );
    assert!(changed.iter().any(|d| d.starts_with("ffi::HostContext::capability: changed") && d.contains("version: u64")), "{changed:?}");

    let moved = differences(&frozen(), &edited("src/ffi.rs", "    /// The model-facing description.\n    fn description(&self) -> RString;\n", ""));
    assert!(moved.iter().any(|d| d.starts_with("ffi::Tool::description: removed")), "{moved:?}");

    let added = differences(
        &frozen(),
        &edited(
            "src/ffi.rs",
            "    pub text: RString,\n    /// The structured value",
            "    pub text: RString,\n    pub hint: RString,\n    /// The structured value",
        ),
    );
    assert!(added.iter().any(|d| d.starts_with("ffi::ToolOutcome::hint: added")), "{added:?}");
}

#[test]
fn a_pure_addition_passes() {
    // A new capability and a new SDK helper are how 1.x grows; neither is
    // part of the frozen core.
    let now = edited(
        "src/lib.rs",
        "pub const ROOT_MODULE_NAME",
        "/// A new helper.\npub fn added_helper() -> u32 {\n    1\n}\n\npub const ROOT_MODULE_NAME",
    );
    assert_eq!(differences(&frozen(), &now), Vec::<String>::new());
}
