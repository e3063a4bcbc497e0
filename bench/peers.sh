#!/usr/bin/env bash
# Times cordis beside the Rust plugin hosts that share its name and model,
# in one run on one machine: boot of a composition with one minimal plugin,
# and hot-reload latency when that plugin's library is replaced under a
# running host. See bench/README.md, "Peers side by side".
#
#   bash bench/peers.sh [--cordis-rs SRC] [--dshbox SRC | --dshbox-crates]
#                       [--no-dshbox] [--any-commit] [--runs N] [--reloads N]
#                       [--rows FILE]
#
# SRC is a git directory (bare or not) or a checkout of the peer; the
# environment variables CORDIS_PEER_CORDIS_RS and CORDIS_PEER_DSHBOX do the
# same. Without one, the peer is cloned from GitHub into target/peers/src/
# (and the script stops if that fails). Each peer is pinned to the commit
# below; a source without that commit is refused unless --any-commit is
# given, which measures the source's HEAD instead. dshbox/cordis-rs is also
# published on crates.io: --dshbox-crates (or CORDIS_PEER_DSHBOX=crates.io)
# builds it from the crates released at its pinned commit instead, so the
# comparison needs no access to GitHub for that peer. eavae/cordis-rs has
# no published crates; offline, give it a local copy.
#
# --rows FILE also writes the figures as rows of bench/run.sh's one table
# (figure, ours, baseline, ratio, target, verdict).
#
# Everything is built and run under target/peers/: the peers' exported
# sources, their build folders, and the minimal plugins (and, for
# eavae/cordis-rs, a small reload host) that this script writes there. The
# table goes to stdout and to target/peers/peers.md; progress to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

# The commits measured (the snapshots the README's figures come from).
EAVAE_URL=https://github.com/eavae/cordis-rs
EAVAE_COMMIT=40341b0d104541036d85f7e9fafc0420a4d20983
DSHBOX_URL=https://github.com/dshbox/cordis-rs
DSHBOX_COMMIT=c5a7d84e4af04ec1f20e3a7d89be0608a57ba471
# The versions that commit released to crates.io (its workspace's).
DSHBOX_CLI_VERSION=0.0.21
DSHBOX_LOADER_VERSION=0.0.22

eavae_src="${CORDIS_PEER_CORDIS_RS:-}"
dshbox_src="${CORDIS_PEER_DSHBOX:-}"
with_dshbox=1
any_commit=0
runs=30
reloads=20
rows_file=""
usage="usage: bash bench/peers.sh [--cordis-rs SRC] [--dshbox SRC | --dshbox-crates] [--no-dshbox] [--any-commit] [--runs N] [--reloads N] [--rows FILE]"
while [ $# -gt 0 ]; do
  case "$1" in
    --cordis-rs) eavae_src="${2:?--cordis-rs needs a path}"; shift 2 ;;
    --dshbox) dshbox_src="${2:?--dshbox needs a path}"; shift 2 ;;
    --dshbox-crates) dshbox_src=crates.io; shift ;;
    --rows) rows_file="$(realpath -m "${2:?--rows needs a file}")"; shift 2 ;;
    --no-dshbox) with_dshbox=0; shift ;;
    --any-commit) any_commit=1; shift ;;
    --runs) runs="${2:?--runs needs a number}"; shift 2 ;;
    --reloads) reloads="${2:?--reloads needs a number}"; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
if [ "$runs" -lt 20 ] || [ "$reloads" -lt 20 ]; then
  echo "bench/peers.sh: at least 20 runs and 20 reloads (medians and IQR need them)" >&2
  exit 2
fi

peers="$root/target/peers"
mkdir -p "$peers"
say() { echo "bench/peers.sh: $*" >&2; }

# The peers pin Rust 1.97 (eavae) or "stable" through rust-toolchain.toml;
# both are built with the toolchain that builds cordis, so all three sides
# come from the same compiler.
if command -v rustup >/dev/null; then
  RUSTUP_TOOLCHAIN="$(rustup show active-toolchain | awk '{print $1; exit}')"
  export RUSTUP_TOOLCHAIN
fi
rustc_version="$(rustc --version)"

