//! Where each node of a composition sits in its file.
//!
//! `serde_yaml` reports positions only for its own parse errors, so errors
//! found later (an unknown entry key, a config value that breaks the plugin's
//! schema) look their line up here: a second, event-level pass over the same
//! text with `yaml-rust2`, run only when an error needs a position.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

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

/// Positions of the nodes of one YAML document, by path.
#[derive(Debug, Default)]
pub struct Positions {
    /// Where each node's value starts.
    values: HashMap<Vec<Step>, Position>,
    /// Where each mapping key starts (for paths ending in a key).
    keys: HashMap<Vec<Step>, Position>,
    /// Keys that appear twice in one mapping, in document order.
    duplicates: Vec<(Vec<Step>, Position)>,
    /// Paths of scalars tagged `!!js`, in document order.
    js: Vec<Vec<Step>>,
}

impl Positions {
    /// Indexes `text`. A text that does not parse gives an empty index (the
    /// caller already has serde_yaml's error for it).
    pub fn of(text: &str) -> Positions {
        let mut builder = Builder::default();
        let mut parser = Parser::new_from_str(text);
        if parser.load(&mut builder, false).is_err() {
            return Positions::default();
        }
        builder.positions
    }

    /// The position of the key at `path` (when the path ends in a key), else
    /// of its value; falls back to the nearest ancestor that exists.
    pub fn find(&self, path: &[Step]) -> Option<Position> {
        let mut path = path.to_vec();
        loop {
            if let Some(p) = self.keys.get(&path).or_else(|| self.values.get(&path)) {
                return Some(*p);
            }
            path.pop()?;
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

    /// The position of the value at `path`, falling back to ancestors.
    pub fn value(&self, path: &[Step]) -> Option<Position> {
        let mut path = path.to_vec();
        loop {
            if let Some(p) = self.values.get(&path) {
                return Some(*p);
            }
            path.pop()?;
        }
    }
}

enum Frame {
    Seq { next: usize },
    Map { expecting_key: bool, key: Option<String>, started: bool },
}

#[derive(Default)]
struct Builder {
    positions: Positions,
    path: Vec<Step>,
    stack: Vec<Frame>,
    depth_cap_hit: bool,
}

/// Paths deeper than this are not indexed (the composition parser refuses
/// them long before; this only bounds the index itself).
const MAX_DEPTH: usize = 256;

fn pos(mark: &Marker) -> Position {
    // yaml-rust2 markers: 1-based line, 0-based column.
    Position { line: mark.line().max(1), column: mark.col() + 1 }
}

impl Builder {
    /// Called when a node (scalar or collection start) begins; returns true
    /// when it was consumed as a mapping key.
    fn begin_node(&mut self, mark: &Marker, key_text: Option<&str>) -> bool {
        match self.stack.last_mut() {
            Some(Frame::Map { expecting_key, key, started }) if *expecting_key => {
                *expecting_key = false;
                let k = key_text.unwrap_or("").to_string();
                *key = Some(k.clone());
                if !*started {
                    // A block mapping starts where its first key does.
                    *started = true;
                    self.positions.values.insert(self.path.clone(), pos(mark));
                }
                let mut p = self.path.clone();
                p.push(Step::Key(k));
                match self.positions.keys.entry(p) {
                    std::collections::hash_map::Entry::Occupied(o) => {
                        self.positions.duplicates.push((o.key().clone(), pos(mark)));
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(pos(mark));
                    }
                }
                true
            }
            Some(Frame::Map { expecting_key, key, .. }) => {
                *expecting_key = true;
                let k = key.take().unwrap_or_default();
                self.path.push(Step::Key(k));
                false
            }
            Some(Frame::Seq { next }) => {
                self.path.push(Step::Index(*next));
                *next += 1;
                false
            }
            None => false,
        }
    }

    fn record_value(&mut self, mark: &Marker) {
        if self.path.len() <= MAX_DEPTH {
            self.positions.values.entry(self.path.clone()).or_insert(pos(mark));
        } else {
            self.depth_cap_hit = true;
        }
    }

    fn end_value(&mut self) {
        if !self.stack.is_empty() || !self.path.is_empty() {
            self.path.pop();
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::Scalar(text, _, _, tag) => {
                if self.begin_node(&mark, Some(&text)) {
                    return;
                }
                if tag.as_ref().is_some_and(|t| {
                    (t.suffix == "js" && matches!(t.handle.as_str(), "!!" | "tag:yaml.org,2002:")) || t.suffix == "tag:yaml.org,2002:js"
                }) && self.path.len() <= MAX_DEPTH
                {
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
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                let is_map = matches!(ev, Event::MappingStart(..));
                if self.begin_node(&mark, None) {
                    // A collection used as a mapping key: index nothing inside.
                    self.stack.push(if is_map {
                        Frame::Map { expecting_key: true, key: None, started: true }
                    } else {
                        Frame::Seq { next: 0 }
                    });
                    self.path.push(Step::Key(String::new()));
                    return;
                }
                self.record_value(&mark);
                self.stack.push(if is_map {
                    Frame::Map { expecting_key: true, key: None, started: false }
                } else {
                    Frame::Seq { next: 0 }
                });
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
        assert_eq!(
            p.find(&[Step::Index(0), Step::Key("config".into()), Step::Key("flag".into())]),
            Some(Position { line: 5, column: 5 })
        );
        assert_eq!(p.value(&[Step::Index(0), Step::Key("config".into())]), Some(Position { line: 5, column: 5 }));
        assert_eq!(p.find(&[Step::Index(1), Step::Key("name".into())]), Some(Position { line: 6, column: 3 }));
        // Missing keys fall back to the nearest ancestor.
        assert_eq!(
            p.find(&[Step::Index(0), Step::Key("config".into()), Step::Key("missing".into())]),
            Some(Position { line: 4, column: 3 })
        );
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

