#![no_main]
//! Any text as a run file and as a link log: an error value or a lab, never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        labnet::fuzz_entry(s);
    }
});
