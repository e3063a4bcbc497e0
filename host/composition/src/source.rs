//! The files a composition is made of, and where each node came from.
//!
//! A composed tree mixes rows from several files: the root composition, the
//! files it includes, and patch layers. Every YAML node the loader keeps is a
//! [`Node`]: the value and its [`Origin`] (the [`Source`] file and the path
//! inside it), so an error about any key names the file and line the
//! operator wrote it on, whatever layer it came from.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_yaml::Value as Yaml;

use crate::error::{CompositionError, MAX_COMPOSITION_BYTES};
use crate::positions::{Position, Positions, Step};

/// What part a file plays in a composition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The composition the command was given.
    Root,
    /// A file mounted by a `cordis:include` entry (its full id).
    Include(String),
    /// The user's patch layer (`$XDG_CONFIG_HOME/cordis/cordis.patch.yml`).
    UserPatch,
    /// The n-th (1-based) `--patch` file.
    Patch(usize),
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Root => write!(f, "the composition"),
            Role::Include(id) => write!(f, "included by `{id}`"),
            Role::UserPatch => write!(f, "user patch layer"),
            Role::Patch(n) => write!(f, "--patch layer {n}"),
        }
    }
}

/// One YAML file of a composition, as read.
#[derive(Debug)]
pub struct Source {
    /// The file as messages name it (as given, or joined to the including
    /// file's folder).
    pub file: String,
    /// The file's path.
    pub path: PathBuf,
    /// The folder relative names in it resolve against.
    pub dir: PathBuf,
    /// The file's text (without a byte-order mark).
    pub text: String,
    /// What part it plays.
    pub role: Role,
    positions: OnceLock<Positions>,
}

impl Source {
    /// Reads the YAML file at `path` and parses it.
    ///
    /// # Errors
    /// [`CompositionError`] when the file cannot be read, is over
    /// [`MAX_COMPOSITION_BYTES`], is not UTF-8 or is not YAML.
    pub fn read(path: &Path, role: Role) -> Result<(Arc<Source>, Yaml), CompositionError> {
        use std::io::Read;
        let file = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|source| CompositionError::Read { file: file.clone(), source })?;
        if meta.len() > MAX_COMPOSITION_BYTES {
            return Err(CompositionError::TooLarge { file, size: meta.len(), limit: MAX_COMPOSITION_BYTES });
        }
        // Read at most one byte past the limit whatever the metadata says: a
        // device or a file still growing reports no size worth trusting.
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_COMPOSITION_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|source| CompositionError::Read { file: file.clone(), source })?;
        if bytes.len() as u64 > MAX_COMPOSITION_BYTES {
            return Err(CompositionError::TooLarge { file, size: bytes.len() as u64, limit: MAX_COMPOSITION_BYTES });
        }
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
                let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
                let column = valid.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
                return Err(CompositionError::Syntax { file, line, column, message: "the composition is not UTF-8 text (save it as UTF-8)".into() });
            }
        };
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        Source::parse(&file, path.to_path_buf(), dir, text, role)
    }

    /// Parses YAML text; `file` names it in messages and `dir` is the folder
    /// relative names resolve against.
    ///
    /// # Errors
    /// As [`Source::read`].
    pub fn parse(file: &str, path: PathBuf, dir: PathBuf, text: String, role: Role) -> Result<(Arc<Source>, Yaml), CompositionError> {
        let file = file.to_string();
        if text.len() as u64 > MAX_COMPOSITION_BYTES {
            return Err(CompositionError::TooLarge { file, size: text.len() as u64, limit: MAX_COMPOSITION_BYTES });
        }
        let text = match text.strip_prefix('\u{feff}') {
            Some(rest) => rest.to_string(),
            None => text,
        };
        if let Some(at) = text.find('\0') {
            let (line, column) = line_column(&text, at);
            return Err(CompositionError::Syntax { file, line, column, message: "the composition contains a NUL byte".into() });
        }
        if let Some((line, column)) = too_deep(&text) {
            return Err(CompositionError::Syntax {
                file,
                line,
                column,
                message: format!(
                    "collections are nested more than {MAX_FLOW_DEPTH} levels deep here (`{{` or `[`); write the value with less nesting"
                ),
            });
        }
        let doc: Yaml = match serde_yaml::from_str(&text) {
            Ok(doc) => doc,
            Err(e) => {
                if e.to_string().contains("duplicate entry") {
                    if let Some((path, p)) = Positions::of(&text).first_duplicate() {
                        let key = match path.last() {
                            Some(Step::Key(k)) => k.clone(),
                            _ => String::new(),
                        };
                        return Err(CompositionError::Syntax {
                            file,
                            line: p.line,
                            column: p.column,
                            message: format!("duplicate key `{key}`: each key may appear once in a mapping"),
                        });
                    }
                }
                return Err(crate::error::syntax_error(&file, &text, &e));
            }
        };
        let source = Arc::new(Source { file, path, dir, text, role, positions: OnceLock::new() });
        // A tag `serde_yaml` drops (`!!JS`) would turn an expression into
        // its own text: every tag the dialect does not know is refused.
        if source.text.contains('!') {
            let positions = source.positions.get_or_init(|| Positions::of(&source.text));
            if let Some((tag, at, offset)) = positions.first_unknown_tag() {
                // The parser marks the tagged node, which starts after the
                // tag (on a later line for a block collection): point at
                // the tag itself, its last occurrence up to the node.
                let text = &source.text;
                let node = text.char_indices().nth(*offset).map_or(text.len(), |(b, _)| b);
                let end = (node + tag.len()).min(text.len());
                let end = (end..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
                let (line, column) = match text[..end].rfind(tag.as_str()) {
                    Some(b) => line_column(text, b),
                    None => (at.line, at.column),
                };
                let message = if matches!(tag.as_str(), "!!js" | "!js") {
                    "`!!js` tags a scalar holding an expression, not a mapping or a list: write the expression as one string (`!!js \"({a: 1})\"`)"
                        .to_string()
                } else {
                    format!(
                        "unknown tag `{tag}`: a composition knows `!!js` (an expression) and YAML's core tags {}",
                        crate::positions::KNOWN_TAGS.iter().skip(2).map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
                    )
                };
                return Err(CompositionError::Syntax { file: source.file.clone(), line, column, message });
            }
        }
        let mut doc = doc;
        // `serde_yaml` reads `!!js x` as the plain string `x`: mark the
        // expressions again from the event-level index (built only when the
        // text can hold one).
        if source.text.contains("js") {
            let positions = source.positions.get_or_init(|| Positions::of(&source.text));
            for path in positions.js_paths() {
                if let Some(node) = node_at(&mut doc, path) {
                    let value = std::mem::replace(node, Yaml::Null);
                    *node = Yaml::Tagged(Box::new(serde_yaml::value::TaggedValue { tag: serde_yaml::value::Tag::new("js"), value }));
                }
            }
        }
        Ok((source, doc))
    }

    /// Where the node at `path` starts (its nearest existing ancestor when
    /// it does not exist; line 1 when nothing does).
    pub fn position(&self, path: &[Step]) -> Position {
        self.positions.get_or_init(|| Positions::of(&self.text)).find(path).unwrap_or(Position { line: 1, column: 1 })
    }

    /// `file:line` for the node at `path`.
    pub fn locate(&self, path: &[Step]) -> String {
        format!("{}:{}", self.file, self.position(path).line)
    }
}

