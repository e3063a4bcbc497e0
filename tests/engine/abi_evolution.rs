//! The ABI's versioning rules, checked with real compiled libraries
//! (docs/plugins.md, "The ABI and its versioning rules"):
//!
//! - a field appended to a prefix type (here `PluginLibrary`): the test
//!   builds a copy of `cordis-abi` with one more field, a minimal host and a
//!   plugin against it; today's `cordis` loads the newer plugin, the newer
//!   host refuses today's tool-todo (abi_stable lets a library know more
//!   fields than the host, never fewer);
//! - a library built against another minor version of `cordis-abi` (the
//!   `old-version` fixture) is refused naming both versions;
//! - a field added to a plain struct (`PluginDecl`, in the `old-abi`
//!   fixture) is refused with the incompatibility message, before any of the
//!   library's code runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use cordis_engine::loader::library;
use cordis_tests::{build_outside, cordis_exe, library as lib_path, repo_root, target_dir, text, Scratch};

/// Builds, once per target folder, a copy of `abi/` with one field appended
/// to `PluginLibrary` (`priority`, read as absent when missing), a minimal
/// host against that copy (`future-host`: loads a library and prints what
/// it reads), and a plugin against that copy (`future-plugin`). Returns the
/// host binary and the plugin library.
fn future_build() -> (PathBuf, PathBuf) {
    let root = target_dir().join("abi-evolution");
    let abi = root.join("abi");
    std::fs::create_dir_all(abi.join("src")).unwrap();
    let sources = std::fs::read_dir(repo_root().join("crates/abi/src")).unwrap();
    for file in sources.map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|f| f.ends_with(".rs")) {
        let file = file.as_str();
        let mut text = std::fs::read_to_string(repo_root().join("crates/abi/src").join(file)).unwrap();
        if file == "ffi.rs" {
            let marker = "    pub provides: extern \"C\" fn() -> RVec<ProvidedService>,\n";
            assert!(text.contains(marker), "ffi.rs changed: update this test");
            text = text.replace(marker, &format!("{marker}    /// Appended by the evolution test.\n    #[sabi(missing_field(option))]\n    pub priority: extern \"C\" fn() -> u32,\n"));
        }
        if file == "sdk.rs" {
            let marker = "provides: collect_provides }";
            assert!(text.contains(marker), "sdk.rs changed: update this test");
            text = text.replace(marker, "provides: collect_provides, priority: priority_seven }");
            text.push_str("\nextern \"C\" fn priority_seven() -> u32 {\n    7\n}\n");
        }
        std::fs::write(abi.join("src").join(file), text).unwrap();
    }
    let manifest = std::fs::read_to_string(repo_root().join("crates/abi/Cargo.toml")).unwrap();
    let workspace = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let dep = |name: &str| {
        workspace.lines().find(|l| l.starts_with(&format!("{name} = "))).unwrap_or_else(|| panic!("no workspace dependency {name}")).to_string()
    };
    // `name = { workspace = true, optional = true }`: the workspace's
    // entry with the line's other keys added.
    let inherited = |line: &str| -> Option<String> {
        let (name, rest) = line.split_once(" = { workspace = true")?;
        let rest = rest.trim_end_matches('}').trim_start_matches(',').trim();
        let shared = dep(name);
        let value = shared.split_once(" = ").map(|(_, v)| v.trim()).unwrap_or_default();
        let keys = match value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
            Some(table) => table.trim().to_string(),
            None => format!("version = {value}"),
        };
        Some(if rest.is_empty() { format!("{name} = {{ {keys} }}") } else { format!("{name} = {{ {keys}, {rest} }}") })
    };
    let mut abi_manifest = String::new();
    for line in manifest.lines() {
        // The copy is a workspace of its own, without ours' lint table.
        if line == "[lints]" || line == "workspace = true" {
            continue;
        }
        if let Some(line) = inherited(line) {
            abi_manifest.push_str(&line);
            abi_manifest.push('\n');
            continue;
        }
        let line = match line.split_once(".workspace = true") {
            Some((key, _)) if ["version", "edition", "rust-version", "publish"].contains(&key) => match key {
                "version" => "version = \"0.1.0\"".to_string(),
                "edition" => "edition = \"2021\"".to_string(),
                _ => continue,
            },
            Some((name, _)) => dep(name),
            None => line.to_string(),
        };
        abi_manifest.push_str(&line);
        abi_manifest.push('\n');
    }
    std::fs::write(abi.join("Cargo.toml"), abi_manifest).unwrap();
    write(&root.join("Cargo.toml"), "[workspace]\nresolver = \"2\"\nmembers = [\"abi\", \"future-host\", \"future-plugin\"]\n");
    write(&root.join("future-host/Cargo.toml"), "[package]\nname = \"future-host\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ncordis-abi = { path = \"../abi\" }\nabi_stable = \"0.11\"\n");
    write(
        &root.join("future-host/src/main.rs"),
        "use abi_stable::library::{lib_header_from_path, RootModule};\nuse cordis_abi::PluginLibraryRef;\n\nfn main() {\n    let path = std::env::args().nth(1).expect(\"a library\");\n    let module = match lib_header_from_path(path.as_ref()).and_then(|h| h.init_root_module::<PluginLibraryRef>()) {\n        Ok(m) => m,\n        Err(e) => {\n            println!(\"refused: {}\", e.to_string().split_whitespace().collect::<Vec<_>>().join(\" \"));\n            return;\n        }\n    };\n    let _ = PluginLibraryRef::NAME;\n    let plugins: Vec<String> = (module.plugins())().into_iter().map(|d| d.name.into_string()).collect();\n    let packages: Vec<String> = module.packages().map(|f| f().into_iter().map(|p| p.package.into_string()).collect()).unwrap_or_default();\n    let priority = module.priority().map(|f| f().to_string()).unwrap_or_else(|| \"absent\".into());\n    println!(\"plugins: {}; packages: {}; priority: {priority}\", plugins.join(\",\"), packages.join(\",\"));\n}\n",
    );
    write(
        &root.join("future-plugin/Cargo.toml"),
        "[package]\nname = \"future-plugin\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\ncordis-abi = { path = \"../abi\" }\nabi_stable = \"0.11\"\nserde = { version = \"1\", features = [\"derive\"] }\nschemars = \"1\"\n",
    );
    write(
        &root.join("future-plugin/src/lib.rs"),
        "use cordis_abi::sdk::prelude::*;\n\n#[derive(Deserialize, JsonSchema)]\n#[serde(deny_unknown_fields)]\npub struct Config {}\n\n#[derive(Deserialize, JsonSchema)]\npub struct Args {}\n\nstruct Ping;\nimpl TypedTool for Ping {\n    type Args = Args;\n    fn name(&self) -> &str { \"ping\" }\n    fn description(&self) -> String { \"Answers pong.\".into() }\n    fn execute(&self, _args: Args, _cx: &ToolContext<'_>) -> Result<ToolReply, ToolError> {\n        Ok(ToolReply { text: \"pong\".into(), value: None })\n    }\n}\n\npub struct Future;\nimpl Plugin for Future {\n    const NAME: &'static str = \"future-plugin\";\n    const INJECT: &'static [&'static str] = &[\"tools\"];\n    type Config = Config;\n    fn apply(ctx: &Context<'_>, _config: Config) -> Result<(), PluginError> {\n        ctx.tools()?.register(Ping)\n    }\n}\n\ncordis_abi::export_plugin!(Future);\ncordis_abi::export_library!();\n",
    );
    let built = build_outside(&root);
    (built.join("future-host"), built.join("libfuture_plugin.so"))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Appending a field to `PluginLibrary` (a prefix type) is compatible in
