#![no_main]
//! Any text through the impairment parsers (drop filters, jitter, duplicate, reorder, slot,
//! packet rate, slow): an error or a value that prints and parses back to itself. Then the bytes as a
//! packet through a parsed filter and the narrow link's router, which must never panic.
use libfuzzer_sys::fuzz_target;
use link::{Duplicate, Filter, Jitter, PacketRate, Reorder, Slot, Slow};

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(f) = Filter::parse(s) {
            assert_eq!(Filter::parse(&f.to_string()).expect("a printed filter parses"), f);
        }
        if let Ok(j) = Jitter::parse(s) {
            assert_eq!(Jitter::parse(&j.to_string()).expect("printed jitter parses"), j);
        }
        if let Ok(d) = Duplicate::parse(s) {
            assert_eq!(Duplicate::parse(&d.to_string()).expect("printed duplicate parses"), d);
        }
        if let Ok(r) = Reorder::parse(s) {
            assert_eq!(Reorder::parse(&r.to_string()).expect("printed reorder parses"), r);
        }
        if let Ok(x) = Slot::parse(s) {
            assert_eq!(Slot::parse(&x.to_string()).expect("a printed slot parses"), x);
        }
        if let Ok(p) = PacketRate::parse(s) {
            assert_eq!(PacketRate::parse(&p.to_string()).expect("a printed rate parses"), p);
        }
        if let Ok(w) = Slow::parse(s) {
            assert_eq!(Slow::parse(&w.to_string()).expect("a printed slow parses"), w);
        }
    }
    let f = Filter::parse("tcp syn port 443 and not ecn ce and ipv4").expect("static filter");
    let _ = f.matches(data);
    let _ = link::mtu::too_big(
        data,
        1280,
        std::net::Ipv4Addr::new(10, 0, 9, 1),
        std::net::Ipv6Addr::LOCALHOST,
    );
});
