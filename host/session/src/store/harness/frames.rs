//! Zstandard frames as the harness store uses them: a file is a plain
//! concatenation of independent frames, each with a content checksum; the
//! first holds the header line alone, each later one a batch of lines.
//!
//! Finding where frames end needs no decompression: the frame header and
//! the block headers give every size (RFC 8878 §3.1.1). A file that ends
//! inside a frame has a torn last frame (a writer stopped mid-append);
//! anything structurally impossible is corruption. Compression and checksum
//! checks are the `zstd` crate's (libzstd).

use std::io::Read;
use std::ops::Range;
use std::path::Path;

use crate::store::{io, StoreError};

/// The magic number that starts every Zstandard frame (little-endian
/// `0xFD2FB528`).
pub const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// The compression level the harness uses (libzstd's default).
pub const LEVEL: i32 = 3;

/// The frames of a file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Frames {
    /// Byte ranges of the complete frames, in order.
    pub complete: Vec<Range<usize>>,
    /// Where an incomplete last frame starts, if the file ends inside one.
    pub torn_start: Option<usize>,
}

/// Whether the file at `path` starts with a Zstandard frame.
///
/// # Errors
/// [`StoreError::Io`] when it cannot be opened.
pub fn is_zstd_file(path: &Path) -> Result<bool, StoreError> {
    let mut head = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(io(path))?;
    let mut got = 0;
    while got < 4 {
        match file.read(&mut head[got..]).map_err(io(path))? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got == 4 && head == MAGIC)
}

/// Splits `buf` into frames without decompressing them.
///
/// # Errors
/// A message naming the byte offset of a bad magic number, a reserved
/// header bit or a reserved block type.
pub fn split(buf: &[u8]) -> Result<Frames, String> {
    let mut frames = Frames::default();
    let mut at = 0usize;
    while at < buf.len() {
        let start = at;
        let torn = |frames: Frames| Ok(Frames { torn_start: Some(start), ..frames });
        if buf.len() - at < 4 {
            return torn(frames);
        }
        if buf[at..at + 4] != MAGIC {
            return Err(format!("no Zstandard frame starts at byte {at} (bad magic number)"));
        }
        at += 4;
        let Some(&descriptor) = buf.get(at) else { return torn(frames) };
        if descriptor & 0b0001_1000 != 0 {
            return Err(format!("reserved bit set in the frame header at byte {at}"));
        }
        at += 1;
        let single_segment = descriptor & 0b0010_0000 != 0;
        let checksum = descriptor & 0b0000_0100 != 0;
        let dictionary_bytes = match descriptor & 0b11 {
            3 => 4,
            n => n as usize,
        };
        let content_size_bytes = match descriptor >> 6 {
            0 => usize::from(single_segment),
            flag => 1 << flag,
        };
        let rest = usize::from(!single_segment) + dictionary_bytes + content_size_bytes;
        if buf.len() - at < rest {
            return torn(frames);
        }
        at += rest;
        loop {
            if buf.len() - at < 3 {
                return torn(frames);
            }
            let header = u32::from(buf[at]) | u32::from(buf[at + 1]) << 8 | u32::from(buf[at + 2]) << 16;
            let last = header & 1 != 0;
            let kind = (header >> 1) & 0b11;
            if kind == 3 {
                return Err(format!("reserved block type at byte {at}"));
            }
            at += 3;
            // An RLE block stores its one byte, whatever its size says.
            let payload = if kind == 1 { 1 } else { (header >> 3) as usize };
            if buf.len() - at < payload {
                return torn(frames);
            }
            at += payload;
            if last {
                break;
            }
        }
        if checksum {
            if buf.len() - at < 4 {
                return torn(frames);
            }
            at += 4;
        }
        frames.complete.push(start..at);
    }
    Ok(frames)
}

/// The offset of the first complete frame that passes its checksum and
/// starts after `start` (a magic number anywhere in the bytes), if any.
pub fn complete_frame_after(buf: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while let Some(n) = buf.get(at..)?.windows(4).position(|w| w == MAGIC) {
        let candidate = at + n;
        if let Ok(frames) = split(&buf[candidate..]) {
            if let Some(first) = frames.complete.first() {
                if decompress(&buf[candidate + first.start..candidate + first.end]).is_ok() {
                    return Some(candidate);
                }
            }
        }
        at = candidate + 1;
    }
    None
}

/// Decompresses one complete frame and checks its content checksum.
///
/// # Errors
/// libzstd's message (`Restored data doesn't match checksum`, ...).
pub fn decompress(frame: &[u8]) -> Result<Vec<u8>, String> {
    let mut decoder = zstd::stream::read::Decoder::with_buffer(frame).map_err(|e| e.to_string())?.single_frame();
    let mut out = Vec::new();
    decoder.read_to_end(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Decompresses frame after frame with one libzstd context: a log holds a
/// frame per event, and setting up a context for each cost more than
/// decompressing its small frame.
pub struct FrameDecoder {
    context: Option<zstd::bulk::Decompressor<'static>>,
}

impl std::fmt::Debug for FrameDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FrameDecoder")
    }
}

impl Default for FrameDecoder {
    fn default() -> FrameDecoder {
        FrameDecoder::new()
    }
}

impl FrameDecoder {
    /// A decoder with its context (without one, each frame is decoded as
    /// [`decompress`] does).
    pub fn new() -> FrameDecoder {
        FrameDecoder { context: zstd::bulk::Decompressor::new().ok() }
    }

