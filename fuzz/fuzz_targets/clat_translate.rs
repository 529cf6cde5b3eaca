#![no_main]
//! Any bytes through the CLAT (464XLAT's stateless translator), both directions, and any
//! bytes as an RFC 7050 discovery answer: never a panic, every packet accounted for once, and
//! whatever comes out is a readable IP packet.
use libfuzzer_sys::fuzz_target;
use nat64::clat::{self, Clat, ClatParams};
use nat64::{Outcome, Prefix};
use wire::Instant;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, packet)) = data.split_first() else {
        return;
    };
    if mode & 2 != 0 {
        let _ = clat::prefixes_from_answer(packet);
        return;
    }
    let mut c = Clat::new(
        ClatParams::new(Prefix::default(), "2001:db8:1::464".parse().unwrap()),
        1,
    )
    .unwrap();
    let now = Instant::from_millis(u64::from(mode >> 2));
    let o = if mode & 1 == 0 {
        c.translate_6to4(now, packet)
    } else {
        c.translate_4to6(now, packet)
    };
    let s = c.stats();
    assert_eq!(s.translated_6to4 + s.translated_4to6 + s.total_drops(), 1);
    if let Outcome::Forward(b) | Outcome::Reply(b) = o {
        assert!(wire::packet::parse(&b).is_ok());
    }
});
