//! The composition (`cordis.yml`) in the cordis loader's dialect.
//!
//! A composition is a YAML list of entries. Each entry has the keys `id`,
//! `name`, `config`, `group`, `disabled`, `inject`, `intercept` and
//! `isolate` (any other key fails that entry). A group (`group: true`, name
//! `cordis:group`) holds nested entries in `config`; an include (name
//! `cordis:include`, or its package names) mounts another file's entry list
//! with `config: {path, patches}`. Patch layers (the user's
//! `cordis.patch.yml`, then `--patch` files) are lists of patches applied to
//! the root list before anything is read as an entry. See
//! docs/guide/composition.md for the dialect and [`crate::patch`] for the
//! patch rules.
//!
//! Problems with a file as a whole (not YAML, empty, not a list, too large)
//! fail the whole composition with a line and column; problems with one
//! entry fail only that entry, so the others still load. `!!js` values are
//! kept as [`Switch::Expr`] or inside the config node and evaluated by the
//! loader when the entry is mounted or started.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;
use serde_yaml::Value as Yaml;

pub use crate::error::{CompositionError, MAX_COMPOSITION_BYTES};
use crate::patch::{apply_patches, RawEntry};
use crate::positions::{Position, Step};
use crate::realm::{RealmKey, Realms};
use crate::source::{Node, Origin, Role, Source};
pub use crate::yaml::is_js_tag;
use crate::yaml::kind;

/// The entry keys a composition accepts.
pub const ENTRY_KEYS: [&str; 8] = ["id", "name", "config", "group", "disabled", "inject", "intercept", "isolate"];

/// Names of the builtin group container.
pub const GROUP_NAMES: [&str; 2] = ["cordis:group", "group"];

/// Names of the builtin include: ours and the two package names the
/// TypeScript harness's compositions use.
pub const INCLUDE_NAMES: [&str; 3] = ["cordis:include", "@deepseek-ai/cordis-plugin-include", "@cordisjs/plugin-include"];

/// Include files are read when their name ends in one of these (as the
/// reference include does; JSON is read as YAML, of which it is a subset).
pub const INCLUDE_EXTENSIONS: [&str; 3] = ["yml", "yaml", "json"];

/// How deep includes may nest.
pub const MAX_INCLUDE_DEPTH: usize = 32;

/// A composed tree: the root file, its patch layers and its includes.
#[derive(Debug)]
pub struct Composition {
    /// The root file as the user named it (used in messages).
    pub file: String,
    /// The root file's folder: relative names and the default state
    /// directory resolve against it.
    pub dir: PathBuf,
    /// Top-level entries in order (after patch layers).
    pub entries: Vec<Entry>,
    /// Every file read: the root, the patch layers, then included files.
    pub sources: Vec<Arc<Source>>,
    /// Files the composition reads when they exist but that are not there
    /// now: the user's patch layer, and included files not written yet
    /// (`cordis dev` watches for them).
    pub missing: Vec<PathBuf>,
    /// Patches that could not apply, each naming its file and line.
    pub warnings: Vec<String>,
    root: Arc<Source>,
}

/// A patch layer to apply to the root list.
#[derive(Debug, Clone)]
pub struct Layer {
    /// The patch file.
    pub path: PathBuf,
    /// [`Role::UserPatch`] or [`Role::Patch`].
    pub role: Role,
}

/// What an entry mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A plugin from a library.
    Plugin,
    /// The builtin group container; `children` holds its entries.
    Group,
    /// The builtin include; `children` holds the included file's entries.
    Include {
        /// The included file.
        file: PathBuf,
        /// How many patches its config lists.
        patches: usize,
    },
}

/// An on/off value that may be a `!!js` expression (`disabled`).
#[derive(Debug, Clone, PartialEq)]
pub enum Switch {
    /// A literal `true` or `false` (absent and `null` are `false`).
    Fixed(bool),
    /// A `!!js` expression, evaluated at each mount decision.
    Expr(String),
}

/// One service an entry injects (`inject:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injection {
    /// The service name.
    pub name: String,
    /// `false` for `required: false`: the entry starts without it.
    pub required: bool,
}

/// Where services an entry provides resolve (`isolate:` values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Realm {
    /// `true`: a realm private to the entry and its descendants.
    Private,
    /// A label: one realm shared by every entry using it.
    Label(String),
}

impl fmt::Display for Realm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Realm::Private => write!(f, "private"),
            Realm::Label(l) => write!(f, "realm `{l}`"),
        }
    }
}

/// One entry of a composed tree.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The entry's id, scoped by its enclosing groups and includes
    /// (`delegation/tool-subagent`, `base/tool-todo`); generated from its
    /// position and name when the row has none (`tool-todo@2`).
    pub id: String,
    /// The id as written in its list (what patches target).
    pub local_id: String,
    /// Whether `id` was generated.
    pub id_generated: bool,
    /// The plugin name (`tool-todo`, `@deepseek-ai/dsh-tool-todo`,
    /// `./lib/libx.so`, `cordis:group`).
    pub name: String,
    /// What the entry mounts.
    pub kind: EntryKind,
    /// `disabled:`.
    pub disabled: Switch,
    /// `inject:`, in order.
    pub inject: Vec<Injection>,
    /// `intercept:` as JSON (recorded; applied with services).
    pub intercept: Option<Json>,
    /// `isolate:`, in order.
    pub isolate: Vec<(String, Realm)>,
    /// Where each service name resolves for this entry: its own `isolate`
    /// over its ancestors'.
    pub realms: Realms,
    /// Nested entries of a group or include.
    pub children: Vec<Entry>,
    /// Where the row was written.
    pub origin: Origin,
    /// Where the row starts in that file.
    pub position: Position,
    /// The folder relative library names resolve against: the folder of the
    /// file whose list holds the row.
    pub base_dir: PathBuf,
    /// The row as composed (keys after patches), for `cordis config`.
    pub raw: RawEntry,
    /// Problems that keep this entry from loading (each a full message).
    pub problems: Vec<String>,
}

impl Entry {
    /// A plugin entry's config as written (`None` when absent or null, and
    /// for groups and includes, whose `config` holds entries); `!!js` nodes
    /// inside are evaluated when the entry starts.
    pub fn config(&self) -> Option<&Node> {
        if self.kind != EntryKind::Plugin {
            return None;
        }
        self.raw.get("config").filter(|n| !matches!(n.value, Yaml::Null))
    }

    /// Whether the entry holds other entries (group or include).
    pub fn is_container(&self) -> bool {
        !matches!(self.kind, EntryKind::Plugin)
    }

    /// `file:line` of the row.
    pub fn locate(&self) -> String {
        self.origin.locate()
    }

