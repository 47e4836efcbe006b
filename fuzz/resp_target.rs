//! The body of the `resp_decoder` fuzz target: wisckey serve's RESP request decoder
//! (`crates/wisckey-server/src/resp.rs`) fed arbitrary bytes. Kept apart from targets.rs
//! (the engine's) because it needs the server crate; replayed on stable, with every saved
//! corpus and artifact input, by crates/wisckey-server/tests/parser_random.rs.
//!
//! The first byte picks the limits (bit 0: tiny or default) and how many bytes arrive per
//! read (the rest, at least 1); the decoder must never panic, move its position backwards
//! or past the input, or return a command over the limits.

use wisckey_server::resp::{Decoder, Limits};

pub fn resp_decoder(data: &[u8]) {
    let Some((&knobs, input)) = data.split_first() else {
        return;
    };
    let limits = if knobs & 1 == 0 {
        Limits::default()
    } else {
        Limits {
            max_bulk_len: 64,
            max_multibulk_len: 6,
            max_inline_len: 32,
            max_query_len: 128,
        }
    };
    let step = usize::from(knobs >> 1).max(1);
    let mut decoder = Decoder::new(limits);
    let mut buf = Vec::new();
    for chunk in input.chunks(step) {
        buf.extend_from_slice(chunk);
        let mut pos = 0;
        loop {
            let before = pos;
            match decoder.next(&buf, &mut pos) {
                Ok(Some(cmd)) => {
                    assert!(
                        pos > before && pos <= buf.len(),
                        "progress within the input"
                    );
                    let max_args = limits.max_multibulk_len.max(limits.max_inline_len);
                    assert!(cmd.len() <= max_args, "{} arguments", cmd.len());
                    let max_arg = limits.max_bulk_len.max(limits.max_inline_len);
                    assert!(
                        cmd.iter().all(|a| a.len() <= max_arg),
                        "argument over the limit"
                    );
                }
                Ok(None) => {
                    assert!(
                        pos >= before && pos <= buf.len(),
                        "position within the input"
                    );
                    break;
                }
                Err(_) => return,
            }
        }
        buf.drain(..pos);
    }
}
