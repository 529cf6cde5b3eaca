#![no_main]
//! Any datagrams through the QUIC header reader and the per-flow connection tracker: never a
//! panic. The input is a sequence of datagrams, each a direction byte, a length byte and that
//! many bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    analyze::quic::feed_datagrams(data);
});
