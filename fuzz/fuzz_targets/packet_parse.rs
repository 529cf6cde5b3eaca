#![no_main]
//! Any bytes through the packet readers and the ECN writer: never a panic, and a UDP datagram
//! read whole agrees with the flow key.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = wire::packet::parse(data);
    let key = wire::packet::flow_key(data);
    if let Some(u) = wire::packet::udp_datagram(data) {
        // A whole datagram: its header and payload lie within the bytes, and the flow key's
        // fast path finds the same ports.
        assert!(8 + u.payload.len() <= data.len());
        let key = key.expect("a UDP datagram has a flow key");
        assert_eq!((key.src_port, key.dst_port), (u.src_port, u.dst_port));
    }
    let mut copy = data.to_vec();
    if wire::packet::set_ecn(&mut copy, wire::Ecn::Ce).is_ok() {
        assert_eq!(wire::packet::ecn_of(&copy), wire::Ecn::Ce);
    }
});
