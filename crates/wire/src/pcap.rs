//! The classic pcap file format, written with nanosecond timestamps.
//!
//! Format: the "PCAP Capture File Format" draft (draft-ietf-opsawg-pcap), §4 file header and
//! §5 packet record. The magic 0xA1B23C4D says the sub-second field is nanoseconds. Link type
//! 101, LINKTYPE_RAW, means each record starts at an IPv4 or IPv6 header, which is exactly what a
//! TUN device carries. tcpdump, tshark and Wireshark read these files.

use std::io::{self, Write};

/// Nanosecond-resolution pcap magic number (draft-ietf-opsawg-pcap §4).
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Microsecond-resolution magic, for readers.
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// LINKTYPE_RAW: raw IPv4/IPv6, no link-layer header.
pub const LINKTYPE_RAW: u32 = 101;
/// The snapshot length we declare: whole packets up to 256 KiB.
pub const SNAPLEN: u32 = 262_144;

/// The 24-byte file header (§4) of a capture with nanosecond timestamps.
pub fn file_header(linktype: u32, snaplen: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    // thiszone and sigfigs stay zero.
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&linktype.to_le_bytes());
    h
}

/// The 16-byte header (§5) of a record of `incl_len` bytes captured at `unix_ns` from a packet
/// of `orig_len` bytes.
pub fn record_header(unix_ns: u64, incl_len: usize, orig_len: usize) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[0..4].copy_from_slice(&((unix_ns / 1_000_000_000) as u32).to_le_bytes());
    r[4..8].copy_from_slice(&((unix_ns % 1_000_000_000) as u32).to_le_bytes());
    r[8..12].copy_from_slice(&(incl_len as u32).to_le_bytes());
    r[12..16].copy_from_slice(&(orig_len.max(incl_len) as u32).to_le_bytes());
    r
}

/// Writes a pcap stream, one record per [`PcapWriter::write`].
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header for LINKTYPE_RAW captures of whole packets.
    pub fn new(out: W) -> io::Result<PcapWriter<W>> {
        PcapWriter::with_linktype(out, LINKTYPE_RAW, SNAPLEN)
    }

    /// Writes the file header for another link type or snapshot length (tests of readers).
    pub fn with_linktype(mut out: W, linktype: u32, snaplen: u32) -> io::Result<PcapWriter<W>> {
        out.write_all(&file_header(linktype, snaplen))?;
        Ok(PcapWriter { out, snaplen })
    }

    /// Writes one record: `unix_ns` is the capture time in nanoseconds since the Unix epoch,
    /// `data` the packet, cut at the snapshot length; the original length is recorded.
    pub fn write(&mut self, unix_ns: u64, data: &[u8]) -> io::Result<()> {
        self.write_truncated(unix_ns, data, data.len())
    }

    /// Like [`PcapWriter::write`] when `data` is already a cut of a packet of `orig_len` bytes.
    pub fn write_truncated(
        &mut self,
        unix_ns: u64,
        data: &[u8],
        orig_len: usize,
    ) -> io::Result<()> {
        let incl = data.len().min(self.snaplen as usize);
        self.out
            .write_all(&record_header(unix_ns, incl, orig_len))?;
        self.out.write_all(&data[..incl])
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_record_layout_are_as_specified() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write(1_700_000_000_123_456_789, &[0x45, 0, 0, 20])
            .unwrap();
        let b = w.into_inner();
        assert_eq!(&b[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 101);
        assert_eq!(
            u32::from_le_bytes(b[24..28].try_into().unwrap()),
            1_700_000_000
        );
        assert_eq!(
            u32::from_le_bytes(b[28..32].try_into().unwrap()),
            123_456_789
        );
        assert_eq!(u32::from_le_bytes(b[32..36].try_into().unwrap()), 4);
        assert_eq!(&b[40..], &[0x45, 0, 0, 20]);
    }

    #[test]
    fn records_are_cut_at_the_snaplen_but_keep_the_original_length() {
        let mut w = PcapWriter::with_linktype(Vec::new(), LINKTYPE_RAW, 8).unwrap();
        w.write(0, &[1u8; 20]).unwrap();
        let b = w.into_inner();
        assert_eq!(u32::from_le_bytes(b[32..36].try_into().unwrap()), 8);
        assert_eq!(u32::from_le_bytes(b[36..40].try_into().unwrap()), 20);
        assert_eq!(b.len(), 24 + 16 + 8);
    }
}
