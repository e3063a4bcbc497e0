//! Where each node of a composition sits in its file.
//!
//! `serde_yaml` reports positions only for its own parse errors, so errors
//! found later (an unknown entry key, a config value that breaks the plugin's
//! schema) look their line up here: a second, event-level pass over the same
//! text with `yaml-rust2`, run only when a position is needed.
//!
//! The index is a tree of nodes, each knowing its parent and the step that
//! leads to it, so building it costs time and memory linear in the number of
//! nodes whatever their depth (a path is never copied per node).

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// The index's map: keys are short (a node number and a key or index), so a
/// fast seeded hash (foldhash, which hashbrown uses by default) instead of
/// SipHash; building the index is about a fifth of reading a composition.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// One step of a path in the YAML document.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Step {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// A line and column in a file, both 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

/// One indexed node.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// Its parent (the root is its own parent).
    parent: u32,
    /// Where its value starts.
    value: Option<Position>,
    /// Where its key starts, for a mapping value.
    key: Option<Position>,
}

/// Positions of the nodes of one YAML document, by path.
#[derive(Debug, Default)]
pub struct Positions {
    nodes: Vec<Node>,
    /// (parent node, step) → child node.
    children: FastMap<(u32, Step), u32>,
    /// Keys that appear twice in one mapping, in document order.
    duplicates: Vec<(Vec<Step>, Position)>,
    /// Nodes of scalars tagged `!!js`, in document order.
    js: Vec<Vec<Step>>,
    /// Tags the composition dialect does not know, as written, with where
    /// their node starts, in document order.
    unknown_tags: Vec<(String, Position, usize)>,
}

/// The tags a composition may use: `!!js` (and its local spelling `!js`)
/// for expressions, and the tags of YAML's core schema.
pub const KNOWN_TAGS: &[&str] = &["!!js", "!js", "!!str", "!!int", "!!float", "!!bool", "!!null", "!!seq", "!!map"];

/// The tag as written (`!!js`, `!local`, `!<tag:example.com:x>`).
fn tag_text(tag: &yaml_rust2::parser::Tag) -> String {
    match tag.handle.as_str() {
        "tag:yaml.org,2002:" => format!("!!{}", tag.suffix),
        "" => format!("!<{}>", tag.suffix),
        handle => format!("{handle}{}", tag.suffix),
    }
}

/// Whether a tag is one the composition dialect knows.
fn known_tag(tag: &yaml_rust2::parser::Tag) -> bool {
    let text = tag_text(tag);
    let text = text.strip_prefix("!<tag:yaml.org,2002:").and_then(|t| t.strip_suffix('>')).map_or(text.clone(), |t| format!("!!{t}"));
    KNOWN_TAGS.contains(&text.as_str())
}

impl Positions {
    /// Indexes `text`. A text that does not parse gives an empty index (the
    /// caller already has serde_yaml's error for it).
    pub fn of(text: &str) -> Positions {
        let mut builder = Builder::default();
        builder.positions.nodes.push(Node { parent: 0, value: None, key: None });
        let mut parser = Parser::new_from_str(text);
        if parser.load(&mut builder, false).is_err() {
            return Positions::default();
        }
        builder.positions
    }

    /// The node at `path`, or the nearest ancestor that exists, with how
    /// many steps of `path` it covers.
    fn walk(&self, path: &[Step]) -> Option<(u32, usize)> {
        if self.nodes.is_empty() {
            return None;
        }
        let mut node = 0u32;
        for (i, step) in path.iter().enumerate() {
            // `get` needs an owned key; build it once per step.
            match self.children.get(&(node, step.clone())) {
                Some(&child) => node = child,
                None => return Some((node, i)),
            }
        }
        Some((node, path.len()))
    }

    /// The position of the key at `path` (when the path ends in a key), else
    /// of its value; falls back to the nearest ancestor that exists.
    pub fn find(&self, path: &[Step]) -> Option<Position> {
        self.climb(path, |n| n.key.or(n.value))
    }

    /// The first position `pick` gives, from the node at `path` (or its
    /// nearest existing ancestor) up to the root.
    fn climb(&self, path: &[Step], pick: impl Fn(&Node) -> Option<Position>) -> Option<Position> {
        let (mut node, _) = self.walk(path)?;
        loop {
            let n = self.nodes.get(node as usize)?;
            if let Some(p) = pick(n) {
                return Some(p);
            }
            if node == 0 {
                return None;
            }
            node = n.parent;
        }
    }

