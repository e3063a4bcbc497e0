//! What can go wrong with a composition file as a whole, and the size limit.
//!
//! A leaf module: the parser, the source reader and the patch rules all
//! report through [`CompositionError`].

/// The largest composition (or included or patch file) accepted, in bytes.
pub const MAX_COMPOSITION_BYTES: u64 = 4 * 1024 * 1024;

/// The composition as a whole could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CompositionError {
    /// The file could not be read.
    #[error("{file}: cannot read the composition: {source}")]
    Read {
        /// The file.
        file: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A patch layer file could not be read.
    #[error("{file}: cannot read the patch layer: {source}")]
    ReadLayer {
        /// The file.
        file: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_COMPOSITION_BYTES`].
    #[error("{file}: the composition is {size} bytes or more, over the limit of {limit} bytes")]
    TooLarge {
        /// The file.
        file: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Not UTF-8.
    #[error("{file}: the composition is not UTF-8 text: {detail}")]
    NotText {
        /// The file.
        file: String,
        /// What is wrong.
        detail: String,
    },
    /// YAML syntax or structure error.
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The layers together do not make one composition (two rows inserted
    /// with one id); `message` names the files, lines and layers.
    #[error("{message}")]
    Conflict {
        /// What clashes, and where.
        message: String,
    },
    /// Empty or only comments.
    #[error("{file}: the composition is empty; expected a list of entries such as `- name: tool-todo`")]
    Empty {
        /// The file.
        file: String,
    },
    /// A patch layer file is empty or holds only comments.
    #[error("{file}: the patch file is empty; write `[]` to disable this layer, or list patches (`- id: ...`)")]
    EmptyPatch {
        /// The file.
        file: String,
    },
    /// The top level is not a list.
    #[error("{file}:{line}:{column}: expected {expected}, found {found}")]
    NotAList {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the file should hold.
        expected: String,
        /// What was found.
        found: String,
    },
}

/// A YAML syntax error in `file` (whose text is `text`) as a [`CompositionError::Syntax`], led by
/// its position, with hints for alias bombs, second documents and tabs.
/// How deep collections may nest in a composition (the YAML reader's
/// recursion limit, block and flow alike).
pub const MAX_NESTING: usize = 128;

/// The integer serde_yaml refused as wider than 64 bits (its message reads
/// ``invalid type: integer `N` as u128, expected ...``).
fn out_of_range_integer(message: &str) -> Option<&str> {
    if !(message.contains("` as u128") || message.contains("` as i128")) {
        return None;
    }
    let start = message.find("integer `")? + "integer `".len();
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

pub(crate) fn syntax_error(file: &str, text: &str, e: &serde_yaml::Error) -> CompositionError {
    let (line, column) = match e.location() {
        Some(l) => (l.line(), l.column()),
        None => (1, 1),
    };
    let mut message = e.to_string();
    // serde_yaml appends " at line X column Y"; we lead with the position.
    if let Some(cut) = message.find(" at line ") {
        message.truncate(cut);
    }
    if message.contains("repetition limit exceeded") {
        message = "too many alias expansions (is this a YAML alias bomb?); write the values out instead".into();
    } else if message.contains("recursion limit exceeded") {
        message = format!("collections are nested more than {MAX_NESTING} levels deep here; write the value with less nesting");
    } else if let Some(number) = out_of_range_integer(&message) {
        // serde_yaml's text names the path (`.[0].config.n: `) first.
        let path = message.split_once(": ").map(|(p, _)| p).filter(|p| p.starts_with('.')).map(|p| format!("{p}: ")).unwrap_or_default();
        message = format!("{path}the integer {number} is outside the 64-bit range a composition can hold; quote it to keep it as text");
    }
    let (line, column) = if message.contains("more than one document") {
        let second = text.lines().enumerate().filter(|(_, l)| l.starts_with("---")).map(|(i, _)| i + 1).find(|&l| l > 1 || !text.starts_with("---"));
        match second {
            Some(l) if text.lines().take(l - 1).any(|x| !x.trim().is_empty() && !x.trim_start().starts_with('#')) => (l, 1),
            _ => (line, column),
        }
    } else {
        (line, column)
    };
    let line_text = text.lines().nth(line.saturating_sub(1)).unwrap_or("");
    if line_text.contains('\t') {
        message.push_str(" (the line contains a tab: YAML indents with spaces only)");
    }
    CompositionError::Syntax { file: file.to_string(), line, column, message }
}