/// one direction only, as abi_stable 0.11 checks layouts: a library built
/// with the field loads in today's host (the host knows fewer fields than
/// the library and ignores the rest), but a host built with the field
/// refuses today's libraries ("too many fields": the host may never know
/// more fields than the library). Hence the rule in docs/plugins.md: every
/// ABI change, appending included, bumps `cordis-abi`'s minor version.
#[test]
fn appending_to_a_prefix_type_loads_newer_libraries_in_older_hosts_only() {
    let (future_host, future_plugin) = future_build();
    // A host built with the appended field refuses today's library.
    let out = Command::new(&future_host).arg(lib_path("tool-todo")).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(stdout.starts_with("refused:") && stdout.contains("too many fields"), "{stdout}\n{stderr}");
    // It reads its own field from a library built with it.
    let out = Command::new(&future_host).arg(&future_plugin).output().unwrap();
    assert_eq!(text(&out).0.trim(), "plugins: future-plugin; packages: ; priority: 7");
    // Today's host loads the newer library and runs it.
    let scratch = Scratch::new();
    std::fs::copy(&future_plugin, scratch.path().join("libfuture.so")).unwrap();
    scratch.composition("- id: future\n  name: ./libfuture.so\n");
    let out = scratch.cordis(&["tools", "--json"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("\"ping\""), "{stdout}\n{stderr}");
}

/// A library built against another minor version of `cordis-abi` is
/// refused with a message that names both versions.
#[test]
fn another_abi_version_is_refused_naming_both() {
    let err = library::load_library(&lib_path("fixture-old-version")).expect_err("another cordis-abi version is refused");
    let text = err.to_string();
    assert!(text.contains("built against an incompatible plugin ABI"), "{text}");
    assert!(text.contains("it uses cordis-abi 0.1.0, this host uses 0.4.0"), "{text}");
    let _ = cordis_exe();
}

#[test]
fn a_field_added_to_a_plain_struct_is_refused_clearly() {
    let err = library::load_library(&lib_path("fixture-old-abi")).expect_err("a changed PluginDecl is refused");
    assert!(err.to_string().contains("built against an incompatible plugin ABI"), "{err}");
}
