//! Who registered something: the value every registry records beside what
//! a plugin registered (an event type, a projection, a tool, a service), so
//! that a fiber's disposal removes exactly its own registrations and errors
//! can name the plugin and entry at fault.

/// Who registered something: the fiber, its plugin and its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The fiber's id (unique in the process).
    pub fiber: u64,
    /// The plugin's name.
    pub plugin: String,
    /// The entry's id.
    pub entry: String,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "plugin {} (entry {})", self.plugin, self.entry)
    }
}