    /// The first key that appears twice in one mapping, with where its
    /// second occurrence starts.
    pub fn first_duplicate(&self) -> Option<&(Vec<Step>, Position)> {
        self.duplicates.first()
    }

    /// Paths of the scalars tagged `!!js` (`tag:yaml.org,2002:js`), in
    /// document order. `serde_yaml` drops tags in the `!!` namespace, so
    /// the composition reader finds its expressions here.
    pub fn js_paths(&self) -> &[Vec<Step>] {
        &self.js
    }

    /// The first tag outside [`KNOWN_TAGS`] (or `!!js` on a collection),
    /// as written, with where its node starts and the node's offset in
    /// characters (the tag itself is written at or before it).
    pub fn first_unknown_tag(&self) -> Option<&(String, Position, usize)> {
        self.unknown_tags.first()
    }

    /// The position of the value at `path`, falling back to ancestors.
    pub fn value(&self, path: &[Step]) -> Option<Position> {
        self.climb(path, |n| n.value)
    }
}

enum Frame {
    Seq {
        next: usize,
    },
    /// `key`: the last key read and the node it leads to, until its value
    /// begins.
    Map {
        expecting_key: bool,
        key: Option<(String, u32)>,
        started: bool,
    },
}

#[derive(Default)]
struct Builder {
    positions: Positions,
    /// The node of each open level: the current node is the last.
    stack_nodes: Vec<u32>,
    /// The steps to the current node (kept for `!!js` paths and duplicate
    /// keys, which are rare; a step is pushed and popped, never copied per
    /// node).
    path: Vec<Step>,
    stack: Vec<Frame>,
}

fn pos(mark: &Marker) -> Position {
    // yaml-rust2 markers: 1-based line, 0-based column.
    Position { line: mark.line().max(1), column: mark.col() + 1 }
}

impl Builder {
    fn current(&self) -> u32 {
        self.stack_nodes.last().copied().unwrap_or(0)
    }

    /// The child of the current node reached by `step`, created if new.
    fn child(&mut self, step: Step) -> u32 {
        let parent = self.current();
        let positions = &mut self.positions;
        let next = positions.nodes.len() as u32;
        let id = *positions.children.entry((parent, step)).or_insert(next);
        if id == next {
            positions.nodes.push(Node { parent, value: None, key: None });
        }
        id
    }

