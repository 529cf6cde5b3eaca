#![no_main]
//! Any text as a strace log, any bytes as a captured packet, through ipv6-check's rules and
//! report: never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ipv6check::fuzz_one(data);
});