# export_peer NAME OPTION SRC URL COMMIT: writes the peer's source at
# COMMIT into target/peers/NAME/ and prints the commit exported.
export_peer() {
  local name="$1" option="$2" src="$3" url="$4" commit="$5" gitdir
  if [ -z "$src" ]; then
    src="$peers/src/$name.git"
    if [ ! -d "$src" ]; then
      say "no source given for $name; cloning $url"
      if ! git clone --bare --quiet "$url" "$src" >&2; then
        say "cannot clone $url; pass a local copy with $option PATH (see --help)"
        exit 1
      fi
    fi
  fi
  if ! gitdir="$(git -C "$src" rev-parse --absolute-git-dir 2>/dev/null)"; then
    say "$src is not a git repository; the pinned commit cannot be checked"
    exit 1
  fi
  if ! git --git-dir "$gitdir" cat-file -e "$commit^{commit}" 2>/dev/null; then
    if [ "$any_commit" = 1 ]; then
      commit="$(git --git-dir "$gitdir" rev-parse HEAD)"
      say "$name: the pinned commit is not in $src; measuring its HEAD, $commit (--any-commit)"
    else
      say "$name: $src does not hold the pinned commit $commit (pass --any-commit to measure its HEAD)"
      exit 1
    fi
  fi
  rm -rf "${peers:?}/$name"
  mkdir -p "$peers/$name"
  git --git-dir "$gitdir" archive "$commit" | tar -x -C "$peers/$name"
  echo "$commit"
}

# ----------------------------------------------------------------- ours
say "building cordis and its minimal plugin (fixture-named), release"
cargo build --release -p cordis >&2
# The fixtures are a workspace of their own, built where the tests and
# cordis-bench build them.
cargo build --release --locked --manifest-path tests/fixtures/plugins/Cargo.toml \
  --target-dir target/fixture-plugins -p fixture-named >&2
our_commit="$(git rev-parse --short HEAD)"
changed="$(git status --porcelain --untracked-files=no | cut -c4- | paste -sd, -)"
[ -z "$changed" ] || our_commit="$our_commit with uncommitted changes to $changed"

ours="$peers/run/ours"
rm -rf "$ours"
mkdir -p "$ours/plugins" "$ours/staging"
cp target/fixture-plugins/release/libfixture_named.so "$ours/plugins/"
cat >"$ours/cordis.yml" <<'EOF'
- id: minimal
  name: ./plugins/libfixture_named.so
  config:
    tool: echo
EOF

# ------------------------------------------------------ eavae/cordis-rs
eavae_commit="$(export_peer cordis-rs --cordis-rs "$eavae_src" "$EAVAE_URL" "$EAVAE_COMMIT")"
eavae_target="$peers/cordis-rs-target"
say "building eavae/cordis-rs's host (cordis-cli), release"
(cd "$peers/cordis-rs" && CARGO_TARGET_DIR="$eavae_target" cargo build --release --ignore-rust-version -p cordis-cli >&2)

# The minimal plugin and the reload host, written here against the peer's
# SDK and loader. They form a workspace of their own, seeded with the
# peer's lock file so they build against the same dependency versions.
extra="$peers/cordis-rs-extra"
rm -rf "$extra"
mkdir -p "$extra/minimal/src" "$extra/reload-host/src"
cp "$peers/cordis-rs/Cargo.lock" "$extra/Cargo.lock"
src_dir="$peers/cordis-rs/crates"
cat >"$extra/Cargo.toml" <<'EOF'
[workspace]
resolver = "3"
members = ["minimal", "reload-host"]
EOF
cat >"$extra/minimal/Cargo.toml" <<EOF
[package]
name = "cordis-minimal"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
cordis-sdk = { path = "$src_dir/cordis-sdk", default-features = false }
EOF
# One service provided on apply, and nothing else (the peer's C ABI:
# plugin_create / plugin_apply with the host's vtable).
cat >"$extra/minimal/src/lib.rs" <<'EOF'
//! The minimal plugin for eavae/cordis-rs: provides one service on apply.
use std::ffi::{CStr, c_char};

