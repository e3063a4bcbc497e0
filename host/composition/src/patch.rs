//! Entry lists before they are read as entries, and the patches that change
//! them.
//!
//! Patch semantics follow the include plugin of the cordis loader the
//! TypeScript harness ships (`applyEntryPatches` in
//! `@deepseek-ai/cordis-plugin-include` 1.0.x; the user's view is in
//! docs/guide/composition.md):
//!
//! - `{insert: [rows]}` appends the rows to the list; `{id, insert}` appends
//!   them to the list of the group with that id (it must be a group);
//! - any other patch needs an `id` and replaces, key by key, the keys it
//!   gives on the entry with that id anywhere in the tree, nested groups
//!   included (`config` is replaced whole, never merged);
//! - a `name` in a patch must equal the target's name, else the patch is
//!   skipped;
//! - patches apply in order, and rows inserted by an earlier patch can be
//!   targeted by a later one;
//! - a patch that cannot apply is a warning, never an error, with one
//!   exception: a row inserted with an id the tree already holds (from the
//!   list itself or an earlier insert, in any layer) refuses the whole
//!   composition, since patches find rows by id anywhere in the tree and
//!   two layers would each believe they own the row.
//!
//! The ids patches look up are the ids as written in the list (not the
//! scoped ids the loader reports). Where two rows share an id (an error the
//! loader reports on the second), patches change the first, the one that
//! loads; the reference indexes the last.

use std::collections::HashMap;

use serde_yaml::Value as Yaml;

use crate::source::{Node, Origin};
use crate::yaml::kind;

/// One row of an entry list, as written (before it is read as an entry).
#[derive(Debug, Clone)]
pub struct RawEntry {
    /// Where the row was written.
    pub origin: Origin,
    /// The row when it is not a mapping (reported when it is read).
    pub not_a_mapping: Option<Yaml>,
    /// The row's keys in order, each value with its own origin (a key a
    /// patch replaced points into the patch's file).
    pub keys: Vec<(Yaml, Node)>,
    /// The nested rows of a group (`group: true` with a list `config`).
    pub children: Option<Vec<RawEntry>>,
}

impl RawEntry {
    /// Reads one row, taking its values out of `node`.
    pub fn from_node(node: Node) -> RawEntry {
        let Node { value, origin } = node;
        match value {
            Yaml::Mapping(map) => {
                let keys = map
                    .into_iter()
                    .map(|(k, v)| {
                        let at = match k.as_str() {
                            Some(key) => origin.key(key),
                            None => origin.clone(),
                        };
                        (k, Node { value: v, origin: at })
                    })
                    .collect();
                let mut raw = RawEntry { origin, not_a_mapping: None, keys, children: None };
                raw.derive_children();
                raw
            }
            other => RawEntry { origin, not_a_mapping: Some(other), keys: Vec::new(), children: None },
        }
    }

    /// Reads every row of a list node, taking the values out of it; `None`
    /// when the node is not a list.
    pub fn list(node: Node) -> Option<Vec<RawEntry>> {
        Some(node.into_items()?.into_iter().map(RawEntry::from_node).collect())
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.keys.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
    }

    /// Sets `key` (in place when present, else at the end).
    pub fn set(&mut self, key: &str, node: Node) {
        match self.keys.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
            Some(slot) => slot.1 = node,
            None => self.keys.push((Yaml::String(key.to_string()), node)),
        }
    }

    /// The row's `id` as written (a string or a number).
    pub fn id(&self) -> Option<String> {
        match &self.get("id")?.value {
            Yaml::String(s) if !s.trim().is_empty() => Some(s.clone()),
            Yaml::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// The row's `name`, if it is a string.
    pub fn name(&self) -> Option<&str> {
        self.get("name")?.value.as_str()
    }

    /// Whether the row says `group: true`.
    pub fn is_group(&self) -> bool {
        matches!(self.get("group").map(|n| &n.value), Some(Yaml::Bool(true)))
    }

    /// Reads the nested rows again from `group` and `config` (after a patch
    /// replaced either).
    fn derive_children(&mut self) {
        self.children = if self.is_group() { self.get("config").cloned().and_then(RawEntry::list) } else { None };
    }
}

/// Where a row sits in a tree: indices from the top list down through
/// groups' children.
type RowPath = Vec<usize>;

fn row_mut<'a>(list: &'a mut [RawEntry], path: &[usize]) -> Option<&'a mut RawEntry> {
    let (first, rest) = path.split_first()?;
    let row = list.get_mut(*first)?;
    if rest.is_empty() {
        return Some(row);
    }
    row_mut(row.children.as_mut()?, rest)
}

fn index(rows: &[RawEntry], base: &[usize], map: &mut HashMap<String, RowPath>) {
    for (i, row) in rows.iter().enumerate() {
        let mut path = base.to_vec();
        path.push(i);
        // The first row with an id is the one patches change (a later row
        // with the same id fails as a duplicate when the list is read).
        if let Some(id) = row.id() {
            map.entry(id).or_insert_with(|| path.clone());
        }
        if let Some(children) = &row.children {
            index(children, &path, map);
        }
    }
}

