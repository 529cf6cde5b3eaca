#![no_main]
//! Any virtio header and packet through the segmenter: never a panic, and every datagram cut
//! from a super-packet fits its MSS, parses, and carries a transport checksum that verifies. A
//! super-packet that may cross the lab whole is cut into as many datagrams, of as many bytes,
//! as it says it stands for.
use libfuzzer_sys::fuzz_target;
use wire::gso::{self, VnetHdr, GSO_ECN, GSO_NONE, VNET_HDR_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(hdr) = VnetHdr::parse(data) else {
        return;
    };
    let mut packet = data[VNET_HDR_LEN..].to_vec();
    let whole = gso::Whole::of(&hdr, &packet);
    let len = packet.len();
    let mut scratch = Vec::new();
    let mut out = Vec::new();
    let cut = gso::segment(&hdr, &mut packet, &mut scratch, |s| out.push(s.to_vec()));
    if let Some(w) = whole {
        assert!(cut.is_ok(), "a whole super-packet that cannot be cut: {cut:?}");
        assert_eq!(w.segments as usize, out.len());
        let bytes: usize = out.iter().map(Vec::len).sum();
        assert_eq!(w.wire_bytes(len), bytes as u64);
    }
    let Ok(n) = cut else {
        return;
    };
    assert_eq!(n, out.len());
    if hdr.gso_type & !GSO_ECN == GSO_NONE {
        return;
    }
    let l4 = usize::from(hdr.csum_start);
    for s in &out {
        assert!(s.len() <= l4 + 60 + usize::from(hdr.gso_size));
        let proto = if hdr.gso_type & !GSO_ECN == gso::GSO_UDP_L4 { 17 } else { 6 };
        assert!(gso::transport_checksum_ok(s, l4, proto), "{s:?}");
    }
});