use cordis_sdk::{ContextBridge, HostVtable, PLUGIN_API_VERSION, PluginHandle};

const META: &CStr = c"{\"name\":\"cordis-minimal\",\"version\":\"0.1.0\",\"inject\":[],\"provide\":[\"minimal\"]}";

struct Instance {
    vtable: *const HostVtable,
}

#[unsafe(no_mangle)]
pub extern "C" fn plugin_api_version() -> u32 {
    PLUGIN_API_VERSION
}

/// # Safety
/// `host` is the host's vtable, valid for the instance's lifetime.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plugin_create(host: *const HostVtable) -> *mut PluginHandle {
    if host.is_null() {
        return std::ptr::null_mut();
    }
    Box::into_raw(Box::new(Instance { vtable: host })).cast::<PluginHandle>()
}

/// # Safety
/// `handle` comes from `plugin_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plugin_dispose(handle: *mut PluginHandle) {
    if !handle.is_null() {
        drop(unsafe { Box::from_raw(handle.cast::<Instance>()) });
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn plugin_meta() -> *const c_char {
    META.as_ptr()
}

/// # Safety
/// `handle` comes from `plugin_create`; `config` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plugin_apply(handle: *mut PluginHandle, _config: *const c_char) -> i32 {
    let instance = unsafe { &*handle.cast::<Instance>() };
    let bridge = unsafe { ContextBridge::new(&*instance.vtable, handle) };
    match bridge.provide("minimal", "1") {
        Ok(()) => 0,
        Err(_) => 1,
    }
}
EOF
cat >"$extra/reload-host/Cargo.toml" <<EOF
[package]
name = "cordis-reload-host"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
cordis-core = { path = "$src_dir/cordis-core" }
cordis-loader = { path = "$src_dir/cordis-loader" }
cordis-plugin-hmr = { path = "$src_dir/cordis-plugin-hmr" }
tokio = { version = "1", features = ["rt", "rt-multi-thread", "macros", "time", "sync", "signal"] }
anyhow = "1"
EOF
# The peer's cordis-cli mounts its HMR plugin, but nothing in it acts on
# the plugin's `hmr/change` events: a replaced .so is not reloaded. This
# host is cordis-cli's start-up path (load the .so files in plugins/, read
# cordis.yml, wait for the tree) plus the missing step, done with the
# peer's own pieces: on `hmr/change` for a library, load it under a
# content-hash name (the peer's build::content_hash, as its HMR docs
# prescribe, since dlopen returns the old image for a path it has seen)
# and swap it in with the steps of reload::execute_reloads (register the new
# artifact, reload every entry bound to it), keeping every old artifact
# loaded, as cordis-cli keeps its libraries for the whole run.
cat >"$extra/reload-host/src/main.rs" <<'EOF'
//! cordis-cli's start-up path plus a .so reload on `hmr/change`.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cordis_core::{Context, EventOptions, event_callback};
use cordis_loader::{Loader, SoPlugin, parse_config};
use cordis_plugin_hmr::build::content_hash;

extern "C" fn log(message: *const std::ffi::c_char) {
    let text = unsafe { std::ffi::CStr::from_ptr(message) }.to_string_lossy().into_owned();
    eprintln!("[plugin] {text}");
}

fn load(path: &Path) -> anyhow::Result<SoPlugin> {
    let mut plugin = unsafe { SoPlugin::load(path) }.map_err(|e| anyhow::anyhow!("{e}"))?;
    if unsafe { plugin.create(log) }.is_null() {
        anyhow::bail!("plugin_create failed for {}", path.display());
    }
    Ok(plugin)
}