fn node_at<'a>(doc: &'a mut Yaml, path: &[Step]) -> Option<&'a mut Yaml> {
    let mut node = doc;
    for step in path {
        node = match (node, step) {
            (Yaml::Sequence(items), Step::Index(i)) => items.get_mut(*i)?,
            (Yaml::Mapping(map), Step::Key(k)) => map.get_mut(k.as_str())?,
            (Yaml::Tagged(t), _) => return node_at(&mut t.value, std::slice::from_ref(step)),
            _ => return None,
        };
    }
    Some(node)
}

/// How deep flow collections (`{...}`, `[...]`) may nest. The YAML parser
/// stops at the same depth, but only after work that grows with the square
/// of the input on deeply nested flow text; this bound is checked first, in
/// one pass.
pub const MAX_FLOW_DEPTH: usize = 64;

/// The line and column of the first flow opener nested deeper than
/// [`MAX_FLOW_DEPTH`], found in one linear pass that skips comments and
/// quoted scalars.
fn too_deep(text: &str) -> Option<(usize, usize)> {
    let (mut depth, mut line, mut column) = (0usize, 1usize, 0usize);
    let mut quote: Option<char> = None;
    let (mut escaped, mut comment) = (false, false);
    let mut prev = '\n';
    for c in text.chars() {
        column += 1;
        if c == '\n' {
            line += 1;
            column = 0;
            comment = false;
            prev = c;
            continue;
        }
        if comment {
            continue;
        }
        match quote {
            Some('"') => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    quote = None;
                }
            }
            Some(_) => {
                if c == '\'' {
                    quote = None;
                }
            }
            None => {
                let at_boundary = prev.is_whitespace() || matches!(prev, '[' | '{' | ',' | ':');
                match c {
                    '#' if prev.is_whitespace() => comment = true,
                    '"' | '\'' if at_boundary => quote = Some(c),
                    '{' | '[' => {
                        depth += 1;
                        if depth > MAX_FLOW_DEPTH {
                            return Some((line, column));
                        }
                    }
                    '}' | ']' => depth = depth.saturating_sub(1),
                    _ => {}
                }
            }
        }
        prev = c;
    }
    None
}

