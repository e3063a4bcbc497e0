//! Arbitrary bytes as a log of the TypeScript harness's store, read the
//! way `cordis` reads it: as a `session.jsonl.zstd` file, as a plain
//! `session.jsonl` file, and as the same bytes framed the way the store
//! writes them (the first line in a frame of its own, the rest in a second
//! frame cut at a point the input chooses, so the frame scanner, the torn
//! frame recovery and the line rules all see fuzzed input). No input may
//! panic; a log that is read has seqs 0, 1, 2, ... and no turn left open
//! (the closers the harness adds close it).

#![no_main]

use std::path::Path;

use cordis_session::store::harness::frames::FrameEncoder;
use cordis_session::store::harness::{read_log_bytes, scan::interrupted_closers, Compression};
use libfuzzer_sys::fuzz_target;

fn check(bytes: &[u8], compression: Compression) {
    let Ok(log) = read_log_bytes(bytes, compression, Path::new("fuzz")) else { return };
    for (i, event) in log.events.iter().enumerate() {
        assert_eq!(event.seq, i as u64, "seqs run on without a gap");
    }
    assert!(interrupted_closers(&log.events).is_empty(), "a log as read has no open turn");
    assert_eq!(log.lines.len(), log.events.len());
}

fuzz_target!(|data: &[u8]| {
    check(data, Compression::Zstd);
    check(data, Compression::None);
    let Some(first) = data.iter().position(|&b| b == b'\n') else { return };
    let Ok(mut encoder) = FrameEncoder::new() else { return };
    let (Ok(header), Ok(rest)) = (encoder.frame(&data[..=first]), encoder.frame(&data[first + 1..])) else { return };
    let mut framed = header;
    let cut = data.first().map_or(rest.len(), |&b| rest.len() - (usize::from(b) % 4).min(rest.len()));
    framed.extend_from_slice(&rest[..cut]);
    check(&framed, Compression::Zstd);
});
