#![no_main]

#[path = "../resp_target.rs"]
mod resp_target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| resp_target::resp_decoder(data));