    /// `file:line` of the row's `key` (of the row when absent).
    pub fn locate_key(&self, key: &str) -> String {
        match self.raw.get(key) {
            Some(node) => node.origin.locate(),
            None => self.locate(),
        }
    }

    /// `file:line` of the `inject` item naming service `name`: the item
    /// itself, the `inject` key when the item cannot be placed, the row
    /// when the entry does not inject `name` (its plugin does).
    pub fn locate_injection(&self, name: &str) -> String {
        let Some(node) = self.raw.get("inject").filter(|_| self.inject.iter().any(|i| i.name == name)) else { return self.locate() };
        let item = match &node.value {
            Yaml::Sequence(items) => items.iter().position(|v| v.as_str() == Some(name)).map(|i| node.origin.index(i)),
            Yaml::Mapping(map) => map.keys().any(|k| k.as_str() == Some(name)).then(|| node.origin.key(name)),
            _ => None,
        };
        item.unwrap_or_else(|| node.origin.clone()).locate()
    }

    /// `file:line` of the node at `segments` inside the config.
    pub fn locate_config(&self, segments: &[Step]) -> String {
        match self.config() {
            Some(node) => {
                let mut origin = node.origin.clone();
                origin.path.extend(segments.iter().cloned());
                origin.locate()
            }
            None => self.locate_key("config"),
        }
    }

    /// Whether two versions of an entry would start the same way (same
    /// name, config, switches and services).
    pub fn same_setup(&self, other: &Entry) -> bool {
        self.name == other.name
            && self.config().map(|n| &n.value) == other.config().map(|n| &n.value)
            && self.disabled == other.disabled
            && self.inject == other.inject
            && self.intercept == other.intercept
            && self.isolate == other.isolate
            && self.realms == other.realms
            && self.base_dir == other.base_dir
    }

    /// The config as JSON: `{}` when absent, every `!!js` node replaced by
    /// what `eval` returns for its source (`None`, JavaScript's `undefined`,
    /// drops a mapping key and is `null` in a list, as `JSON.stringify`
    /// does).
    ///
    /// # Errors
    /// A message naming the file and line of the offending node: a value
    /// with no JSON form, a non-string key, or what `eval` reported.
    pub fn config_json(&self, eval: &mut dyn FnMut(&str) -> Result<Option<Json>, String>) -> Result<Json, String> {
        self.config_json_traced(eval).map(|(json, _)| json)
    }

    /// As [`Entry::config_json`], and also every place where a `!!js`
    /// expression was `undefined` (a key left out, or `null` in a list),
    /// in document order, so that a caller can refuse one where the
    /// plugin needs a value.
    ///
    /// # Errors
    /// As [`Entry::config_json`].
    pub fn config_json_traced(&self, eval: &mut dyn FnMut(&str) -> Result<Option<Json>, String>) -> Result<(Json, Vec<UndefinedValue>), String> {
        let Some(node) = self.config() else { return Ok((Json::Object(Default::default()), Vec::new())) };
        let mut undefined = Vec::new();
        let mut trail = Vec::new();
        match to_json_at(&node.value, &mut Some(eval), &mut trail, &mut undefined) {
            Ok(Some(Json::Null) | None) => Ok((Json::Object(Default::default()), undefined)),
            Ok(Some(json)) => Ok((json, undefined)),
            Err((rel, message)) => Err(format!("{}: entry {}: {message}", self.locate_config(&rel), self.id)),
        }
    }

    /// Whether the config holds `!!js` expressions.
    pub fn config_has_expressions(&self) -> bool {
        self.config().is_some_and(|n| has_expressions(&n.value))
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.id, self.name)
    }
}

impl Composition {
    /// Reads the composition at `path` with no patch layers.
    ///
    /// # Errors
    /// [`CompositionError`] when the file cannot be read or is not a YAML
    /// list; entry-level problems are kept on the entries instead.
    pub fn read(path: &Path) -> Result<Composition, CompositionError> {
        Composition::compose(path, &[])
    }

    /// Reads the composition at `path`, applies `layers` in order to its
    /// list, then reads every entry (mounting included files).
    ///
    /// # Errors
    /// [`CompositionError`] when the root file or a patch layer cannot be
    /// read or is not a YAML list; problems inside included files fail the
    /// include entry instead.
    pub fn compose(path: &Path, layers: &[Layer]) -> Result<Composition, CompositionError> {
        let (root, doc) = Source::read(path, Role::Root)?;
        Composition::build(root, doc, layers)
    }

    /// Parses composition text. `file` names it in messages and `dir` is
    /// the folder relative names resolve against.
    ///
    /// # Errors
    /// See [`Composition::read`].
    pub fn parse(file: &str, dir: PathBuf, text: String) -> Result<Composition, CompositionError> {
        let (root, doc) = Source::parse(file, dir.join(file), dir, text, Role::Root)?;
        Composition::build(root, doc, &[])
    }

    fn build(root: Arc<Source>, doc: Yaml, layers: &[Layer]) -> Result<Composition, CompositionError> {
        let origin = Origin::root(&root);
        let mut rows = list_of(&root, doc, origin, "a list of entries (`- name: ...`)")?;
        let mut sources = vec![root.clone()];
        let mut warnings = Vec::new();
        let mut missing = Vec::new();
        for layer in layers {
            // The user's layer is optional: absent, it is skipped (and
            // watched for by `cordis dev`).
            if layer.role == Role::UserPatch && matches!(std::fs::symlink_metadata(&layer.path), Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
                missing.push(layer.path.clone());
                continue;
            }
            let (source, doc) = Source::read(&layer.path, layer.role.clone()).map_err(|e| match e {
                CompositionError::Read { file, source } => CompositionError::ReadLayer { file, source },
                other => other,
            })?;
            let patches = patch_list(&source, doc)?;
            sources.push(source);
            warnings.extend(apply_patches(&mut rows, &patches, "the composition").map_err(|message| CompositionError::Conflict { message })?);
        }
        let mut builder = Builder { sources, missing, warnings, chain: vec![canonical(&root.path)] };
        let mut ids = HashMap::new();
        let entries = builder.list(rows, "", &root.dir, &mut ids, &Realms::default());
        let mut composition = Composition {
            file: root.file.clone(),
            dir: root.dir.clone(),
            entries,
            sources: builder.sources,
            missing: builder.missing,
            warnings: builder.warnings,
            root,
        };
        let hints: Vec<String> = composition.walk().into_iter().flat_map(template_hints).collect();
        composition.warnings.extend(hints);
        Ok(composition)
    }

    /// The root file.
    pub fn root(&self) -> &Arc<Source> {
        &self.root
    }

    /// The root file's text (without a byte-order mark).
    pub fn text(&self) -> &str {
        &self.root.text
    }

    /// Where the node at `path` of the root file starts.
    pub fn position(&self, path: &[Step]) -> Position {
        self.root.position(path)
    }

