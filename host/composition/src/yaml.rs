//! Small facts about YAML values the parser and the patch rules share.

use serde_yaml::Value as Yaml;

/// Whether a YAML tag is `!!js` (`tag:yaml.org,2002:js`).
pub fn is_js_tag(tag: &serde_yaml::value::Tag) -> bool {
    let t = tag.to_string();
    t == "!!js" || t == "!js" || t.ends_with(":js") || t == "js"
}

/// A short description of a YAML value for messages.
pub(crate) fn kind(value: &Yaml) -> String {
    match value {
        Yaml::Null => "nothing (null)".into(),
        Yaml::Bool(b) => format!("the boolean {b}"),
        Yaml::Number(n) => format!("the number {n}"),
        Yaml::String(s) => format!("the string {s:?}"),
        Yaml::Sequence(_) => "a list".into(),
        Yaml::Mapping(_) => "a mapping".into(),
        Yaml::Tagged(t) if is_js_tag(&t.tag) => "a `!!js` expression".into(),
        Yaml::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}
