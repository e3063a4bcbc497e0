//! Bytes as what an MCP client writes to `cordis mcp` on stdin, through the
//! server's own line loop (`cordis_mcp::serve_lines`: the line screen,
//! rmcp and the request handler), in-process, against a host with no
//! composition.
//!
//! It checks what the stdio transport promises: every line the server
//! writes is exactly one JSON-RPC 2.0 message (a request or notification
//! with a `method`, or a response with an `id` and one of `result` and
//! `error`); nothing else reaches the stream.

#![no_main]

use std::io::Write;
use std::sync::{Arc, LazyLock, Mutex};

use cordis_engine::runtime::{Host, HostOptions};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

static RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime"));

static HOST: LazyLock<Host> = LazyLock::new(|| {
    let options = HostOptions { in_memory: true, ..HostOptions::default() };
    Host::boot_without_composition(&options).expect("a host without a composition boots")
});

/// Collects what the server writes.
#[derive(Clone, Default)]
struct Collected(Arc<Mutex<Vec<u8>>>);

impl Write for Collected {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn check_line(line: &[u8]) {
    let message: Value = serde_json::from_slice(line).unwrap_or_else(|e| panic!("a stdout line is not JSON ({e}): {:?}", String::from_utf8_lossy(line)));
    let Value::Object(fields) = &message else { panic!("a stdout line is not a message object: {message}") };
    assert_eq!(fields.get("jsonrpc"), Some(&Value::String("2.0".into())), "{message}");
    match fields.get("method") {
        Some(method) => assert!(method.is_string(), "{message}"),
        None => {
            assert!(fields.contains_key("id"), "a response without an id: {message}");
            assert!(fields.contains_key("result") != fields.contains_key("error"), "a response needs one of result and error: {message}");
            if let Some(error) = fields.get("error") {
                assert!(error.get("code").is_some_and(Value::is_i64) && error.get("message").is_some_and(Value::is_string), "{message}");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let shared = cordis_mcp::Shared::new(&HOST.services, cordis_mcp::Attach::New { cwd: None });
    let out = Collected::default();
    let input = std::io::Cursor::new(data.to_vec());
    let _ = RUNTIME.block_on(cordis_mcp::serve_lines(shared, input, out.clone()));
    let written = out.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    assert!(written.is_empty() || written.ends_with(b"\n"), "the last line is cut: {:?}", String::from_utf8_lossy(&written));
    for line in written.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        check_line(line);
    }
});
