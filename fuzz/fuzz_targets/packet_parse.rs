#![no_main]
//! Any bytes through the packet readers and the ECN writer: never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = wire::packet::parse(data);
    let _ = wire::packet::flow_key(data);
    let mut copy = data.to_vec();
    if wire::packet::set_ecn(&mut copy, wire::Ecn::Ce).is_ok() {
        assert_eq!(wire::packet::ecn_of(&copy), wire::Ecn::Ce);
    }
});