    /// `file:line` for the node at `path` of the root file.
    pub fn locate(&self, path: &[Step]) -> String {
        self.root.locate(path)
    }

    /// Every entry, depth first (containers before their children).
    pub fn walk(&self) -> Vec<&Entry> {
        fn push<'a>(out: &mut Vec<&'a Entry>, entries: &'a [Entry]) {
            for e in entries {
                out.push(e);
                push(out, &e.children);
            }
        }
        let mut out = Vec::new();
        push(&mut out, &self.entries);
        out
    }
}

/// The default user patch layer: `$XDG_CONFIG_HOME/cordis/cordis.patch.yml`,
/// else `~/.config/cordis/cordis.patch.yml` (`None` when neither variable
/// is set).
pub fn user_patch_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".config"),
    };
    Some(base.join("cordis").join("cordis.patch.yml"))
}

/// The patch layers to apply: the user layer when it exists (unless
/// `skip_user`), then each `--patch` file in order.
pub fn layers(patches: &[PathBuf], skip_user: bool) -> Vec<Layer> {
    let mut out = Vec::new();
    if !skip_user {
        // Listed even when absent: composing skips it then, and a
        // `cordis dev` watching the composition picks it up once written.
        if let Some(user) = user_patch_path() {
            out.push(Layer { path: user, role: Role::UserPatch });
        }
    }
    out.extend(patches.iter().enumerate().map(|(i, p)| Layer { path: p.clone(), role: Role::Patch(i + 1) }));
    out
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// The rows of a file whose document must be an entry list.
fn list_of(source: &Arc<Source>, doc: Yaml, origin: Origin, expected: &str) -> Result<Vec<RawEntry>, CompositionError> {
    let file = source.file.clone();
    match doc {
        Yaml::Null => Err(CompositionError::Empty { file }),
        Yaml::Sequence(_) => Ok(RawEntry::list(Node { value: doc, origin }).unwrap_or_default()),
        other => {
            let p = source.position(&[]);
            Err(CompositionError::NotAList { file, line: p.line, column: p.column, expected: expected.to_string(), found: kind(&other) })
        }
    }
}

/// The patches of a patch-layer file: a top-level list; an empty or
/// comment-only file is an error (`[]` disables a layer).
fn patch_list(source: &Arc<Source>, doc: Yaml) -> Result<Vec<Node>, CompositionError> {
    match doc {
        Yaml::Null => Err(CompositionError::EmptyPatch { file: source.file.clone() }),
        Yaml::Sequence(_) => Ok(Node { value: doc, origin: Origin::root(source) }.into_items().unwrap_or_default()),
        other => {
            let p = source.position(&[]);
            Err(CompositionError::NotAList {
                file: source.file.clone(),
                line: p.line,
                column: p.column,
                expected: "a list of patches (`- id: ...` or `- insert: [...]`)".into(),
                found: kind(&other),
            })
        }
    }
}

/// Reads raw rows into entries, mounting includes.
struct Builder {
    sources: Vec<Arc<Source>>,
    /// Files the composition reads when they exist (see
    /// [`Composition::missing`]).
    missing: Vec<PathBuf>,
    warnings: Vec<String>,
    /// Canonical paths of the files being read, outermost first.
    chain: Vec<PathBuf>,
}

impl Builder {
    /// Reads one list. `prefix` scopes generated and reported ids; `ids`
    /// holds the ids already used in this list's tree (file), with where.
    fn list(&mut self, rows: Vec<RawEntry>, prefix: &str, base_dir: &Path, ids: &mut HashMap<String, String>, realms: &Realms) -> Vec<Entry> {
        rows.into_iter().enumerate().map(|(i, row)| self.entry(row, i, prefix, base_dir, ids, realms)).collect()
    }

    fn entry(&mut self, mut raw: RawEntry, index: usize, prefix: &str, base_dir: &Path, ids: &mut HashMap<String, String>, realms: &Realms) -> Entry {
        let origin = raw.origin.clone();
        // The entry keeps the row's own keys (`raw`, set once they are
        // read); its nested rows become the entry's children.
        let children = raw.children.take();
        let mut entry = Entry {
            id: String::new(),
            local_id: String::new(),
            id_generated: true,
            name: String::new(),
            kind: EntryKind::Plugin,
            disabled: Switch::Fixed(false),
            inject: Vec::new(),
            intercept: None,
            isolate: Vec::new(),
            realms: realms.clone(),
            children: Vec::new(),
            position: origin.position(),
            origin: origin.clone(),
            base_dir: base_dir.to_path_buf(),
            raw: RawEntry { origin: origin.clone(), not_a_mapping: None, keys: Vec::new(), children: None },
            problems: Vec::new(),
        };
        // Problems with where they are; formatted with the entry's id once
        // it is known.
        let mut problems: Vec<(String, String)> = Vec::new();
        if let Some(other) = &raw.not_a_mapping {
            entry.local_id = format!("entry@{index}");
            entry.id = format!("{prefix}{}", entry.local_id);
            entry.problems.push(format!(
                "{}: entry {}: expected an entry (a mapping with at least `name`), found {}",
                origin.locate(),
                entry.id,
                kind(other)
            ));
            entry.raw = raw;
            return entry;
        }
        let mut config: Option<&Node> = None;
        let mut group = false;
        for (key, node) in &raw.keys {
            // Built only for a problem: most keys have none.
            let at = || node.origin.locate();
            let Some(key) = key.as_str() else {
                problems.push((origin.locate(), format!("entry keys must be strings, found {}", kind(key))));
                continue;
            };
            let value = &node.value;
            match key {
                "id" => match scalar_text(value) {
                    Some(id) if id.contains('/') => {
                        problems.push((at(), format!("`id` {id:?} contains `/`, which joins the ids of nested rows; use `-`, `_` or `.`")))
                    }
                    Some(id) if !id.trim().is_empty() => {
                        entry.local_id = id;
                        entry.id_generated = false;
                    }
                    _ => problems.push((at(), format!("`id` must be a non-empty string, found {}", kind(value)))),
                },
                "name" if js_source(value).is_some() => {
                    problems.push((at(), "`name` is never evaluated: write the plugin's name without `!!js`".into()))
                }
                "name" => match value.as_str() {
                    Some(name) if !name.trim().is_empty() => entry.name = name.trim().to_string(),
                    _ => problems.push((at(), format!("`name` must be a non-empty string, found {}", kind(value)))),
                },
                "disabled" => match switch_of(value) {
                    Ok(s) => entry.disabled = s,
                    Err(m) => problems.push((at(), format!("`disabled` {m}"))),
                },
                "group" => match value {
                    Yaml::Null => {}
                    _ => match bool_of(value) {
                        Ok(b) => group = b,
                        Err(m) => problems.push((at(), format!("`group` {m}"))),
                    },
                },
                "config" => config = Some(node),
                "inject" => match injections(value) {
                    Ok(list) => entry.inject = list,
                    Err(m) => problems.push((at(), format!("`inject` {m}"))),
                },
                "intercept" => match value {
                    Yaml::Null => {}
                    Yaml::Mapping(_) => match to_json(value, &mut None) {
                        Ok(json) => entry.intercept = json,
                        Err((_, m)) => problems.push((at(), format!("`intercept` {m}"))),
                    },
                    other => problems.push((at(), format!("`intercept` must be a mapping of service name to options, found {}", kind(other)))),
                },
                "isolate" => match isolate_of(value) {
                    Ok(list) => entry.isolate = list,
                    Err(m) => problems.push((at(), format!("`isolate` {m}"))),
                },
                MERGE_KEY => problems.push((at(), MERGE_KEY_MESSAGE.to_string())),
                other => {
                    problems.push((at(), format!("unknown entry key `{other}` (entry keys are {})", ENTRY_KEYS.map(|k| format!("`{k}`")).join(", "))))
                }
            }
        }
        if entry.name.is_empty() && raw.get("name").is_none() {
            problems.push((origin.locate(), "the entry has no `name` (the plugin to load)".into()));
        }
        if entry.local_id.is_empty() {
            let local = if entry.name.is_empty() { "entry".to_string() } else { entry.name.clone() };
            entry.local_id = format!("{local}@{index}");
        }
        entry.id = format!("{prefix}{}", entry.local_id);
        let id_at = raw.get("id").map(|n| n.origin.locate()).unwrap_or_else(|| origin.locate());
        if let Some(first) = ids.get(&entry.local_id) {
            problems.push((id_at.clone(), format!("duplicate entry id `{}` (first used at {first}); ids must be unique in a file", entry.local_id)));
        } else {
            ids.insert(entry.local_id.clone(), id_at);
        }
        entry.realms = realms.child(entry.isolate.iter().map(|(name, realm)| {
            let key = match realm {
                Realm::Private => RealmKey::Private(entry.id.clone()),
                Realm::Label(l) => RealmKey::Label(l.clone()),
            };
            (name.clone(), key)
        }));
        let is_include = INCLUDE_NAMES.contains(&entry.name.as_str());
        let config_at = config.map(|n| n.origin.locate()).unwrap_or_else(|| origin.locate());
        let child_prefix = format!("{}/", entry.id);
        if group {
            entry.kind = EntryKind::Group;
            if !GROUP_NAMES.contains(&entry.name.as_str()) && !entry.name.is_empty() {
                problems.push((origin.locate(), format!("a group entry must be named `cordis:group`, found `{}`", entry.name)));
            }
            match (children, config.map(|n| &n.value)) {
                (Some(children), _) => {
                    let realms = entry.realms.clone();
                    entry.children = self.list(children, &child_prefix, base_dir, ids, &realms);
                }
                (None, None | Some(Yaml::Null)) => {}
                (None, Some(other)) => problems.push((config_at, format!("a group's `config` must be a list of entries, found {}", kind(other)))),
            }
        } else if is_include {
            match self.include(&entry, config, &child_prefix, base_dir, &entry.realms.clone()) {
                Ok((kind, children)) => {
                    entry.kind = kind;
                    entry.children = children;
                }
                Err((at, message)) => {
                    entry.kind = EntryKind::Include { file: PathBuf::new(), patches: 0 };
                    problems.push((at, message));
                }
            }
        } else if GROUP_NAMES.contains(&entry.name.as_str()) {
            problems.push((origin.locate(), "the builtin `cordis:group` holds entries: add `group: true` and list them in `config`".into()));
        } else if let Some(node) = config {
            if !matches!(node.value, Yaml::Null) {
                // Values with no JSON form are found now, not at start.
                if !has_expressions(&node.value) {
                    if let Err((rel, m)) = to_json(&node.value, &mut None) {
                        let mut o = node.origin.clone();
                        o.path.extend(rel);
                        problems.push((o.locate(), m));
                    }
                }
            }
        }
        let id = entry.id.clone();
        entry.problems.extend(problems.into_iter().map(|(at, m)| format!("{at}: entry {id}: {m}")));
        entry.raw = raw;
        entry
    }

    /// Mounts the file an include entry names: reads it, applies the
    /// include's patches, reads its rows as the include's children.
    fn include(
        &mut self,
        entry: &Entry,
        config: Option<&Node>,
        prefix: &str,
        base_dir: &Path,
        realms: &Realms,
    ) -> Result<(EntryKind, Vec<Entry>), (String, String)> {
        let row_at = entry.origin.locate();
        let Some(config) = config.filter(|n| !matches!(n.value, Yaml::Null)) else {
            return Err((row_at, "an include needs `config: {path: FILE}` naming the entry list to mount".into()));
        };
        let at = config.origin.locate();
        let Yaml::Mapping(map) = &config.value else {
            return Err((at, format!("an include's `config` must be a mapping `{{path, patches}}`, found {}", kind(&config.value))));
        };
        for key in map.keys() {
            match key.as_str() {
                Some("path" | "patches" | "enableLogs") => {}
                Some(other) => {
                    return Err((
                        config.origin.key(other).locate(),
                        format!("unknown include option `{other}` (options are `path`, `patches`, `enableLogs`)"),
                    ))
                }
                None => return Err((at, format!("include options must be named by strings, found {}", kind(key)))),
            }
        }
        let path_node =
            config.get("path").ok_or_else(|| (at.clone(), "an include's `config` needs `path`, the entry list file to mount".to_string()))?;
        if js_source(&path_node.value).is_some() {
            return Err((path_node.origin.locate(), "an include's `path` is never evaluated: write the file name without `!!js`".into()));
        }
        let Some(rel) = path_node.value.as_str().filter(|p| !p.trim().is_empty()) else {
            return Err((path_node.origin.locate(), format!("`path` must be a file name, found {}", kind(&path_node.value))));
        };
        let file: PathBuf = if Path::new(rel).is_absolute() || base_dir == Path::new(".") { PathBuf::from(rel) } else { base_dir.join(rel) };
        // `a/./b` reads as `a/b` in messages.
        let file: PathBuf = file.components().collect();
        let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !INCLUDE_EXTENSIONS.contains(&ext) {
            return Err((path_node.origin.locate(), format!("cannot include {}: the file must end in .yml, .yaml or .json", file.display())));
        }
        let patches = match config.get("patches") {
            None => Vec::new(),
            Some(node) => match &node.value {
                Yaml::Null => Vec::new(),
                Yaml::Sequence(_) => node.clone().into_items().unwrap_or_default(),
                other => return Err((node.origin.locate(), format!("`patches` must be a list of patches, found {}", kind(other)))),
            },
        };
        let key = canonical(&file);
        if let Some(first) = self.chain.iter().position(|p| *p == key) {
            let mut names: Vec<String> = self.chain[first..].iter().map(|p| p.display().to_string()).collect();
            names.push(key.display().to_string());
            return Err((path_node.origin.locate(), format!("include cycle: {}", names.join(" → "))));
        }
        if self.chain.len() > MAX_INCLUDE_DEPTH {
            return Err((path_node.origin.locate(), format!("includes nest more than {MAX_INCLUDE_DEPTH} deep")));
        }
        let (source, doc) = match Source::read(&file, Role::Include(entry.id.clone())) {
            Ok(read) => read,
            Err(CompositionError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                self.missing.push(file.clone());
                return Err((
                    path_node.origin.locate(),
                    format!("the included file {} does not exist (`{rel}`, resolved against {})", file.display(), base_dir.display()),
                ));
            }
            Err(e) => return Err((path_node.origin.locate(), format!("cannot include it: {e}"))),
        };
        self.sources.push(source.clone());
        let mut rows = match list_of(&source, doc, Origin::root(&source), "an entry list") {
            Ok(rows) => rows,
            Err(CompositionError::Empty { .. }) => {
                self.warnings.push(format!(
                    "{}: the included file {} is empty; the include mounts no entries (write `[]` to say so)",
                    path_node.origin.locate(),
                    file.display()
                ));
                Vec::new()
            }
            Err(e) => return Err((path_node.origin.locate(), format!("cannot include it: {e}"))),
        };
        let scope = format!("{} (included by `{}`)", source.file, entry.id);
        self.warnings.extend(apply_patches(&mut rows, &patches, &scope).map_err(|message| (path_node.origin.locate(), message))?);
        self.chain.push(key);
        let mut ids = HashMap::new();
        let children = self.list(rows, prefix, &source.dir.clone(), &mut ids, realms);
        self.chain.pop();
        Ok((EntryKind::Include { file, patches: patches.len() }, children))
    }
}

/// A warning for each config string of `entry` that looks like a template
/// in koishi's form (`${{ … }}`), which this dialect keeps as plain text.
fn template_hints(entry: &Entry) -> Vec<String> {
    fn walk(v: &Yaml, path: &mut Vec<Step>, found: &mut Vec<(Vec<Step>, String)>) {
        match v {
            Yaml::String(s) if s.find("${{").is_some_and(|at| s[at..].contains("}}")) => found.push((path.clone(), s.clone())),
            Yaml::Sequence(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(Step::Index(i));
                    walk(item, path, found);
                    path.pop();
                }
            }
            Yaml::Mapping(map) => {
                for (k, item) in map {
                    if let Some(k) = k.as_str() {
                        path.push(Step::Key(k.to_string()));
                        walk(item, path, found);
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }
    let Some(config) = entry.config() else { return Vec::new() };
    let mut found = Vec::new();
    walk(&config.value, &mut Vec::new(), &mut found);
    found
        .into_iter()
        .map(|(path, text)| {
            format!(
                "{}: entry {}: {text:?} looks like a `${{{{ … }}}}` template, which this dialect does not expand: the value is that text as written; \
                 for a value computed at load time write a `!!js` expression (e.g. `!!js process.env.NAME`)",
                entry.locate_config(&path),
                entry.id
            )
        })
        .collect()
}

/// The source of a `!!js` scalar, if `value` is one.
pub fn js_source(value: &Yaml) -> Option<String> {
    match value {
        Yaml::Tagged(t) if is_js_tag(&t.tag) => match &t.value {
            Yaml::String(s) => Some(s.clone()),
            Yaml::Number(n) => Some(n.to_string()),
            Yaml::Bool(b) => Some(b.to_string()),
            Yaml::Null => Some(String::new()),
            _ => None,
        },
        _ => None,
    }
}

fn switch_of(value: &Yaml) -> Result<Switch, String> {
    match value {
        Yaml::Null => Ok(Switch::Fixed(false)),
        Yaml::Tagged(t) if is_js_tag(&t.tag) => js_source(value).map(Switch::Expr).ok_or_else(|| "`!!js` must tag a scalar expression".to_string()),
        // Only a switch takes an expression (`group` does not).
        Yaml::String(s) if s.contains("${{") => Err(format!(
            "must be true or false, found the string {s:?} (a `${{{{ … }}}}` template is not expanded: for a switch computed at load time write a `!!js` expression, e.g. `!!js process.env.CI === 'true'`)"
        )),
        other => bool_of(other).map(Switch::Fixed),
    }
}

fn injections(value: &Yaml) -> Result<Vec<Injection>, String> {
    let name_of = |k: &Yaml| match k {
        Yaml::String(s) if !s.trim().is_empty() => Ok(s.clone()),
        other => Err(format!("names services by strings, found {}", kind(other))),
    };
    match value {
        Yaml::Null => Ok(Vec::new()),
        Yaml::Sequence(items) => items.iter().map(|k| name_of(k).map(|name| Injection { name, required: true })).collect(),
        Yaml::Mapping(map) => map
            .iter()
            .map(|(k, v)| {
                let name = name_of(k)?;
                let required = match v {
                    Yaml::Null | Yaml::Bool(true) => true,
                    Yaml::Mapping(options) => {
                        let mut required = true;
                        for (ok, ov) in options {
                            match (ok.as_str(), ov) {
                                (Some("required"), Yaml::Bool(b)) => required = *b,
                                (Some("required"), other) => return Err(format!("`{name}.required` must be true or false, found {}", kind(other))),
                                (Some(other), _) => return Err(format!("`{name}` has an unknown option `{other}` (options: `required`)")),
                                (None, _) => return Err(format!("`{name}` options must be named by strings")),
                            }
                        }
                        required
                    }
                    other => return Err(format!("`{name}` must be options such as `{{required: false}}`, found {}", kind(other))),
                };
                Ok(Injection { name, required })
            })
            .collect(),
        other => Err(format!("must be a list of service names or a mapping of service name to options, found {}", kind(other))),
    }
}

fn isolate_of(value: &Yaml) -> Result<Vec<(String, Realm)>, String> {
    match value {
        Yaml::Null => Ok(Vec::new()),
        Yaml::Mapping(map) => {
            let mut out = Vec::new();
            for (k, v) in map {
                let Some(name) = k.as_str().filter(|s| !s.trim().is_empty()) else {
                    return Err(format!("names services by strings, found {}", kind(k)));
                };
                match v {
                    Yaml::Bool(true) => out.push((name.to_string(), Realm::Private)),
                    Yaml::String(label) if !label.is_empty() => out.push((name.to_string(), Realm::Label(label.clone()))),
                    Yaml::Bool(false) | Yaml::Null => {}
                    other => return Err(format!("`{name}` must be true (a private realm) or a realm label, found {}", kind(other))),
                }
            }
            Ok(out)
        }
        other => Err(format!("must be a mapping of service name to true or a realm label, found {}", kind(other))),
    }
}

fn scalar_text(value: &Yaml) -> Option<String> {
    match value {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The hint added when a boolean was expected and a YAML 1.1 spelling was
/// found: this parser reads YAML 1.2, where those are plain strings.
pub const YAML11_BOOL_HINT: &str = "YAML 1.1 spellings such as yes/no/on/off are strings in YAML 1.2: write true or false";

/// What to say when the string `s` was given where a boolean is expected.
///
/// `true` or `false` read as a string was quoted (`"true"`) or tagged
/// (`!!str true`); the parsed value no longer says which, so the hint names
/// both and claims neither.
pub fn bool_hint(s: &str) -> &'static str {
    match s {
        "true" | "false" => "quotes or a `!!str` tag make it a string: write true or false bare",
        _ if is_yaml11_bool(s) => YAML11_BOOL_HINT,
        _ => "write true or false",
    }
}

/// Whether `s` is a YAML 1.1 boolean spelling.
pub fn is_yaml11_bool(s: &str) -> bool {
    matches!(s.to_ascii_lowercase().as_str(), "yes" | "no" | "on" | "off" | "y" | "n" | "true" | "false")
}

/// The YAML 1.1 merge key.
const MERGE_KEY: &str = "<<";

/// What a `<<:` merge key gets: YAML 1.2, which compositions are read as,
/// has no merge keys, so `<<` would be an ordinary key named `<<`.
const MERGE_KEY_MESSAGE: &str = "`<<` is a YAML 1.1 merge key, and YAML 1.2 (how compositions are read) has no merge keys: \
write the keys out, or reuse a whole value with an alias (`config: *name`)";

/// Whether `value` is what a merge key takes: a mapping (an alias to one)
/// or a list of mappings.
fn is_merge_value(value: &Yaml) -> bool {
    match value {
        Yaml::Mapping(_) => true,
        Yaml::Sequence(items) => !items.is_empty() && items.iter().all(|i| matches!(i, Yaml::Mapping(_))),
        _ => false,
    }
}

fn bool_of(value: &Yaml) -> Result<bool, String> {
    match value {
        Yaml::Bool(b) => Ok(*b),
        Yaml::String(s) => Err(format!("must be true or false, found the string {s:?} ({})", bool_hint(s))),
        other => Err(format!("must be true or false, found {}", kind(other))),
    }
}

/// Evaluates a `!!js` source to a JSON value (`None` is `undefined`).
pub type Eval<'a> = Option<&'a mut dyn FnMut(&str) -> Result<Option<Json>, String>>;

/// Whether `value` holds a `!!js` node anywhere.
fn has_expressions(value: &Yaml) -> bool {
    match value {
        Yaml::Tagged(t) => is_js_tag(&t.tag) || has_expressions(&t.value),
        Yaml::Sequence(items) => items.iter().any(has_expressions),
        Yaml::Mapping(map) => map.values().any(has_expressions),
        _ => false,
    }
}

/// A place in an entry's config where a `!!js` expression was `undefined`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndefinedValue {
    /// Where, below `config`: keys and list indexes.
    pub path: Vec<Step>,
    /// The expression's source.
    pub source: String,
}

/// Converts a YAML value to JSON (`None`: `undefined`, from an expression).
/// `!!js` nodes go through `eval`; without one they are an error. Errors
/// carry the relative path of the offending node.
fn to_json(value: &Yaml, eval: &mut Eval<'_>) -> Result<Option<Json>, (Vec<Step>, String)> {
    to_json_at(value, eval, &mut Vec::new(), &mut Vec::new())
}

/// [`to_json`] at `trail` (the path of `value`), recording in `undefined`
/// every expression that was `undefined`.
fn to_json_at(
    value: &Yaml,
    eval: &mut Eval<'_>,
    trail: &mut Vec<Step>,
    undefined: &mut Vec<UndefinedValue>,
) -> Result<Option<Json>, (Vec<Step>, String)> {
    Ok(Some(match value {
        Yaml::Null => Json::Null,
        Yaml::Bool(b) => Json::Bool(*b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                Json::from(i)
            } else if let Some(u) = n.as_u64() {
                Json::from(u)
            } else {
                match n.as_f64().and_then(serde_json::Number::from_f64) {
                    Some(f) => Json::Number(f),
                    None => return Err((vec![], format!("the number {n} has no JSON form (NaN and infinities are not allowed)"))),
                }
            }
        }
        Yaml::String(s) => Json::String(s.clone()),
        Yaml::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                trail.push(Step::Index(i));
                let json = to_json_at(item, eval, trail, undefined).map_err(|(mut p, m)| {
                    p.insert(0, Step::Index(i));
                    (p, m)
                });
                trail.pop();
                let json = json?;
                out.push(json.unwrap_or(Json::Null));
            }
            Json::Array(out)
        }
        Yaml::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    other => return Err((vec![], format!("config keys must be strings, found {}", kind(other)))),
                };
                if key == MERGE_KEY && is_merge_value(v) {
                    return Err((vec![Step::Key(key)], MERGE_KEY_MESSAGE.to_string()));
                }
                trail.push(Step::Key(key.clone()));
                let json = to_json_at(v, eval, trail, undefined).map_err(|(mut p, m)| {
                    p.insert(0, Step::Key(key.clone()));
                    (p, m)
                });
                trail.pop();
                let json = json?;
                if let Some(json) = json {
                    out.insert(key, json);
                }
            }
            Json::Object(out)
        }
        Yaml::Tagged(t) if is_js_tag(&t.tag) => {
            let Some(source) = js_source(value) else {
                return Err((vec![], "`!!js` must tag a scalar holding an expression".into()));
            };
            let Some(eval) = eval else { return Err((vec![], "a `!!js` expression is not allowed here".into())) };
            let json = eval(&source).map_err(|m| (vec![], m))?;
            if json.is_none() {
                undefined.push(UndefinedValue { path: trail.clone(), source });
            }
            return Ok(json);
        }
        Yaml::Tagged(t) => {
            return Err((vec![], format!("the tag {} is not supported: values are plain YAML or `!!js` expressions", t.tag)));
        }
    }))
}
#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Composition, CompositionError> {
        Composition::parse("cordis.yml", PathBuf::from("."), text.to_string())
    }

    #[test]
    fn parses_entries_with_generated_ids() {
        let c = parse("- name: tool-todo\n  config:\n    allowParallelInProgress: true\n- id: b\n  name: other\n  disabled: true\n").unwrap();
        assert_eq!(c.entries.len(), 2);
        assert_eq!(c.entries[0].id, "tool-todo@0");
        assert!(c.entries[0].id_generated);
        let config = c.entries[0].config_json(&mut |_| Ok(None)).unwrap();
        assert_eq!(config, serde_json::json!({"allowParallelInProgress": true}));
        assert_eq!(c.entries[1].id, "b");
        assert_eq!(c.entries[1].disabled, Switch::Fixed(true));
        assert!(c.entries.iter().all(|e| e.problems.is_empty()));
    }

    #[test]
    fn dialect_keys_are_read_and_unknown_keys_fail_only_that_entry() {
        let c = parse(concat!(
            "- name: a\n",
            "- name: b\n  inject: [x, y]\n  isolate:\n    svc: true\n    other: shared\n  intercept:\n    svc: {timeout: 5}\n",
            "- name: c\n  inject:\n    x: {required: false}\n    y:\n",
            "- name: d\n  bogus: 1\n",
        ))
        .unwrap();
        assert!(c.entries[0].problems.is_empty());
        let b = &c.entries[1];
        assert!(b.problems.is_empty(), "{:?}", b.problems);
        assert_eq!(b.inject.iter().map(|i| (i.name.as_str(), i.required)).collect::<Vec<_>>(), [("x", true), ("y", true)]);
        assert_eq!(b.isolate, [("svc".to_string(), Realm::Private), ("other".to_string(), Realm::Label("shared".into()))]);
        assert_eq!(b.intercept, Some(serde_json::json!({"svc": {"timeout": 5}})));
        let c2 = &c.entries[2];
        assert_eq!(c2.inject.iter().map(|i| (i.name.as_str(), i.required)).collect::<Vec<_>>(), [("x", false), ("y", true)]);
        assert_eq!(c.entries[3].problems.len(), 1);
        assert!(c.entries[3].problems[0].starts_with("cordis.yml:14: entry d@3: unknown entry key `bogus`"), "{:?}", c.entries[3].problems);
    }

    #[test]
    fn js_values_are_kept_as_expressions() {
        let c = parse("- name: a\n  disabled: !!js process.platform === 'win32'\n  config:\n    root: !!js \"process.env.X ?? 'y'\"\n    gone: !!js undefined\n    list: [1, !!js undefined]\n").unwrap();
        let e = &c.entries[0];
        assert!(e.problems.is_empty(), "{:?}", e.problems);
        assert_eq!(e.disabled, Switch::Expr("process.platform === 'win32'".into()));
        assert!(e.config_has_expressions());
        let mut seen = Vec::new();
        let json = e
            .config_json(&mut |src| {
                seen.push(src.to_string());
                Ok(if src == "undefined" { None } else { Some(serde_json::json!("v")) })
            })
            .unwrap();
        assert_eq!(json, serde_json::json!({"root": "v", "list": [1, null]}));
        assert_eq!(seen[0], "process.env.X ?? 'y'");
        let (_, undefined) = e.config_json_traced(&mut |src| Ok(if src == "undefined" { None } else { Some(serde_json::json!("v")) })).unwrap();
        assert_eq!(
            undefined,
            [
                UndefinedValue { path: vec![Step::Key("gone".into())], source: "undefined".into() },
                UndefinedValue { path: vec![Step::Key("list".into()), Step::Index(1)], source: "undefined".into() },
            ]
        );
        let err = e.config_json(&mut |_| Err("boom".into())).unwrap_err();
        assert_eq!(err, "cordis.yml:4: entry a@0: boom");
    }

    #[test]
    fn slashes_in_ids_and_expressions_in_names_are_refused() {
        let c = parse("- id: g/x\n  name: a\n- id: b\n  name: !!js \"'tool-todo'\"\n").unwrap();
        assert!(c.entries[0].problems[0].contains("contains `/`"), "{:?}", c.entries[0].problems);
        assert!(c.entries[1].problems[0].contains("`name` is never evaluated"), "{:?}", c.entries[1].problems);
    }

    #[test]
    fn package_names_are_valid_names() {
        let c = parse("- id: t\n  name: '@deepseek-ai/dsh-tool-todo'\n  config: {allowParallelInProgress: true}\n").unwrap();
        assert_eq!(c.entries[0].name, "@deepseek-ai/dsh-tool-todo");
        assert!(c.entries[0].problems.is_empty());
    }

    #[test]
    fn whole_file_errors() {
        assert!(matches!(parse(""), Err(CompositionError::Empty { .. })));
        assert!(matches!(parse("# only a comment\n"), Err(CompositionError::Empty { .. })));
        assert!(matches!(parse("name: x\n"), Err(CompositionError::NotAList { line: 1, .. })));
        let tab = parse("- name: a\n\tconfig: 1\n").unwrap_err().to_string();
        assert!(tab.contains("cordis.yml:2:"), "{tab}");
        let dup = parse("- name: a\n  name: b\n").unwrap_err().to_string();
        assert!(dup.contains("cordis.yml:2:"), "{dup}");
    }

    #[test]
    fn byte_order_mark_is_accepted() {
        let c = parse("\u{feff}- name: a\n").unwrap();
        assert_eq!(c.entries[0].name, "a");
    }

    #[test]
    fn groups_nest_entries_with_scoped_ids() {
        let c = parse("- id: g\n  name: cordis:group\n  group: true\n  config:\n    - name: a\n    - id: b\n      name: b\n").unwrap();
        let g = &c.entries[0];
        assert_eq!(g.kind, EntryKind::Group);
        assert_eq!(g.children.len(), 2);
        assert_eq!(g.children[0].id, "g/a@0");
        assert_eq!(g.children[1].id, "g/b");
        assert_eq!(g.children[1].local_id, "b");
        assert_eq!(g.children[1].position.line, 6);
        assert_eq!(c.walk().len(), 3);
    }

    #[test]
    fn yaml11_booleans_get_a_hint() {
        let c = parse("- name: a\n  disabled: yes\n").unwrap();
        assert!(c.entries[0].problems[0].contains("write true or false"), "{:?}", c.entries[0].problems);
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn includes_mount_files_with_patches_and_scoped_ids() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "sub/base.yml",
            "- id: a\n  name: x\n  config: {k: 1}\n- id: g\n  name: cordis:group\n  group: true\n  config:\n    - id: deep\n      name: y\n",
        );
        let root = write(
            dir.path(),
            "cordis.yml",
            concat!(
                "- id: base\n  name: '@deepseek-ai/cordis-plugin-include'\n  config:\n    path: ./sub/base.yml\n    patches:\n",
                "      - insert:\n          - id: added\n            name: z\n",
                "      - id: added\n        config: {late: true}\n",
                "      - id: a\n        config: {whole: 2}\n",
                "      - id: deep\n        disabled: true\n",
                "      - id: nowhere\n        disabled: true\n",
            ),
        );
        let c = Composition::read(&root).unwrap();
        let inc = &c.entries[0];
        assert!(inc.problems.is_empty(), "{:?}", inc.problems);
        assert!(matches!(&inc.kind, EntryKind::Include { patches: 5, .. }));
        let ids: Vec<&str> = c.walk().iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["base", "base/a", "base/g", "base/g/deep", "base/added"]);
        let a = &inc.children[0];
        assert_eq!(a.config_json(&mut |_| Ok(None)).unwrap(), serde_json::json!({"whole": 2}));
        assert_eq!(a.locate_key("config"), format!("{}:12", root.display()));
        assert_eq!(inc.children[2].config_json(&mut |_| Ok(None)).unwrap(), serde_json::json!({"late": true}));
        assert_eq!(inc.children[1].children[0].disabled, Switch::Fixed(true));
        assert_eq!(a.base_dir, dir.path().join("sub"));
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("`nowhere`"), "{:?}", c.warnings);
        assert_eq!(c.sources.len(), 2);
    }

    #[test]
    fn include_cycles_and_errors_inside_included_files_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yml", "- id: to-b\n  name: cordis:include\n  config: {path: b.yml}\n");
        write(dir.path(), "b.yml", "- id: to-a\n  name: cordis:include\n  config: {path: a.yml}\n- id: bad\n  name: q\n  oops: 1\n");
        let root = write(
            dir.path(),
            "cordis.yml",
            "- id: top\n  name: cordis:include\n  config: {path: a.yml}\n- id: broken\n  name: cordis:include\n  config: {path: missing.yml}\n",
        );
        let c = Composition::read(&root).unwrap();
        let cycle = &c.walk().into_iter().find(|e| e.id == "top/to-b/to-a").unwrap().problems;
        assert!(cycle[0].contains("include cycle: ") && cycle[0].contains("a.yml → ") && cycle[0].ends_with("a.yml"), "{cycle:?}");
        let bad = c.walk().into_iter().find(|e| e.id == "top/to-b/bad").unwrap();
        assert!(
            bad.problems[0].starts_with(&format!("{}:6: entry top/to-b/bad: unknown entry key `oops`", dir.path().join("b.yml").display())),
            "{:?}",
            bad.problems
        );
        assert!(c.entries[1].problems[0].contains("does not exist"), "{:?}", c.entries[1].problems);
    }

    #[test]
    fn patch_layers_apply_in_order_and_empty_layers_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let root = write(dir.path(), "cordis.yml", "- id: a\n  name: x\n  config: {v: 0}\n");
        let one = write(dir.path(), "one.yml", "- id: a\n  config: {v: 1}\n- insert:\n    - id: b\n      name: y\n");
        let two = write(dir.path(), "two.yml", "- id: b\n  disabled: true\n- id: a\n  config: {v: 2}\n");
        let layers = vec![Layer { path: one, role: Role::Patch(1) }, Layer { path: two.clone(), role: Role::Patch(2) }];
        let c = Composition::compose(&root, &layers).unwrap();
        assert_eq!(c.entries[0].config_json(&mut |_| Ok(None)).unwrap(), serde_json::json!({"v": 2}));
        assert_eq!(c.entries[0].locate_key("config"), format!("{}:4", two.display()));
        assert_eq!(c.entries[1].id, "b");
        assert_eq!(c.entries[1].disabled, Switch::Fixed(true));
        let empty = write(dir.path(), "empty.yml", "# nothing\n");
        let err = Composition::compose(&root, &[Layer { path: empty, role: Role::Patch(1) }]).unwrap_err();
        assert!(matches!(err, CompositionError::EmptyPatch { .. }), "{err}");
        let off = write(dir.path(), "off.yml", "[]\n");
        assert!(Composition::compose(&root, &[Layer { path: off, role: Role::Patch(1) }]).is_ok());
    }

    #[test]
    fn bool_hint_names_quotes_and_str_tags_without_claiming_either() {
        // `"true"` and `!!str true` both reach the hint as the string "true".
        let hint = bool_hint("true");
        assert_eq!(hint, "quotes or a `!!str` tag make it a string: write true or false bare");
        assert!(!hint.contains("remove the quotes"));
        assert_eq!(bool_hint("yes"), YAML11_BOOL_HINT);
        let c = parse("- id: d\n  name: x\n  disabled: !!str true\n").unwrap();
        let problems = format!("{:?}", c.entries[0].problems);
        assert!(problems.contains("!!str") && !problems.contains("remove the quotes"), "{problems}");
    }

    #[test]
    fn an_injection_is_placed_at_its_item() {
        let c = parse("- id: a\n  name: x\n  inject:\n    - one\n    - two\n- id: b\n  name: y\n  inject:\n    one: {required: false}\n    two: {}\n- id: c\n  name: z\n  inject: [one, two]\n").unwrap();
        assert_eq!(c.entries[0].locate_injection("two"), "cordis.yml:5");
        assert_eq!(c.entries[1].locate_injection("two"), "cordis.yml:10");
        assert_eq!(c.entries[2].locate_injection("two"), "cordis.yml:13");
        // A service the entry does not inject (its plugin does): the row.
        assert_eq!(c.entries[0].locate_injection("three"), "cordis.yml:1");
    }

    #[test]
    fn a_template_switch_points_to_js() {
        let c = parse("- id: d\n  name: x\n  disabled: \"${{ env.CI }}\"\n").unwrap();
        let problems = format!("{:?}", c.entries[0].problems);
        assert!(problems.contains("cordis.yml:3") && problems.contains("template is not expanded") && problems.contains("!!js"), "{problems}");
        // `group` takes no expression, so no such advice there.
        let c = parse("- id: g\n  name: cordis:group\n  group: \"${{ env.CI }}\"\n").unwrap();
        let problems = format!("{:?}", c.entries[0].problems);
        assert!(problems.contains("`group` must be true or false") && !problems.contains("!!js"), "{problems}");
    }

    #[test]
    fn merge_keys_are_named_as_yaml_1_1() {
        let text = "- &base\n  id: a\n  name: x\n  config: &cfg {k: 1}\n- <<: *base\n  id: b\n- id: c\n  name: x\n  config:\n    <<: *cfg\n";
        let c = parse(text).unwrap();
        let b = c.entries.iter().find(|e| e.id == "b").unwrap();
        let joined = format!("{:?}", b.problems);
        assert!(joined.contains("YAML 1.2") && joined.contains("merge key"), "{joined}");
        let e = c.entries.iter().find(|e| e.id == "c").unwrap();
        let err = e.config_json(&mut |_| Ok(None)).unwrap_err();
        assert!(err.contains("YAML 1.2") && err.contains("merge key"), "{err}");
    }
}
