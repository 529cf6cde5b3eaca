#![no_main]
//! Any bytes as packets reaching the lab's NAT64 and DNS64 endpoints (UDP and TCP DNS from
//! raw packets, the minimal TCP responder, translation): never a panic, and everything sent
//! back is an IPv6 or IPv4 packet.
use libfuzzer_sys::fuzz_target;
use std::net::Ipv4Addr;

use lab::config::Nat64Spec;
use lab::translator::{Role, Translator};
use nat64::dns64::Zone;
use wire::Instant;

fuzz_target!(|data: &[u8]| {
    let mut z = Zone::new();
    z.add_a("server", Ipv4Addr::new(10, 77, 2, 1), 60).unwrap();
    let mut t = Translator::new(&Nat64Spec::at("server"), z, 1).unwrap();
    let mut out = Vec::new();
    // The input is a sequence of packets, each prefixed by a 1-byte length, so that sequences
    // (a handshake, then data) are reachable too.
    let mut rest = data;
    let mut at = Instant::ZERO;
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len).min(tail.len());
        let (p, next) = tail.split_at(n);
        let role = if len % 2 == 0 {
            Role::Dns64
        } else {
            Role::Nat64
        };
        t.handle(role, at, p.to_vec(), &mut out);
        at = at + wire::Duration::from_millis(1);
        rest = next;
    }
    for p in out {
        assert!(matches!(p.first().map(|b| b >> 4), Some(4) | Some(6)));
    }
    let _ = t.summary();
});