    /// Called when a node (scalar or collection start) begins; returns true
    /// when it was consumed as a mapping key.
    fn begin_node(&mut self, mark: &Marker, key_text: Option<&str>) -> bool {
        match self.stack.last_mut() {
            Some(Frame::Map { expecting_key, started, .. }) if *expecting_key => {
                *expecting_key = false;
                let k = key_text.unwrap_or("").to_string();
                let first = !*started;
                *started = true;
                if first {
                    // A block mapping starts where its first key does.
                    let cur = self.current() as usize;
                    if let Some(n) = self.positions.nodes.get_mut(cur) {
                        n.value = Some(pos(mark));
                    }
                }
                let id = self.child(Step::Key(k.clone()));
                let node = &mut self.positions.nodes[id as usize];
                if node.key.is_some() {
                    let mut p = self.path.clone();
                    p.push(Step::Key(k.clone()));
                    self.positions.duplicates.push((p, pos(mark)));
                } else {
                    node.key = Some(pos(mark));
                }
                if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
                    *key = Some((k, id));
                }
                true
            }
            Some(Frame::Map { expecting_key, key, .. }) => {
                *expecting_key = true;
                let (k, id) = match key.take() {
                    Some(known) => known,
                    None => (String::new(), self.child(Step::Key(String::new()))),
                };
                self.path.push(Step::Key(k));
                self.stack_nodes.push(id);
                false
            }
            Some(Frame::Seq { next }) => {
                let i = *next;
                *next += 1;
                let id = self.child(Step::Index(i));
                self.path.push(Step::Index(i));
                self.stack_nodes.push(id);
                false
            }
            None => false,
        }
    }

    fn record_value(&mut self, mark: &Marker) {
        let cur = self.current() as usize;
        if let Some(n) = self.positions.nodes.get_mut(cur) {
            n.value.get_or_insert(pos(mark));
        }
    }

    /// Notes `tag` when the dialect does not know it.
    fn check_tag(&mut self, tag: Option<&yaml_rust2::parser::Tag>, mark: &Marker, collection: bool) {
        let Some(tag) = tag else { return };
        // `!!js` tags a scalar; on a mapping or list serde_yaml would drop it
        // and the collection would load as plain data.
        let js_on_collection = collection && matches!(tag_text(tag).as_str(), "!!js" | "!js");
        if js_on_collection || !known_tag(tag) {
            self.positions.unknown_tags.push((tag_text(tag), pos(mark), mark.index()));
        }
    }

    fn end_value(&mut self) {
        if !self.stack.is_empty() || !self.path.is_empty() {
            self.path.pop();
            self.stack_nodes.pop();
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::Scalar(text, _, _, tag) => {
                self.check_tag(tag.as_ref(), &mark, false);
                if self.begin_node(&mark, Some(&text)) {
                    return;
                }
                if tag.as_ref().is_some_and(|t| {
                    (t.suffix == "js" && matches!(t.handle.as_str(), "!!" | "tag:yaml.org,2002:")) || t.suffix == "tag:yaml.org,2002:js"
                }) {
                    self.positions.js.push(self.path.clone());
                }
                self.record_value(&mark);
                if !self.stack.is_empty() {
                    self.end_value();
                }
            }
            Event::Alias(_) => {
                if self.begin_node(&mark, None) {
                    return;
                }
                self.record_value(&mark);
                if !self.stack.is_empty() {
                    self.end_value();
                }
            }
            Event::SequenceStart(_, ref tag) | Event::MappingStart(_, ref tag) => {
                self.check_tag(tag.as_ref(), &mark, true);
                let is_map = matches!(ev, Event::MappingStart(..));
                if self.begin_node(&mark, None) {
                    // A collection used as a mapping key: index nothing inside.
                    self.stack.push(if is_map { Frame::Map { expecting_key: true, key: None, started: true } } else { Frame::Seq { next: 0 } });
                    let id = self.child(Step::Key(String::new()));
                    self.path.push(Step::Key(String::new()));
                    self.stack_nodes.push(id);
                    return;
                }
                self.record_value(&mark);
                self.stack.push(if is_map { Frame::Map { expecting_key: true, key: None, started: false } } else { Frame::Seq { next: 0 } });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                self.stack.pop();
                if !self.stack.is_empty() {
                    self.end_value();
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_and_values() {
        let text = "# c\n- id: a\n  name: x\n  config:\n    flag: true\n- name: y\n";
        let p = Positions::of(text);
        assert_eq!(p.find(&[Step::Index(0)]), Some(Position { line: 2, column: 3 }));
        assert_eq!(p.find(&[Step::Index(0), Step::Key("name".into())]), Some(Position { line: 3, column: 3 }));
        assert_eq!(p.find(&[Step::Index(0), Step::Key("config".into()), Step::Key("flag".into())]), Some(Position { line: 5, column: 5 }));
        assert_eq!(p.value(&[Step::Index(0), Step::Key("config".into())]), Some(Position { line: 5, column: 5 }));
        assert_eq!(p.find(&[Step::Index(1), Step::Key("name".into())]), Some(Position { line: 6, column: 3 }));
        // Missing keys fall back to the nearest ancestor.
        assert_eq!(p.find(&[Step::Index(0), Step::Key("config".into()), Step::Key("missing".into())]), Some(Position { line: 4, column: 3 }));
    }
}

#[cfg(test)]
mod js_tests {
    use super::*;

    #[test]
    fn js_tags_are_indexed() {
        let text = "- id: a\n  disabled: !!js process.platform === 'win32'\n  config:\n    x: !!js \"a ?? b\"\n    y: !!js >-\n      1 +\n      2\n";
        let p = Positions::of(text);
        assert_eq!(
            p.js_paths(),
            [
                vec![Step::Index(0), Step::Key("disabled".into())],
                vec![Step::Index(0), Step::Key("config".into()), Step::Key("x".into())],
                vec![Step::Index(0), Step::Key("config".into()), Step::Key("y".into())],
            ]
        );
    }
}
