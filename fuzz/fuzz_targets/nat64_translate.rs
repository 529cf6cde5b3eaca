#![no_main]
//! Any bytes through the NAT64 translator, both directions, on a translator that already has
//! sessions (so inbound packets and ICMP errors reach the session code): never a panic, every
//! packet accounted for once, and whatever comes out is a readable IP packet.
use std::net::Ipv4Addr;

use libfuzzer_sys::fuzz_target;
use nat64::{Nat64, Outcome, Params};
use wire::Instant;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, packet)) = data.split_first() else {
        return;
    };
    let t = Ipv4Addr::new(192, 0, 2, 1);
    let mut n = Nat64::new(
        Params {
            pool4: vec![t],
            ..Params::default()
        },
        1,
    )
    .unwrap();
    // Sessions for UDP 5000→53 and ICMP id 7 towards 198.51.100.10 so that replies match.
    let mut udp = vec![0x60, 0, 0, 0, 0, 9, 17, 64];
    udp.extend_from_slice(
        &"2001:db8::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    udp.extend_from_slice(
        &"64:ff9b::c633:640a"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    udp.extend_from_slice(&[0x13, 0x88, 0, 53, 0, 9, 0, 0, b'q']);
    let c = wire::checksum::checksum(&udp[40..], {
        let mut s = wire::checksum::sum(&udp[8..40], 0);
        s += 17 + 9;
        s
    });
    udp[46..48].copy_from_slice(&c.to_be_bytes());
    let _ = n.translate_6to4(Instant::ZERO, &udp);
    let now = Instant::from_millis(u64::from(mode >> 1));
    let before = n.stats();
    let o = if mode & 1 == 0 {
        n.translate_6to4(now, packet)
    } else {
        n.translate_4to6(now, packet)
    };
    let after = n.stats();
    let count = |s: &nat64::Stats| s.translated_6to4 + s.translated_4to6 + s.total_drops();
    assert_eq!(count(&after), count(&before) + 1);
    if let Outcome::Forward(b) | Outcome::Reply(b) = o {
        assert!(wire::packet::parse(&b).is_ok());
    }
    let _ = n.next_timeout();
    n.expire(Instant::from_secs(100_000));
});