fn stamp(path: &Path) -> anyhow::Result<(u64, std::time::SystemTime)> {
    let meta = std::fs::metadata(path)?;
    Ok((meta.len(), meta.modified()?))
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let configs = parse_config(Path::new("cordis.yml")).map_err(|e| anyhow::anyhow!("{e}"))?;
    let root = Context::new();
    let loader = Loader::with_shared(&root, None);
    loader.builtins.rcu(|builtins| {
        let mut next = (**builtins).clone();
        next.insert("@cordisjs/plugin-hmr".to_string(), cordis_plugin_hmr::hmr_plugin());
        Arc::new(next)
    });
    let mut current = std::collections::HashMap::new();
    for entry in std::fs::read_dir("plugins")? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "so") {
            let plugin = load(&path)?;
            let name = loader.register_so_plugin(&plugin).map_err(|e| anyhow::anyhow!(e))?;
            current.insert(path.canonicalize()?, (name, plugin, stamp(&path)?));
        }
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PathBuf>();
    drop(root.on(
        "hmr/change",
        event_callback(move |args| {
            if let Some(path) = args[0].downcast_ref::<String>() {
                let _ = tx.send(PathBuf::from(path));
            }
            Ok(None)
        }),
        EventOptions::default(),
    )?);
    loader.read(configs).await;
    loader.tree_handle().await_tree().await;
    eprintln!("cordis ready");
    std::fs::create_dir_all("cache")?;
    let mut retired = Vec::new();
    while let Some(path) = rx.recv().await {
        let Ok(path) = path.canonicalize() else { continue };
        let Some((name, _, loaded)) = current.get(&path) else { continue };
        let name = name.clone();
        // One change comes as several events, each routed after its own
        // debounce, and the HMR plugin routes every kind of event, reading
        // the file included: a file already loaded is recognised by its
        // size and time (a stat, which makes no event) and left alone.
        let now = stamp(&path)?;
        if now == *loaded {
            continue;
        }
        let bytes = std::fs::read(&path)?;
        let fresh = Path::new("cache").join(format!("{name}@{}.so", content_hash(&bytes)));
        std::fs::write(&fresh, &bytes)?;
        let next = load(&fresh)?;
        // reload::execute_reloads's steps, with the new artifact kept alive
        // here (that function drops the one it is given once it returns).
        loader.register_so_plugin(&next).map_err(|e| anyhow::anyhow!(e))?;
        let mut ok = true;
        for entry in loader.tree_handle().entries().into_iter().filter(|e| e.options.lock().name == name) {
            if let Err(error) = entry.reload().await {
                eprintln!("cordis reload failed for {name}: {error}");
                ok = false;
            }
        }
        if ok {
            eprintln!("cordis reloaded {name}");
        }
        // The old artifact is kept, never dropped: dropping it (disposing
        // its instance, unloading its library) crashes the host with SIGSEGV
        // a moment after the swap, as execute_reloads does on success.
        if let Some(old) = current.insert(path, (name, next, now)) {
            retired.push(old);
        }
    }
    Ok(())
}
EOF
say "building the minimal plugin and the reload host for eavae/cordis-rs"
(cd "$extra" && CARGO_TARGET_DIR="$eavae_target" cargo build --release --ignore-rust-version >&2)

eavae="$peers/run/cordis-rs"
rm -rf "$eavae"
mkdir -p "$eavae/plugins" "$eavae/staging"
cp "$eavae_target/release/libcordis_minimal.so" "$eavae/plugins/"
cat >"$eavae/cordis.yml" <<'EOF'
- id: minimal
  name: cordis-minimal
EOF
# Twice: with the HMR plugin's default debounce (100 ms) and with the
# least it accepts (1 ms).
for debounce in 100 1; do
  eavae_hmr="$peers/run/cordis-rs-hmr-$debounce"
  rm -rf "$eavae_hmr"
  mkdir -p "$eavae_hmr/plugins" "$eavae_hmr/staging"
  cp "$eavae_target/release/libcordis_minimal.so" "$eavae_hmr/plugins/"
  cat >"$eavae_hmr/cordis.yml" <<EOF
- id: minimal
  name: cordis-minimal
- id: hmr
  name: '@cordisjs/plugin-hmr'
  config:
    root: [plugins]
    debounce: $debounce
EOF
done