    /// [`decompress`], in the reused context when the frame states its
    /// content size (up to 64 MiB); the same result and, on any failure,
    /// the same message, since a frame the context cannot decode is decoded
    /// again by [`decompress`].
    ///
    /// # Errors
    /// As [`decompress`].
    pub fn decompress(&mut self, frame: &[u8]) -> Result<Vec<u8>, String> {
        const MOST: usize = 64 << 20;
        let size = zstd::zstd_safe::get_frame_content_size(frame).ok().flatten().and_then(|n| usize::try_from(n).ok()).filter(|&n| n <= MOST);
        if let (Some(context), Some(size)) = (self.context.as_mut(), size) {
            if let Ok(out) = context.decompress(frame, size) {
                if out.len() == size {
                    return Ok(out);
                }
            }
        }
        decompress(frame)
    }
}

/// What can be decompressed from the start of an incomplete frame: the
/// content of its complete blocks, as far as libzstd gives it out (no
/// checksum can be checked).
pub fn decompress_prefix(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let Ok(decoder) = zstd::stream::read::Decoder::with_buffer(bytes) else { return out };
    let mut decoder = decoder.single_frame();
    let mut chunk = [0u8; 8192];
    loop {
        match decoder.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    out
}

/// A compressor of checksummed frames at the harness's level, kept per
/// writer (a libzstd context is worth reusing).
pub struct FrameEncoder {
    inner: zstd::bulk::Compressor<'static>,
}

impl std::fmt::Debug for FrameEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FrameEncoder")
    }
}

impl FrameEncoder {
    /// A new encoder.
    ///
    /// # Errors
    /// libzstd's message when the context cannot be made.
    pub fn new() -> Result<FrameEncoder, String> {
        let mut inner = zstd::bulk::Compressor::new(LEVEL).map_err(|e| e.to_string())?;
        inner.include_checksum(true).map_err(|e| e.to_string())?;
        Ok(FrameEncoder { inner })
    }

    /// One frame holding `plain`.
    ///
    /// # Errors
    /// libzstd's message.
    pub fn frame(&mut self, plain: &[u8]) -> Result<Vec<u8>, String> {
        self.inner.compress(plain).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_and_a_cut_frame_is_torn() {
        let mut enc = FrameEncoder::new().unwrap();
        let a = enc.frame(b"{\"type\":\"session\"}\n").unwrap();
        let b = enc.frame(&b"{\"seq\":0}\n".repeat(50)).unwrap();
        let whole = [a.clone(), b.clone()].concat();
        let frames = split(&whole).unwrap();
        assert_eq!(frames.complete, vec![0..a.len(), a.len()..whole.len()]);
        assert_eq!(frames.torn_start, None);
        assert_eq!(decompress(&whole[frames.complete[1].clone()]).unwrap(), b"{\"seq\":0}\n".repeat(50));
        for cut in a.len() + 1..whole.len() {
            let frames = split(&whole[..cut]).unwrap();
            assert_eq!(frames.complete.len(), 1, "cut at {cut}");
            assert_eq!(frames.torn_start, Some(a.len()), "cut at {cut}");
        }
        let mut bad = whole.clone();
        bad[a.len()] ^= 0xFF;
        assert!(split(&bad).unwrap_err().contains(&format!("byte {}", a.len())));
    }

    #[test]
    fn a_damaged_size_with_whole_frames_after_it_is_not_a_torn_tail() {
        let mut enc = FrameEncoder::new().unwrap();
        let a = enc.frame(b"{\"type\":\"session\"}\n").unwrap();
        let b = enc.frame(&b"{\"seq\":0}\n".repeat(50)).unwrap();
        let c = enc.frame(&b"{\"seq\":1}\n".repeat(50)).unwrap();
        let mut whole = [a.clone(), b.clone(), c].concat();
        assert_eq!(split(&whole).unwrap().torn_start, None);
        // Frame b's first block header (after its frame header, sized as
        // split reads it): make its size run past the end of the file.
        let descriptor = whole[a.len() + 4];
        let single = descriptor & 0x20 != 0;
        let fcs = match descriptor >> 6 {
            0 => usize::from(single),
            f => 1 << f,
        };
        let dict = match descriptor & 3 {
            3 => 4,
            n => n as usize,
        };
        let block = a.len() + 5 + usize::from(!single) + dict + fcs;
        whole[block] |= 0xF8;
        whole[block + 1] = 0xFF;
        whole[block + 2] = 0xFF;
        let frames = split(&whole).unwrap();
        assert_eq!(frames.torn_start, Some(a.len()));
        assert_eq!(complete_frame_after(&whole, a.len()), Some(a.len() + b.len()));
        assert_eq!(complete_frame_after(&whole[..a.len() + b.len() - 3], a.len()), None);
    }

    #[test]
    fn a_flipped_byte_fails_the_checksum() {
        let mut enc = FrameEncoder::new().unwrap();
        let text: Vec<u8> = (0..200).flat_map(|i| format!("{{\"seq\":{i},\"x\":\"{}\"}}\n", i * 7919).into_bytes()).collect();
        let mut frame = enc.frame(&text).unwrap();
        let middle = frame.len() / 2;
        frame[middle] ^= 0x55;
        assert!(decompress(&frame).is_err());
    }

    #[test]
    fn a_reused_context_reads_what_a_fresh_one_reads() {
        let mut encoder = FrameEncoder::new().unwrap();
        let mut decoder = FrameDecoder::new();
        for text in [&b"{\"seq\":0}\n"[..], b"", &b"x".repeat(100_000)] {
            let frame = encoder.frame(text).unwrap();
            assert_eq!(decoder.decompress(&frame).unwrap(), text);
            let mut bad = frame.clone();
            let last = bad.len() - 1;
            bad[last] ^= 1;
            assert_eq!(decoder.decompress(&bad), decompress(&bad));
            assert!(decompress(&bad).is_err());
        }
    }
}