/// Where a row with `id` was written, as `file:line (layer)`.
fn written_at(list: &mut [RawEntry], path: &[usize]) -> String {
    match row_mut(list, path) {
        Some(row) => {
            let origin = row.get("id").map_or(&row.origin, |n| &n.origin);
            match origin.source.role {
                crate::source::Role::UserPatch | crate::source::Role::Patch(_) => format!("{} ({})", origin.locate(), origin.source.role),
                _ => origin.locate(),
            }
        }
        None => "an earlier row".into(),
    }
}

/// Applies `patches` (each a patch mapping with its origin) to `list`, in
/// order. `scope` names the list in warnings (`the composition`, `the file
/// base.yml included by `base``). Returns one warning per patch that could
/// not apply, each naming the patch's file and line.
///
/// # Errors
/// A row inserted with an id the tree already holds: the message names the
/// id, where each row was written (file, line and layer) and the order the
/// layers apply in.
pub fn apply_patches(list: &mut Vec<RawEntry>, patches: &[Node], scope: &str) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    let mut map: HashMap<String, RowPath> = HashMap::new();
    index(list, &[], &mut map);
    for patch in patches {
        let at = patch.origin.locate();
        let Yaml::Mapping(fields) = &patch.value else {
            warnings.push(format!("{at}: a patch must be a mapping (`- id: ...`), found {}; it is skipped", kind(&patch.value)));
            continue;
        };
        let raw = RawEntry::from_node(patch.clone());
        let id = raw.id();
        if let Some(insert) = patch.get("insert") {
            let found = kind(&insert.value);
            let Some(rows) = RawEntry::list(insert) else {
                warnings.push(format!("{at}: `insert` must be a list of entries, found {found}; the patch is skipped"));
                continue;
            };
            let mut inserted = HashMap::new();
            index(&rows, &[], &mut inserted);
            let mut clashes: Vec<(&String, &RowPath)> = inserted.iter().filter(|(row_id, _)| map.contains_key(*row_id)).collect();
            clashes.sort();
            if let Some((row_id, rel)) = clashes.first() {
                let first = map.get(*row_id).map_or_else(|| "an earlier row".into(), |path| written_at(list, path));
                let mut rows = rows.clone();
                let second = written_at(&mut rows, rel);
                let order = if scope == "the composition" {
                    "patch layers apply in order (the composition, the user patch layer, then each --patch file as given) and find rows by id anywhere in the composition"
                        .to_string()
                } else {
                    format!("an include's patches apply in order and find rows by id anywhere in {scope}")
                };
                return Err(format!(
                    "entry id `{row_id}` is written twice: first at {first}, inserted again at {second}; {order}, \
                     so an inserted row needs an id of its own (or patch the existing row instead of inserting it)"
                ));
            }
            let base = match &id {
                Some(id) => {
                    let Some(path) = map.get(id).cloned() else {
                        warnings.push(format!("{at}: the patch inserts into entry `{id}`, which is not in {scope}; it is skipped"));
                        continue;
                    };
                    let Some(target) = row_mut(list, &path) else { continue };
                    if !target.is_group() {
                        warnings.push(format!("{at}: the patch inserts into entry `{id}`, which is not a group; it is skipped"));
                        continue;
                    }
                    let children = target.children.get_or_insert_with(Vec::new);
                    let start = children.len();
                    children.extend(rows.iter().cloned());
                    let mut base = path.clone();
                    base.push(start);
                    base
                }
                None => {
                    let start = list.len();
                    list.extend(rows.iter().cloned());
                    vec![start]
                }
            };
            // Index the new rows so later patches can target them.
            let (last, parent) = base.split_last().map(|(l, p)| (*l, p.to_vec())).unwrap_or((0, Vec::new()));
            for (row_id, mut rel) in inserted {
                rel[0] += last;
                let mut full = parent.clone();
                full.extend(rel);
                map.insert(row_id, full);
            }
            continue;
        }
        let Some(id) = id else {
            warnings.push(format!("{at}: a patch without `insert` needs the `id` of the entry it changes; it is skipped"));
            continue;
        };
        let Some(path) = map.get(&id).cloned() else {
            warnings.push(format!("{at}: the patch targets entry `{id}`, which is not in {scope}; it is skipped"));
            continue;
        };
        let Some(target) = row_mut(list, &path) else {
            warnings.push(format!("{at}: the patch targets entry `{id}`, which an earlier patch replaced; it is skipped"));
            continue;
        };
        if let Some(name) = raw.name() {
            if target.name() != Some(name) {
                let found = target.name().unwrap_or("(no name)").to_string();
                warnings.push(format!("{at}: the patch names `{name}` but entry `{id}` is `{found}`; it is skipped"));
                continue;
            }
        }
        let mut reshaped = false;
        for (key, value) in fields {
            let Some(key) = key.as_str() else { continue };
            if matches!(key, "id" | "name") {
                continue;
            }
            target.set(key, Node { value: value.clone(), origin: patch.origin.key(key) });
            reshaped |= matches!(key, "config" | "group");
        }
        if reshaped {
            target.derive_children();
            // Rows of the replaced list are gone: forget where they were.
            map.retain(|_, p| !(p.len() > path.len() && p.starts_with(&path)));
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Role, Source};
    use std::path::PathBuf;

    fn nodes(file: &str, text: &str) -> Vec<Node> {
        let (source, doc) = Source::parse(file, PathBuf::from(file), PathBuf::from("."), text.to_string(), Role::Root).unwrap();
        Node { value: doc, origin: Origin::root(&source) }.into_items().unwrap()
    }

    fn ids(rows: &[RawEntry]) -> Vec<String> {
        rows.iter().map(|r| r.id().unwrap_or_default()).collect()
    }

    fn base() -> Vec<RawEntry> {
        nodes(
            "base.yml",
            "- id: a\n  name: x\n  config: {k: 1, j: 2}\n- id: g\n  name: cordis:group\n  group: true\n  config:\n    - id: inner\n      name: y\n",
        )
        .into_iter()
        .map(RawEntry::from_node)
        .collect()
    }

    #[test]
    fn override_replaces_whole_keys_anywhere_in_the_tree() {
        let mut list = base();
        let warnings =
            apply_patches(&mut list, &nodes("p.yml", "- id: a\n  config: {k: 3}\n- id: inner\n  disabled: true\n"), "the composition").unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let config = &list[0].get("config").unwrap().value;
        assert_eq!(serde_json::to_value(config).unwrap(), serde_json::json!({"k": 3}));
        assert_eq!(list[0].get("config").unwrap().origin.locate(), "p.yml:2");
        let inner = &list[1].children.as_ref().unwrap()[0];
        assert_eq!(inner.get("disabled").unwrap().value, Yaml::Bool(true));
    }

    #[test]
    fn inserts_append_and_can_be_patched_later() {
        let mut list = base();
        let patches = nodes(
            "p.yml",
            "- insert:\n    - id: new\n      name: z\n- id: g\n  insert:\n    - id: deep\n      name: w\n- id: new\n  config: {v: 1}\n- id: deep\n  disabled: true\n",
        );
        let warnings = apply_patches(&mut list, &patches, "the composition").unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(ids(&list), ["a", "g", "new"]);
        assert!(list[2].get("config").is_some());
        let children = list[1].children.as_ref().unwrap();
        assert_eq!(ids(children), ["inner", "deep"]);
        assert_eq!(children[1].get("disabled").unwrap().value, Yaml::Bool(true));
    }

    #[test]
    fn unusable_patches_are_warnings_with_their_line() {
        let mut list = base();
        let patches = nodes(
            "p.yml",
            "- id: missing\n  disabled: true\n- id: a\n  name: other\n  disabled: true\n- id: a\n  insert: [{id: q, name: q}]\n- disabled: true\n- 3\n",
        );
        let warnings = apply_patches(&mut list, &patches, "the composition").unwrap();
        assert_eq!(warnings.len(), 5, "{warnings:?}");
        assert!(warnings[0].starts_with("p.yml:1: the patch targets entry `missing`"), "{}", warnings[0]);
        assert!(warnings[1].starts_with("p.yml:3: the patch names `other` but entry `a` is `x`"), "{}", warnings[1]);
        assert!(warnings[2].contains("which is not a group"), "{}", warnings[2]);
        assert!(warnings[3].contains("needs the `id`"), "{}", warnings[3]);
        assert!(warnings[4].contains("must be a mapping"), "{}", warnings[4]);
        assert!(list[0].get("disabled").is_none());
    }

    #[test]
    fn a_duplicate_id_patches_the_first_row() {
        let mut list: Vec<RawEntry> =
            nodes("b.yml", "- id: x\n  name: a\n- id: g\n  name: cordis:group\n  group: true\n  config:\n    - id: x\n      name: b\n")
                .into_iter()
                .map(RawEntry::from_node)
                .collect();
        let warnings = apply_patches(&mut list, &nodes("p.yml", "- id: x\n  disabled: true\n"), "the composition").unwrap();
        assert!(warnings.is_empty());
        assert!(list[0].get("disabled").is_some());
        assert!(list[1].children.as_ref().unwrap()[0].get("disabled").is_none());
    }

    #[test]
    fn replacing_a_group_config_forgets_its_old_rows() {
        let mut list = base();
        let patches = nodes("p.yml", "- id: g\n  config:\n    - id: fresh\n      name: f\n- id: inner\n  disabled: true\n");
        let warnings = apply_patches(&mut list, &patches, "the composition").unwrap();
        assert_eq!(ids(list[1].children.as_ref().unwrap()), ["fresh"]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }
}