/// The 1-based line and column (in characters) of byte offset `at` of
/// `text`, which must fall on a character boundary.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or_default().chars().count() + 1;
    (line, column)
}

/// Where a node sits: a file and the path inside it.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The file.
    pub source: Arc<Source>,
    /// The path of the node in the file's document.
    pub path: Vec<Step>,
}

impl Origin {
    /// The origin of the document root of `source`.
    pub fn root(source: &Arc<Source>) -> Origin {
        Origin { source: source.clone(), path: Vec::new() }
    }

    /// The origin of a child node.
    pub fn child(&self, step: Step) -> Origin {
        let mut path = self.path.clone();
        path.push(step);
        Origin { source: self.source.clone(), path }
    }

    /// The origin of the mapping key `key` below this node.
    pub fn key(&self, key: &str) -> Origin {
        self.child(Step::Key(key.to_string()))
    }

    /// The origin of index `i` below this node.
    pub fn index(&self, i: usize) -> Origin {
        self.child(Step::Index(i))
    }

    /// Where the node starts.
    pub fn position(&self) -> Position {
        self.source.position(&self.path)
    }

    /// `file:line` of the node.
    pub fn locate(&self) -> String {
        self.source.locate(&self.path)
    }
}

/// A YAML value with where it came from.
#[derive(Debug, Clone)]
pub struct Node {
    /// The value.
    pub value: Yaml,
    /// Where it was written.
    pub origin: Origin,
}

impl Node {
    /// The mapping value under `key`, if the node is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<Node> {
        let Yaml::Mapping(map) = &self.value else { return None };
        map.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| Node { value: v.clone(), origin: self.origin.key(key) })
    }

    /// The items of a sequence node, each with its origin, taking the
    /// values out of the node; `None` when the node is not a sequence.
    pub fn into_items(self) -> Option<Vec<Node>> {
        let Yaml::Sequence(items) = self.value else { return None };
        let origin = self.origin;
        Some(items.into_iter().enumerate().map(|(i, v)| Node { value: v, origin: origin.index(i) }).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &str) -> (usize, usize, String) {
        match Source::parse("c.yml", PathBuf::from("c.yml"), PathBuf::from("."), text.to_string(), Role::Root) {
            Err(CompositionError::Syntax { line, column, message, .. }) => (line, column, message),
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn deep_block_nesting_names_the_limit() {
        let mut text = String::new();
        for depth in 0..200 {
            text.push_str(&format!("{}k{depth}:\n", "  ".repeat(depth)));
        }
        let (line, _, message) = refusal(&text);
        assert!(line > 100, "{line}");
        assert_eq!(message, "collections are nested more than 128 levels deep here; write the value with less nesting");
    }

    #[test]
    fn an_integer_past_64_bits_is_named_with_its_path() {
        let (line, column, message) = refusal("- name: x\n  config:\n    n: 99999999999999999999999999\n");
        assert_eq!((line, column), (3, 8));
        assert_eq!(
            message,
            ".[0].config.n: the integer 99999999999999999999999999 is outside the 64-bit range a composition can hold; quote it to keep it as text"
        );
    }

    #[test]
    fn a_nul_byte_is_placed_at_its_column() {
        let (line, column, message) = refusal("- name: x\n  id: a\0b\n");
        assert_eq!((line, column, message.as_str()), (2, 8, "the composition contains a NUL byte"));
    }

    #[test]
    fn deep_flow_nesting_is_found_in_one_pass() {
        let deep = format!("- name: x\n  config: {}1{}\n", "{a: ".repeat(200), "}".repeat(200));
        assert_eq!(too_deep(&deep), Some((2, 10 + 4 * MAX_FLOW_DEPTH + 1)));
        let fine = format!("- name: x\n  config: {}1{}\n", "[".repeat(MAX_FLOW_DEPTH), "]".repeat(MAX_FLOW_DEPTH));
        assert_eq!(too_deep(&fine), None);
        // Braces in comments and quoted text do not count.
        let quoted = format!("# {}\n- name: \"{}\"\n  x: '{}'\n", "{".repeat(300), "[".repeat(300), "{".repeat(300));
        assert_eq!(too_deep(&quoted), None);
    }
}