# ----------------------------------------------------- dshbox/cordis-rs
dshbox_commit=""
dshbox_version=""
if [ "$with_dshbox" = 1 ]; then
  dshbox_target="$peers/dshbox-cordis-rs-target"
  dextra="$peers/dshbox-cordis-rs-extra"
  rm -rf "$dextra"
  mkdir -p "$dextra/src"
  if [ "$dshbox_src" = crates.io ]; then
    dshbox_commit="$DSHBOX_COMMIT"
    dshbox_version="dshbox/cordis-rs cordis-cli $DSHBOX_CLI_VERSION and cordis-loader $DSHBOX_LOADER_VERSION from crates.io (released at ${DSHBOX_COMMIT:0:12})"
    say "building dshbox/cordis-rs's host from crates.io (cordis-cli $DSHBOX_CLI_VERSION, its own lock file), release"
    cargo install --quiet --locked --force cordis-cli --version "=$DSHBOX_CLI_VERSION" --root "$dshbox_target/install" \
      --target-dir "$dshbox_target" >&2
    mkdir -p "$dshbox_target/release"
    cp "$dshbox_target/install/bin/cordis" "$dshbox_target/release/cordis"
    loader_dependency="cordis-loader = { version = \"=$DSHBOX_LOADER_VERSION\", features = [\"dynamic\"] }"
  else
    dshbox_commit="$(export_peer dshbox-cordis-rs --dshbox "$dshbox_src" "$DSHBOX_URL" "$DSHBOX_COMMIT")"
    dshbox_version=""
    say "building dshbox/cordis-rs's host (cordis-cli), release"
    (cd "$peers/dshbox-cordis-rs" && CARGO_TARGET_DIR="$dshbox_target" cargo build --release -p cordis-cli >&2)
    cp "$peers/dshbox-cordis-rs/Cargo.lock" "$dextra/Cargo.lock"
    loader_dependency="cordis-loader = { path = \"$peers/dshbox-cordis-rs/crates/cordis-loader\", features = [\"dynamic\"] }"
  fi
  cat >"$dextra/Cargo.toml" <<EOF
[package]
name = "minimal"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
$loader_dependency

[workspace]
EOF
  # One value provided on apply, and nothing else (the peer's dynamic
  # plugins: a Rust trait object behind a build-fingerprint check).
  cat >"$dextra/src/lib.rs" <<'EOF'
//! The minimal plugin for dshbox/cordis-rs: provides one value on apply.
use cordis_loader::dynamic::{BoxFuture, Config, Context, Plugin, PluginOutput, Result};

pub struct Minimal;

impl Plugin for Minimal {
    fn name(&self) -> &str {
        "minimal"
    }

    fn apply(&self, ctx: Context, _config: Config) -> BoxFuture<Result<PluginOutput>> {
        Box::pin(async move {
            ctx.provide("minimal", 1u32)?;
            Ok(PluginOutput::none())
        })
    }
}

cordis_loader::dynamic::export_plugin!(Minimal);
EOF
  say "building the minimal plugin for dshbox/cordis-rs"
  (cd "$dextra" && CARGO_TARGET_DIR="$dshbox_target" cargo build --release >&2)
  dshbox="$peers/run/dshbox-cordis-rs"
  rm -rf "$dshbox"
  mkdir -p "$dshbox/plugins" "$dshbox/staging"
  cp "$dshbox_target/release/libminimal.so" "$dshbox/plugins/"
  echo '{"entries":[{"id":"minimal","name":"minimal"}]}' >"$dshbox/cordis.json"
fi

# --------------------------------------------------------------- measure
spec="$peers/run/spec.json"
machine="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
cores="$(nproc)"
export PEERS_SPEC="$spec" PEERS_RUNS="$runs" PEERS_RELOADS="$reloads" PEERS_ROOT="$root" PEERS_DIR="$peers"
export PEERS_OUR_COMMIT="$our_commit" PEERS_EAVAE_COMMIT="$eavae_commit" PEERS_DSHBOX_COMMIT="$dshbox_commit"
export PEERS_DSHBOX_VERSION="$dshbox_version" PEERS_ROWS="$rows_file"
export PEERS_MACHINE="$machine" PEERS_CORES="$cores" PEERS_RUSTC="$rustc_version"
say "measuring: $runs boots and $reloads reloads per side, interleaved"
python3 bench/peers.py | tee "$peers/peers.md"
say "table written to $peers/peers.md; the whole run took $SECONDS s"
