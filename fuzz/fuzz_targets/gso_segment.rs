#![no_main]
//! Any virtio header and packet through the segmenter: never a panic, and every datagram cut
//! from a super-packet fits its MSS, parses, and carries a transport checksum that verifies.
use libfuzzer_sys::fuzz_target;
use wire::gso::{self, VnetHdr, GSO_ECN, GSO_NONE, VNET_HDR_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(hdr) = VnetHdr::parse(data) else {
        return;
    };
    let mut packet = data[VNET_HDR_LEN..].to_vec();
    let mut scratch = Vec::new();
    let mut out = Vec::new();
    let Ok(n) = gso::segment(&hdr, &mut packet, &mut scratch, |s| out.push(s.to_vec())) else {
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
