//! Realms: where a service name resolves for one entry.
//!
//! An entry whose `isolate` lists a name with `true` gives itself and its
//! descendants a private realm for that name; a label joins the realm of
//! every entry using the same label; a name not listed resolves in the realm
//! of the parent, up to the root realm. The engine keeps services by realm;
//! the parser computes each entry's realms.

use std::fmt;

/// The realm a service name resolves in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RealmKey {
    /// The shared root realm.
    Root,
    /// A realm private to the entry with this id and its descendants.
    Private(String),
    /// The realm every entry with this label shares.
    Label(String),
}

impl fmt::Display for RealmKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RealmKey::Root => write!(f, "the root realm"),
            RealmKey::Private(id) => write!(f, "the realm private to `{id}`"),
            RealmKey::Label(l) => write!(f, "realm `{l}`"),
        }
    }
}

/// Which realm each isolated service name resolves in for one entry: the
/// `isolate` lists of the entry and its ancestors, innermost last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Realms {
    isolated: Vec<(String, RealmKey)>,
}

impl Realms {
    /// The realms of a child whose own `isolate` lists `own` (name, realm):
    /// its entries override the inherited ones.
    pub fn child(&self, own: impl IntoIterator<Item = (String, RealmKey)>) -> Realms {
        let mut isolated = self.isolated.clone();
        isolated.extend(own);
        Realms { isolated }
    }

    /// The realm `name` resolves in.
    pub fn of(&self, name: &str) -> RealmKey {
        self.isolated.iter().rev().find(|(n, _)| n == name).map(|(_, r)| r.clone()).unwrap_or(RealmKey::Root)
    }
}
