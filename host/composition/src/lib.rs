//! Compositions: a `cordis.yml` and its includes and patch layers read into
//! a tree of entries, each with its file and line.
//!
//! Nothing here loads a library or runs plugin code; the engine takes the
//! [`Composition`] this crate builds and applies its entries.
//!
//! - [`composition`]: the entry tree, entry keys, groups, includes, layers;
//! - [`source`]: one YAML file read with its positions;
//! - [`positions`]: the line and column of every node of a YAML document;
//! - [`patch`]: patch layers (`insert`, `replace`, `remove`, `config` merges);
//! - [`expr`]: `!!js` values, evaluated by `cordis-expr`;
//! - [`realm`]: where a service name resolves for an entry (`isolate`);
//! - [`render`]: the composed tree written back as YAML (`cordis config`);
//! - [`error`]: what can go wrong with a file as a whole.
//!
//! Dependency order inside the crate, leaves first: `error`, `yaml`,
//! `positions`, `realm` ← `source` ← `patch` ← `composition` ← `render`.

pub mod composition;
pub mod error;
pub mod expr;
pub mod patch;
pub mod positions;
pub mod realm;
pub mod render;
pub mod source;
pub mod yaml;

pub use composition::{Composition, Entry, EntryKind, Layer, Switch};
pub use error::{CompositionError, MAX_COMPOSITION_BYTES};
pub use realm::{RealmKey, Realms};
