//! Bytes as `cordis.yml` text through `Composition::parse`, then what the
//! loader does next with a parsed composition: walk every entry, look up
//! the line of the entry and of its config (the positions pass reads the
//! text again with another YAML parser), convert the config to JSON, and
//! write the composed tree back (`cordis config`). No input may panic or overflow
//! the stack; every error must name the file.

#![no_main]

use std::path::PathBuf;

use cordis_composition::positions::Step;
use cordis_engine::loader::Composition;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Composition::parse("cordis.yml", PathBuf::from("."), text.to_string()) {
        Err(e) => {
            let message = e.to_string();
            assert!(message.starts_with("cordis.yml"), "an error that does not name the file: {message}");
        }
        Ok(composition) => {
            for entry in composition.walk() {
                let _ = entry.locate();
                let _ = entry.locate_key("config");
                let _ = entry.locate_config(&[Step::Key("x".into()), Step::Index(0)]);
                // Expressions are not evaluated here: the evaluator is
                // fuzzed through its own crate's tests.
                let _ = entry.config_json(&mut |_| Ok(None));
                for problem in &entry.problems {
                    assert!(!problem.is_empty());
                }
            }
            let _ = cordis_composition::render::composed_yaml(&composition);
        }
    }
});
