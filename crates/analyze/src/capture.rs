//! Streaming readers for pcap and pcapng files, plain or gzip-compressed.
//!
//! [`CaptureReader`] takes any `io::Read`, sniffs the format from the first bytes (gzip
//! `1f 8b`, pcap magic in either byte order and either timestamp unit, pcapng Section Header
//! Block), and hands out one record at a time from a single reused buffer, so memory does not
//! grow with the file. It reports link-layer bytes, the interface and its link type; turning
//! those into IP packets is [`crate::link`]'s job, and nothing here looks inside a packet.
//!
//! Formats: draft-ietf-opsawg-pcap (§4 file header, §5 records) and draft-ietf-opsawg-pcapng
//! (§4.1 SHB, §4.2 IDB with `if_tsresol` and `if_tsoffset`, §4.3 EPB, §4.4 SPB, Appendix A
//! obsolete Packet Block). Errors name the 1-based packet number, counted the way Wireshark
//! numbers frames (packet records only).

use std::fmt;
use std::io::{self, BufRead, BufReader, Read};

use flate2::bufread::MultiGzDecoder;
use wire::Instant;

use crate::model::InterfaceInfo;

/// [`CaptureReader::records`]: anything but a pcap in memory (read through
/// [`CaptureReader::next_packet`]).
pub(crate) const RECORDS_ANY: u8 = 0;
/// [`CaptureReader::records`]: a pcap in memory; bit 1 set for big-endian, bit 0 for
/// nanosecond timestamps.
pub(crate) const RECORDS_PCAP_IN_MEMORY: u8 = 4;

/// Largest record we accept (pcapng's and tcpdump's own ceiling is 256 KiB; leave room).
const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// Headers after the first that [`CaptureReader::pcap_resync`] wants in a row.
const RESYNC_CHAIN: usize = 8;
/// How far [`CaptureReader::pcap_resync`] looks for a record start: beyond the largest record
/// tcpdump writes (256 KiB) and its header.
const MAX_RESYNC_SCAN: usize = 256 * 1024 + 16;

/// Why a capture cannot be read (further).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaptureError {
    /// The first bytes are no capture format we know.
    NotACapture { first_bytes: [u8; 4] },
    /// The file ends inside a header or record. `packet` is the record being read (1-based;
    /// 0 for the file header).
    Truncated { packet: u64 },
    /// A header or record is inconsistent.
    Malformed { packet: u64, why: String },
    /// Reading the input failed (including corrupt gzip data).
    Io { packet: u64, message: String },
}

impl CaptureError {
    /// The 1-based packet number the error is about (0: the file header).
    pub fn packet(&self) -> u64 {
        match self {
            CaptureError::NotACapture { .. } => 0,
            CaptureError::Truncated { packet }
            | CaptureError::Malformed { packet, .. }
            | CaptureError::Io { packet, .. } => *packet,
        }
    }
}

impl CaptureError {
    /// The same error about record `base + n` instead of record `n` (for a part of a file read
    /// by itself, whose records were numbered from 1).
    pub(crate) fn renumbered(self, base: u64) -> CaptureError {
        match self {
            CaptureError::Truncated { packet } if packet > 0 => CaptureError::Truncated {
                packet: packet + base,
            },
            CaptureError::Malformed { packet, why } if packet > 0 => CaptureError::Malformed {
                packet: packet + base,
                why,
            },
            CaptureError::Io { packet, message } if packet > 0 => CaptureError::Io {
                packet: packet + base,
                message,
            },
            e => e,
        }
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::NotACapture { first_bytes: b } => write!(
                f,
                "not a pcap, pcapng or gzip file (starts with {:02x} {:02x} {:02x} {:02x})",
                b[0], b[1], b[2], b[3]
            ),
            CaptureError::Truncated { packet: 0 } => write!(f, "file ends inside its header"),
            CaptureError::Truncated { packet } => write!(f, "file ends inside packet {packet}"),
            CaptureError::Malformed { packet: 0, why } => write!(f, "bad file header: {why}"),
            CaptureError::Malformed { packet, why } => write!(f, "packet {packet}: {why}"),
            CaptureError::Io { packet, message } => {
                write!(f, "read error at packet {packet}: {message}")
            }
        }
    }
}

impl std::error::Error for CaptureError {}

/// One captured record, borrowed from the reader's buffer until the next call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawPacket<'a> {
    /// 1-based record number.
    pub number: u64,
    /// Capture time, nanoseconds since the Unix epoch.
    pub time: Instant,
    /// [`InterfaceInfo::index`] of the interface it was captured on.
    pub interface: u32,
    /// That interface's link type.
    pub linktype: u32,
    /// The captured bytes (possibly cut by the snaplen).
    pub data: &'a [u8],
    /// The packet's length on the wire.
    pub orig_len: u32,
    /// Where `data` starts in the (uncompressed) input: for a reader made by
    /// [`CaptureReader::from_bytes`] over an uncompressed capture, `data` is
    /// `bytes[offset..offset + data.len()]`, so a caller may keep it beyond the next call.
    pub offset: u64,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Format {
    Pcap { big_endian: bool, nanos: bool },
    Pcapng,
}

/// The pcapng per-interface timestamp unit (`if_tsresol`, draft-ietf-opsawg-pcapng §4.2).
#[derive(Copy, Clone, Debug)]
enum TsUnit {
    /// 10^-n seconds.
    Dec(u8),
    /// 2^-n seconds.
    Bin(u8),
}

impl TsUnit {
    fn to_nanos(self, ticks: u64) -> u64 {
        let t = u128::from(ticks);
        let ns = match self {
            TsUnit::Dec(n) if n <= 9 => t * 10u128.pow(u32::from(9 - n)),
            TsUnit::Dec(n) => t / 10u128.pow(u32::from(n - 9).min(38)),
            TsUnit::Bin(n) => (t * 1_000_000_000) >> n.min(127),
        };
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
    fn resolution_ns(self) -> u64 {
        self.to_nanos(1).max(1)
    }
}

#[derive(Clone, Debug)]
struct Iface {
    info: InterfaceInfo,
    unit: TsUnit,
    offset_s: i64,
}

/// A streaming capture reader. See the module documentation.
pub struct CaptureReader<'r> {
    src: Box<dyn BufRead + 'r>,
    /// The whole input, when it is in memory and not compressed: pcap records are then read
    /// straight from it (`src` is only used for the file header).
    whole: Option<&'r [u8]>,
    format: Format,
    gzip: bool,
    buf: Vec<u8>,
    /// Bytes of `src`'s buffer lent out as the last packet, to consume before reading on.
    lent: usize,
    packets: u64,
    ifaces: Vec<Iface>,
    /// First index in `ifaces` of the current pcapng section (interface ids restart per SHB).
    section_base: usize,
    /// Byte order of the current pcapng section.
    ng_big_endian: bool,
    /// Bytes of the (uncompressed) input consumed so far, lent ones included once returned.
    pos: u64,
}

impl<'r> CaptureReader<'r> {
    /// Sniffs the format and reads the file header (and, for pcapng, the first SHB).
    pub fn new<R: Read + 'r>(input: R) -> Result<CaptureReader<'r>, CaptureError> {
        let mut br = BufReader::with_capacity(256 * 1024, input);
        let head = br.fill_buf().map_err(|e| io_err(0, &e))?;
        let gzip = is_gzip(head);
        CaptureReader::start(source(br, gzip), gzip)
    }

    /// A reader over a capture held in memory (a mapped file): records are parsed in place,
    /// without copying the file through a buffer, and each [`RawPacket::offset`] locates its
    /// bytes in `bytes` (unless the capture is gzip-compressed, which is inflated as a stream).
    pub fn from_bytes(bytes: &'r [u8]) -> Result<CaptureReader<'r>, CaptureError> {
        let gzip = is_gzip(bytes);
        // A byte slice is its own buffer: `fill_buf` hands out all that is left.
        let mut r = CaptureReader::start(source(bytes, gzip), gzip)?;
        if !gzip {
            r.whole = Some(bytes);
        }
        Ok(r)
    }

    fn start(src: Box<dyn BufRead + 'r>, gzip: bool) -> Result<CaptureReader<'r>, CaptureError> {
        let mut r = CaptureReader {
            src,
            whole: None,
            format: Format::Pcapng,
            gzip,
            buf: Vec::with_capacity(64 * 1024),
            lent: 0,
            packets: 0,
            ifaces: Vec::new(),
            section_base: 0,
            ng_big_endian: false,
            pos: 0,
        };
        let mut magic = [0u8; 4];
        match r.read_full(&mut magic)? {
            4 => {}
            n => {
                let mut first_bytes = [0u8; 4];
                first_bytes[..n].copy_from_slice(&magic[..n]);
                return Err(if n == 0 {
                    CaptureError::Malformed {
                        packet: 0,
                        why: "empty file".into(),
                    }
                } else {
                    CaptureError::NotACapture { first_bytes }
                });
            }
        }
        let le = u32::from_le_bytes(magic);
        let be = u32::from_be_bytes(magic);
        const US: u32 = wire::pcap::MAGIC_MICROS;
        const NS: u32 = wire::pcap::MAGIC_NANOS;
        r.format = match (le, be) {
            (US, _) => Format::Pcap {
                big_endian: false,
                nanos: false,
            },
            (NS, _) => Format::Pcap {
                big_endian: false,
                nanos: true,
            },
            (_, US) => Format::Pcap {
                big_endian: true,
                nanos: false,
            },
            (_, NS) => Format::Pcap {
                big_endian: true,
                nanos: true,
            },
            (0x0a0d_0d0a, _) => Format::Pcapng,
            _ => return Err(CaptureError::NotACapture { first_bytes: magic }),
        };
        match r.format {
            Format::Pcap { big_endian, nanos } => r.read_pcap_header(big_endian, nanos)?,
            Format::Pcapng => r.read_shb_rest()?,
        }
        Ok(r)
    }

    /// Whether the input is gzip-compressed (then [`RawPacket::offset`] counts inflated bytes).
    pub fn is_gzip(&self) -> bool {
        self.gzip
    }

    /// "pcap" or "pcapng", with " (gzip)" for compressed input.
    pub fn format_name(&self) -> String {
        let f = match self.format {
            Format::Pcap { .. } => "pcap",
            Format::Pcapng => "pcapng",
        };
        if self.gzip {
            format!("{f} (gzip)")
        } else {
            f.to_string()
        }
    }

    /// Interfaces described so far (pcapng may describe more as the file goes on).
    pub fn interfaces(&self) -> Vec<InterfaceInfo> {
        self.ifaces.iter().map(|i| i.info.clone()).collect()
    }

    /// Packets read so far.
    pub fn packets_read(&self) -> u64 {
        self.packets
    }

    /// The next packet record, `Ok(None)` at a clean end of file.
    #[inline]
    pub fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, CaptureError> {
        if self.lent > 0 {
            let n = std::mem::take(&mut self.lent);
            self.pos += n as u64;
            self.src.consume(n);
        }
        match self.format {
            Format::Pcap { big_endian, nanos } => match self.whole {
                Some(whole) => self.next_pcap_in_place(whole, big_endian, nanos),
                None => self.next_pcap(big_endian, nanos),
            },
            Format::Pcapng => self.next_pcapng(),
        }
    }

    /// Where the next record starts in the (uncompressed) input.
    pub(crate) fn position(&self) -> u64 {
        self.pos + self.lent as u64
    }

    /// For a pcap held in memory: a reader of the same file that starts at byte `at`, which
    /// must be where a record starts, numbering the records from there from 1.
    pub(crate) fn pcap_at(&self, at: usize) -> Option<CaptureReader<'r>> {
        let (Format::Pcap { .. }, Some(whole)) = (self.format, self.whole) else {
            return None;
        };
        Some(CaptureReader {
            src: Box::new(&[][..]),
            whole: Some(whole),
            format: self.format,
            gzip: false,
            buf: Vec::new(),
            lent: 0,
            packets: 0,
            ifaces: self.ifaces.clone(),
            section_base: 0,
            ng_big_endian: false,
            pos: at as u64,
        })
    }

    /// For a pcap held in memory: the first offset from `from` on (within the largest record
    /// and a header) where a record plausibly starts: a header whose lengths fit the file's
    /// snapshot length and each other, whose fraction of a second is below one second and
    /// whose time is within a day of `near_secs`, followed by [`RESYNC_CHAIN`] more such
    /// headers, each where the one before ends (or by the end of the file). A guess: the
    /// caller checks it against where the records before it really end.
    pub(crate) fn pcap_resync(&self, from: usize, near_secs: u32) -> Option<usize> {
        let (Format::Pcap { big_endian, nanos }, Some(whole)) = (self.format, self.whole) else {
            return None;
        };
        let snaplen = self.ifaces.first().map_or(0, |i| i.info.snaplen) as usize;
        let limit = if snaplen == 0 {
            MAX_RECORD_BYTES
        } else {
            snaplen.min(MAX_RECORD_BYTES)
        };
        let frac_max = if nanos { 1_000_000_000 } else { 1_000_000 };
        let plausible = |at: usize| -> Option<usize> {
            let h = whole.get(at..at + 16)?;
            let (secs, frac) = (rd32(&h[0..4], big_endian), rd32(&h[4..8], big_endian));
            let (incl, orig) = (rd32(&h[8..12], big_endian), rd32(&h[12..16], big_endian));
            let ok = frac < frac_max
                && secs.abs_diff(near_secs) <= 86_400
                && (incl as usize) <= limit
                && incl <= orig
                && orig as usize <= MAX_RECORD_BYTES;
            ok.then_some(at + 16 + incl as usize)
        };
        let last = from.saturating_add(MAX_RESYNC_SCAN).min(whole.len());
        (from..last).find(|&at| {
            let mut next = at;
            for _ in 0..=RESYNC_CHAIN {
                if next == whole.len() {
                    return true;
                }
                match plausible(next) {
                    Some(n) if n <= whole.len() => next = n,
                    _ => return false,
                }
            }
            true
        })
    }

    /// How the records of this reader lie, for [`CaptureReader::next_fixed`]: one of the
    /// `RECORDS_*` constants, decided once per file.
    pub(crate) fn records(&self) -> u8 {
        match (self.format, self.whole) {
            (Format::Pcap { big_endian, nanos }, Some(_)) => {
                RECORDS_PCAP_IN_MEMORY | u8::from(big_endian) << 1 | u8::from(nanos)
            }
            _ => RECORDS_ANY,
        }
    }

    /// [`CaptureReader::next_packet`] for a reader whose [`CaptureReader::records`] is
    /// `RECORDS`: the same records and errors, with the byte order and timestamp unit of an
    /// in-memory pcap fixed at compile time, so that a loop over the file tests neither per
    /// record.
    #[inline(always)]
    pub(crate) fn next_fixed<const RECORDS: u8>(
        &mut self,
    ) -> Result<Option<RawPacket<'_>>, CaptureError> {
        match (RECORDS & RECORDS_PCAP_IN_MEMORY != 0, self.whole) {
            (true, Some(whole)) => {
                self.next_pcap_in_place(whole, RECORDS & 2 != 0, RECORDS & 1 != 0)
            }
            _ => self.next_packet(),
        }
    }

    /// Reads until `out` is full or the input ends; returns the bytes read.
    fn read_full(&mut self, out: &mut [u8]) -> Result<usize, CaptureError> {
        let mut got = 0;
        while got < out.len() {
            match self.src.read(&mut out[got..]) {
                Ok(0) => break,
                Ok(n) => {
                    got += n;
                    self.pos += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(self.packets + 1, &e)),
            }
        }
        Ok(got)
    }

    fn read_exact_or_truncated(&mut self, out: &mut [u8], packet: u64) -> Result<(), CaptureError> {
        if self.read_full(out)? == out.len() {
            Ok(())
        } else {
            Err(CaptureError::Truncated { packet })
        }
    }

    /// Fills `self.buf` with exactly `n` bytes.
    fn fill_buf_exact(&mut self, n: usize, packet: u64) -> Result<(), CaptureError> {
        self.buf.resize(n, 0);
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.read_exact_or_truncated(&mut buf, packet);
        self.buf = buf;
        r
    }

    // --- pcap (draft-ietf-opsawg-pcap §4, §5) ---

    fn read_pcap_header(&mut self, big_endian: bool, nanos: bool) -> Result<(), CaptureError> {
        let mut h = [0u8; 20];
        self.read_exact_or_truncated(&mut h, 0)?;
        let u32_at = |o: usize| rd32(&h[o..o + 4], big_endian);
        let snaplen = u32_at(12);
        // §4: the low 16 bits are the link type; the upper bits may carry FCS information.
        let linktype = u32_at(16) & 0xffff;
        let unit = if nanos {
            TsUnit::Dec(9)
        } else {
            TsUnit::Dec(6)
        };
        self.ifaces.push(Iface {
            info: InterfaceInfo {
                index: 0,
                linktype,
                name: None,
                snaplen,
                resolution_ns: unit.resolution_ns(),
            },
            unit,
            offset_s: 0,
        });
        Ok(())
    }

    fn next_pcap(
        &mut self,
        big_endian: bool,
        nanos: bool,
    ) -> Result<Option<RawPacket<'_>>, CaptureError> {
        let number = self.packets + 1;
        // Fast path: header and data whole in the reader's buffer are lent out as they are,
        // without a copy (most records; the copy below handles those split by a refill).
        let whole = {
            let avail = self.src.fill_buf().map_err(|e| io_err(number, &e))?;
            avail.len() >= 16 && {
                let incl = rd32(&avail[8..12], big_endian) as usize;
                incl <= MAX_RECORD_BYTES && avail.len() >= 16 + incl
            }
        };
        if whole {
            // The buffer is full already: this second fill_buf does no I/O.
            let avail = self.src.fill_buf().map_err(|e| io_err(number, &e))?;
            let u32_at = |o: usize| rd32(&avail[o..o + 4], big_endian);
            let (secs, frac, incl, orig) = (u32_at(0), u32_at(4), u32_at(8), u32_at(12));
            let incl = incl as usize;
            self.packets = number;
            self.lent = 16 + incl;
            let frac_ns = if nanos {
                u64::from(frac)
            } else {
                u64::from(frac) * 1000
            };
            return Ok(Some(RawPacket {
                number,
                time: Instant::from_nanos(u64::from(secs) * 1_000_000_000 + frac_ns),
                interface: 0,
                linktype: self.ifaces[0].info.linktype,
                data: &avail[16..16 + incl],
                orig_len: orig,
                offset: self.pos + 16,
            }));
        }
        let mut h = [0u8; 16];
        match self.read_full(&mut h)? {
            0 => return Ok(None),
            16 => {}
            _ => return Err(CaptureError::Truncated { packet: number }),
        }
        let u32_at = |o: usize| rd32(&h[o..o + 4], big_endian);
        let (secs, frac, incl, orig) = (u32_at(0), u32_at(4), u32_at(8), u32_at(12));
        let incl = incl as usize;
        if incl > MAX_RECORD_BYTES {
            return Err(CaptureError::Malformed {
                packet: number,
                why: format!("record claims {incl} captured bytes (limit {MAX_RECORD_BYTES})"),
            });
        }
        let offset = self.pos;
        self.fill_buf_exact(incl, number)?;
        self.packets = number;
        let frac_ns = if nanos {
            u64::from(frac)
        } else {
            u64::from(frac) * 1000
        };
        let time = Instant::from_nanos(u64::from(secs) * 1_000_000_000 + frac_ns);
        Ok(Some(RawPacket {
            number,
            time,
            interface: 0,
            linktype: self.ifaces[0].info.linktype,
            data: &self.buf,
            orig_len: orig,
            offset,
        }))
    }

    /// [`CaptureReader::next_pcap`] on an input in memory: the same records and errors, read
    /// at `self.pos` without going through `src`. Always inlined: [`CaptureReader::next_fixed`]
    /// fixes its byte order and timestamp unit in each loop that calls it.
    #[inline(always)]
    fn next_pcap_in_place(
        &mut self,
        whole: &'r [u8],
        big_endian: bool,
        nanos: bool,
    ) -> Result<Option<RawPacket<'r>>, CaptureError> {
        let number = self.packets + 1;
        let at = usize::try_from(self.pos).unwrap_or(usize::MAX);
        let rest = whole.get(at..).unwrap_or(&[]);
        if rest.is_empty() {
            return Ok(None);
        }
        let Some(h) = rest.first_chunk::<16>() else {
            return Err(CaptureError::Truncated { packet: number });
        };
        // Four fields read from an array (no bounds checks) in the file's byte order.
        let u32_at = |o: usize| {
            let b = [h[o], h[o + 1], h[o + 2], h[o + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let (secs, frac, incl, orig) = (u32_at(0), u32_at(4), u32_at(8), u32_at(12));
        let incl = incl as usize;
        if incl > MAX_RECORD_BYTES {
            return Err(CaptureError::Malformed {
                packet: number,
                why: format!("record claims {incl} captured bytes (limit {MAX_RECORD_BYTES})"),
            });
        }
        let Some(data) = rest.get(16..16 + incl) else {
            return Err(CaptureError::Truncated { packet: number });
        };
        self.packets = number;
        self.pos += (16 + incl) as u64;
        let frac_ns = if nanos {
            u64::from(frac)
        } else {
            u64::from(frac) * 1000
        };
        Ok(Some(RawPacket {
            number,
            time: Instant::from_nanos(u64::from(secs) * 1_000_000_000 + frac_ns),
            interface: 0,
            linktype: self.ifaces[0].info.linktype,
            data,
            orig_len: orig,
            offset: (at + 16) as u64,
        }))
    }

    // --- pcapng (draft-ietf-opsawg-pcapng §3, §4) ---

    /// Reads the rest of a Section Header Block whose type word was already read: length,
    /// byte-order magic, and skips the body.
    fn read_shb_rest(&mut self) -> Result<(), CaptureError> {
        let number = self.packets;
        let mut h = [0u8; 8];
        self.read_exact_or_truncated(&mut h, number)?;
        let big_endian = match u32::from_le_bytes([h[4], h[5], h[6], h[7]]) {
            0x1a2b_3c4d => false,
            0x4d3c_2b1a => true,
            m => {
                return Err(CaptureError::Malformed {
                    packet: number,
                    why: format!("section header has byte-order magic {m:#010x}"),
                })
            }
        };
        let total = rd32(&h[0..4], big_endian) as usize;
        if total < 28 || total & 3 != 0 || total > MAX_RECORD_BYTES {
            return Err(CaptureError::Malformed {
                packet: number,
                why: format!("section header block length {total}"),
            });
        }
        self.ng_big_endian = big_endian;
        self.section_base = self.ifaces.len();
        // Body after the 12 bytes read (type, length, magic): version, section length,
        // options, trailing length.
        self.fill_buf_exact(total - 12, number)?;
        Ok(())
    }

    fn next_pcapng(&mut self) -> Result<Option<RawPacket<'_>>, CaptureError> {
        loop {
            let number = self.packets + 1;
            let mut h = [0u8; 8];
            match self.read_full(&mut h[..4])? {
                0 => return Ok(None),
                4 => {}
                _ => return Err(CaptureError::Truncated { packet: number }),
            }
            if u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == 0x0a0d_0d0a {
                self.read_shb_rest()?;
                continue;
            }
            self.read_exact_or_truncated(&mut h[4..8], number)?;
            let be = self.ng_big_endian;
            let btype = rd32(&h[0..4], be);
            let total = rd32(&h[4..8], be) as usize;
            if total < 12 || total & 3 != 0 || total > MAX_RECORD_BYTES {
                return Err(CaptureError::Malformed {
                    packet: number,
                    why: format!("block of type {btype:#x} has length {total}"),
                });
            }
            // Body plus the trailing length word.
            let body_at = self.pos;
            self.fill_buf_exact(total - 8, number)?;
            let body_len = total - 12;
            match btype {
                1 => self.parse_idb(body_len, number)?,
                // Enhanced Packet Block (§4.3) and the obsolete Packet Block (Appendix A).
                6 | 2 => {
                    let b = &self.buf[..body_len];
                    if b.len() < 20 {
                        return Err(bad(number, "packet block shorter than its header"));
                    }
                    let iface = if btype == 6 {
                        rd32(&b[0..4], be)
                    } else {
                        u32::from(rd16(&b[0..2], be))
                    };
                    let ticks =
                        (u64::from(rd32(&b[4..8], be)) << 32) | u64::from(rd32(&b[8..12], be));
                    let caplen = rd32(&b[12..16], be) as usize;
                    let orig = rd32(&b[16..20], be);
                    if caplen > b.len() - 20 {
                        return Err(bad(
                            number,
                            &format!("captured length {caplen} exceeds its block"),
                        ));
                    }
                    return self.emit_ng(number, iface, ticks, (body_at, 20), caplen, orig);
                }
                // Simple Packet Block (§4.4): interface 0, no timestamp.
                3 => {
                    let b = &self.buf[..body_len];
                    if b.len() < 4 {
                        return Err(bad(number, "simple packet block shorter than its header"));
                    }
                    let orig = rd32(&b[0..4], be);
                    let caplen = (orig as usize).min(b.len() - 4);
                    return self.emit_ng(number, 0, 0, (body_at, 4), caplen, orig);
                }
                // Name resolution, statistics, custom and other blocks carry no packets.
                _ => {}
            }
        }
    }

    fn emit_ng(
        &mut self,
        number: u64,
        local_iface: u32,
        ticks: u64,
        (body_at, data_off): (u64, usize),
        caplen: usize,
        orig: u32,
    ) -> Result<Option<RawPacket<'_>>, CaptureError> {
        let idx = self.section_base + local_iface as usize;
        let Some(iface) = self.ifaces.get(idx) else {
            return Err(bad(
                number,
                &format!("refers to interface {local_iface}, which no interface block described"),
            ));
        };
        let ns = iface.unit.to_nanos(ticks) as i128 + i128::from(iface.offset_s) * 1_000_000_000;
        let time = Instant::from_nanos(u64::try_from(ns.max(0)).unwrap_or(u64::MAX));
        self.packets = number;
        Ok(Some(RawPacket {
            number,
            time,
            interface: iface.info.index,
            linktype: iface.info.linktype,
            data: &self.buf[data_off..data_off + caplen],
            orig_len: orig,
            offset: body_at + data_off as u64,
        }))
    }

    /// Interface Description Block (§4.2): link type, snaplen, options.
    fn parse_idb(&mut self, body_len: usize, number: u64) -> Result<(), CaptureError> {
        let be = self.ng_big_endian;
        let b = &self.buf[..body_len];
        if b.len() < 8 {
            return Err(bad(number, "interface block shorter than its header"));
        }
        let linktype = u32::from(rd16(&b[0..2], be));
        let snaplen = rd32(&b[4..8], be);
        let mut unit = TsUnit::Dec(6);
        let mut offset_s = 0i64;
        let mut name = None;
        let mut opts = &b[8..];
        // Options (§3.5): code u16, length u16, value padded to 4 bytes; opt_endofopt ends.
        while opts.len() >= 4 {
            let code = rd16(&opts[0..2], be);
            let len = usize::from(rd16(&opts[2..4], be));
            let padded = (len + 3) & !3;
            if code == 0 || opts.len() < 4 + len {
                break;
            }
            let v = &opts[4..4 + len];
            match (code, len) {
                (2, _) => {
                    name = Some(
                        String::from_utf8_lossy(v)
                            .trim_end_matches('\0')
                            .to_string(),
                    )
                }
                (9, 1) => {
                    unit = if v[0] & 0x80 == 0 {
                        TsUnit::Dec(v[0])
                    } else {
                        TsUnit::Bin(v[0] & 0x7f)
                    }
                }
                (14, 8) => {
                    let x = if be {
                        i64::from_be_bytes(v.try_into().unwrap_or([0; 8]))
                    } else {
                        i64::from_le_bytes(v.try_into().unwrap_or([0; 8]))
                    };
                    offset_s = x;
                }
                _ => {}
            }
            opts = opts.get(4 + padded..).unwrap_or(&[]);
        }
        let index = self.ifaces.len() as u32;
        self.ifaces.push(Iface {
            info: InterfaceInfo {
                index,
                linktype,
                name,
                snaplen,
                resolution_ns: unit.resolution_ns(),
            },
            unit,
            offset_s,
        });
        Ok(())
    }
}

/// `input` as a reader's source, inflated when it is gzip.
fn source<'r, B: BufRead + 'r>(input: B, gzip: bool) -> Box<dyn BufRead + 'r> {
    if gzip {
        Box::new(BufReader::with_capacity(
            256 * 1024,
            MultiGzDecoder::new(input),
        ))
    } else {
        Box::new(input)
    }
}

/// Whether bytes start like a gzip stream (RFC 1952 §2.3.1: ID1 0x1f, ID2 0x8b).
pub fn is_gzip(head: &[u8]) -> bool {
    head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b
}

/// Calls `f` with the capture time and the bytes of every IP datagram of a capture, in file
/// order, for readers that want only the IP layer. Records of other protocols (ARP, LLDP) and
/// records whose link header does not read are passed over; a capture that does not read is an
/// error.
pub fn for_each_ip_packet<R: Read>(
    input: R,
    mut f: impl FnMut(Instant, &[u8]),
) -> Result<(), CaptureError> {
    let mut r = CaptureReader::new(input)?;
    while let Some(p) = r.next_packet()? {
        if let Ok(Some(ip)) = crate::link::ip_payload(p.linktype, p.data) {
            f(p.time, ip);
        }
    }
    Ok(())
}

fn rd32(b: &[u8], big_endian: bool) -> u32 {
    let a = [b[0], b[1], b[2], b[3]];
    if big_endian {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

fn rd16(b: &[u8], big_endian: bool) -> u16 {
    if big_endian {
        u16::from_be_bytes([b[0], b[1]])
    } else {
        u16::from_le_bytes([b[0], b[1]])
    }
}

fn bad(packet: u64, why: &str) -> CaptureError {
    CaptureError::Malformed {
        packet,
        why: why.to_string(),
    }
}

fn io_err(packet: u64, e: &io::Error) -> CaptureError {
    CaptureError::Io {
        packet,
        message: e.to_string().to_lowercase(),
    }
}

/// Writers used by this crate's tests (and the bench generator) for the variants
/// `wire::pcap::PcapWriter` does not write: microsecond and big-endian pcap, pcapng.
pub mod testwrite {
    /// A pcapng Section Header Block, little- or big-endian.
    pub fn shb(big_endian: bool) -> Vec<u8> {
        let mut b = Vec::new();
        let w32 = |b: &mut Vec<u8>, v: u32| {
            b.extend_from_slice(&if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            })
        };
        b.extend_from_slice(&0x0a0d_0d0au32.to_le_bytes());
        w32(&mut b, 28);
        w32(&mut b, 0x1a2b_3c4d);
        let v = if big_endian {
            [0, 1, 0, 0]
        } else {
            [1, 0, 0, 0]
        };
        b.extend_from_slice(&v);
        b.extend_from_slice(&[0xff; 8]); // section length: unknown
        w32(&mut b, 28);
        b
    }

    /// An Interface Description Block with a link type, an `if_tsresol` (raw option byte)
    /// and an optional name.
    pub fn idb(big_endian: bool, linktype: u16, tsresol: u8, name: Option<&str>) -> Vec<u8> {
        let mut body = Vec::new();
        let w16 = |b: &mut Vec<u8>, v: u16| {
            b.extend_from_slice(&if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            })
        };
        let w32 = |b: &mut Vec<u8>, v: u32| {
            b.extend_from_slice(&if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            })
        };
        w16(&mut body, linktype);
        w16(&mut body, 0);
        w32(&mut body, 262_144);
        if let Some(n) = name {
            w16(&mut body, 2);
            w16(&mut body, n.len() as u16);
            body.extend_from_slice(n.as_bytes());
            while body.len() % 4 != 0 {
                body.push(0);
            }
        }
        w16(&mut body, 9);
        w16(&mut body, 1);
        body.extend_from_slice(&[tsresol, 0, 0, 0]);
        w16(&mut body, 0);
        w16(&mut body, 0);
        block(big_endian, 1, &body)
    }

    /// An Enhanced Packet Block: interface, timestamp in the interface's ticks, data.
    pub fn epb(big_endian: bool, iface: u32, ticks: u64, data: &[u8], orig_len: u32) -> Vec<u8> {
        let mut body = Vec::new();
        let w32 = |b: &mut Vec<u8>, v: u32| {
            b.extend_from_slice(&if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            })
        };
        w32(&mut body, iface);
        w32(&mut body, (ticks >> 32) as u32);
        w32(&mut body, ticks as u32);
        w32(&mut body, data.len() as u32);
        w32(&mut body, orig_len);
        body.extend_from_slice(data);
        while body.len() % 4 != 0 {
            body.push(0);
        }
        block(big_endian, 6, &body)
    }

    fn block(big_endian: bool, btype: u32, body: &[u8]) -> Vec<u8> {
        let total = (12 + body.len()) as u32;
        let w = |v: u32| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut b = Vec::new();
        b.extend_from_slice(&w(btype));
        b.extend_from_slice(&w(total));
        b.extend_from_slice(body);
        b.extend_from_slice(&w(total));
        b
    }

    /// A classic pcap file header: byte order and timestamp unit of choice.
    pub fn pcap_header(big_endian: bool, nanos: bool, linktype: u32) -> Vec<u8> {
        let magic = if nanos {
            wire::pcap::MAGIC_NANOS
        } else {
            wire::pcap::MAGIC_MICROS
        };
        let w32 = |v: u32| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut b = Vec::new();
        b.extend_from_slice(&w32(magic));
        b.extend_from_slice(&w16(2));
        b.extend_from_slice(&w16(4));
        b.extend_from_slice(&w32(0));
        b.extend_from_slice(&w32(0));
        b.extend_from_slice(&w32(65535));
        b.extend_from_slice(&w32(linktype));
        b
    }

    /// A classic pcap record; `frac` in the file's unit.
    pub fn pcap_record(big_endian: bool, secs: u32, frac: u32, data: &[u8]) -> Vec<u8> {
        let w32 = |v: u32| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut b = Vec::new();
        b.extend_from_slice(&w32(secs));
        b.extend_from_slice(&w32(frac));
        b.extend_from_slice(&w32(data.len() as u32));
        b.extend_from_slice(&w32(data.len() as u32));
        b.extend_from_slice(data);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::testwrite::*;
    use super::*;

    /// (number, time ns, interface, link type, bytes) of each record.
    type Rec = (u64, u64, u32, u32, Vec<u8>);

    fn rec(p: &RawPacket<'_>) -> Rec {
        (
            p.number,
            p.time.as_nanos(),
            p.interface,
            p.linktype,
            p.data.to_vec(),
        )
    }

    fn all(bytes: &[u8]) -> Result<Vec<Rec>, CaptureError> {
        let mut r = CaptureReader::new(bytes)?;
        let mut out = Vec::new();
        while let Some(p) = r.next_packet()? {
            out.push(rec(&p));
        }
        Ok(out)
    }

    /// [`all`] through the in-place reader, checking each record's offset on the way.
    fn all_in_place(bytes: &[u8]) -> Result<Vec<Rec>, CaptureError> {
        let mut r = CaptureReader::from_bytes(bytes)?;
        let mut out = Vec::new();
        while let Some(p) = r.next_packet()? {
            let at = p.offset as usize;
            assert_eq!(bytes.get(at..at + p.data.len()), Some(p.data));
            out.push(rec(&p));
        }
        Ok(out)
    }

    /// [`all`] through [`CaptureReader::next_fixed`] with the layout the reader reports.
    fn all_fixed(bytes: &[u8]) -> Result<Vec<Rec>, CaptureError> {
        fn walk<const RECORDS: u8>(mut r: CaptureReader<'_>) -> Result<Vec<Rec>, CaptureError> {
            let mut out = Vec::new();
            while let Some(p) = r.next_fixed::<RECORDS>()? {
                out.push(rec(&p));
            }
            Ok(out)
        }
        let r = CaptureReader::from_bytes(bytes)?;
        match r.records() {
            4 => walk::<4>(r),
            5 => walk::<5>(r),
            6 => walk::<6>(r),
            7 => walk::<7>(r),
            _ => walk::<RECORDS_ANY>(r),
        }
    }

    #[test]
    fn records_read_with_the_layout_fixed_are_those_of_the_general_reader() {
        for be in [false, true] {
            for nanos in [false, true] {
                let mut f = pcap_header(be, nanos, 1);
                f.extend(pcap_record(be, 1, 2, &[0x45, 1, 2, 3]));
                f.extend(pcap_record(be, 7, 999, &[]));
                f.extend(pcap_record(be, 9, 4, &[0x60; 9]));
                let layout = CaptureReader::from_bytes(&f).unwrap().records();
                let expected = RECORDS_PCAP_IN_MEMORY | u8::from(be) << 1 | u8::from(nanos);
                assert_eq!(layout, expected);
                for cut in 0..=f.len() {
                    assert_eq!(all_fixed(&f[..cut]), all(&f[..cut]), "cut at {cut}");
                }
            }
        }
        let mut ng = shb(false);
        ng.extend(idb(false, 1, 6, None));
        ng.extend(epb(false, 0, 5, &[7; 5], 5));
        assert_eq!(
            CaptureReader::from_bytes(&ng).unwrap().records(),
            RECORDS_ANY
        );
        assert_eq!(all_fixed(&ng), all(&ng));
    }

    #[test]
    fn pcap_in_both_byte_orders_and_both_units_gives_the_same_times() {
        for be in [false, true] {
            for nanos in [false, true] {
                let mut f = pcap_header(be, nanos, 101);
                let frac = if nanos { 250_000_000 } else { 250_000 };
                f.extend(pcap_record(be, 1_700_000_000, frac, &[0x45, 1, 2]));
                let got = all(&f).unwrap();
                assert_eq!(got.len(), 1, "be={be} nanos={nanos}");
                assert_eq!(got[0].1, 1_700_000_000_250_000_000);
                assert_eq!(got[0].3, 101);
                assert_eq!(got[0].4, vec![0x45, 1, 2]);
            }
        }
    }

    #[test]
    fn wire_pcap_writer_output_reads_back() {
        let mut w = wire::pcap::PcapWriter::new(Vec::new()).unwrap();
        w.write(5, &[0x60, 0, 0, 0]).unwrap();
        w.write(7, &[0x45]).unwrap();
        let got = all(&w.into_inner()).unwrap();
        assert_eq!(got.iter().map(|p| p.1).collect::<Vec<_>>(), vec![5, 7]);
        assert_eq!(got[1].0, 2);
    }

    #[test]
    fn pcapng_sections_and_interfaces_keep_their_own_link_type_and_resolution() {
        for be in [false, true] {
            let mut f = shb(be);
            f.extend(idb(be, 101, 6, Some("eth0")));
            f.extend(idb(be, 1, 9, None));
            f.extend(epb(be, 0, 1_000_000, &[1], 1));
            f.extend(epb(be, 1, 2_000_000_000, &[2], 1));
            // A second section: interface ids restart at 0.
            f.extend(shb(be));
            f.extend(idb(be, 113, 0x80 | 10, None)); // 2^-10 s ticks
            f.extend(epb(be, 0, 1024, &[3], 1));
            let mut r = CaptureReader::new(&f[..]).unwrap();
            let mut got = Vec::new();
            while let Some(p) = r.next_packet().unwrap() {
                got.push((p.number, p.time.as_nanos(), p.interface, p.linktype));
            }
            assert_eq!(
                got,
                vec![
                    (1, 1_000_000_000, 0, 101),
                    (2, 2_000_000_000, 1, 1),
                    (3, 1_000_000_000, 2, 113)
                ]
            );
            let ifs = r.interfaces();
            assert_eq!(ifs[0].name.as_deref(), Some("eth0"));
            assert_eq!(ifs[0].resolution_ns, 1000);
            assert_eq!(ifs[1].resolution_ns, 1);
        }
    }

    #[test]
    fn gzip_input_is_detected_and_inflated() {
        use std::io::Write;
        let mut f = pcap_header(false, true, 101);
        f.extend(pcap_record(false, 1, 2, &[0x45, 9]));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&f).unwrap();
        let z = gz.finish().unwrap();
        let r = CaptureReader::new(&z[..]).unwrap();
        assert_eq!(r.format_name(), "pcap (gzip)");
        assert_eq!(all(&z).unwrap()[0].4, vec![0x45, 9]);
    }

    #[test]
    fn a_record_cut_short_names_its_packet_number() {
        let mut f = pcap_header(false, true, 101);
        f.extend(pcap_record(false, 1, 2, &[0x45; 40]));
        f.extend(pcap_record(false, 1, 3, &[0x45; 40]));
        f.truncate(f.len() - 10);
        let err = all(&f).unwrap_err();
        assert_eq!(err, CaptureError::Truncated { packet: 2 });
        assert!(err.to_string().contains("packet 2"), "{err}");
    }

    #[test]
    fn garbage_and_absurd_lengths_are_errors_not_panics() {
        assert!(matches!(
            all(b"hello world"),
            Err(CaptureError::NotACapture { .. })
        ));
        let mut f = pcap_header(false, true, 101);
        let mut rec = pcap_record(false, 1, 2, &[]);
        rec[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        f.extend(rec);
        let e = all(&f).unwrap_err();
        assert!(e.to_string().starts_with("packet 1:"), "{e}");
        let mut g = shb(false);
        g.extend(epb(false, 3, 0, &[1], 1));
        let e = all(&g).unwrap_err();
        assert!(e.to_string().contains("interface 3"), "{e}");
    }

    #[test]
    fn records_read_in_place_are_where_their_offset_says_and_match_the_stream() {
        let mut pcap = pcap_header(true, false, 101);
        pcap.extend(pcap_record(true, 1, 2, &[0x45, 1, 2, 3]));
        pcap.extend(pcap_record(true, 1, 3, &[]));
        pcap.extend(pcap_record(true, 1, 4, &[0x60; 9]));
        let mut ng = shb(false);
        ng.extend(idb(false, 1, 6, None));
        ng.extend(epb(false, 0, 5, &[7; 5], 5));
        ng.extend(shb(false));
        ng.extend(idb(false, 101, 9, None));
        ng.extend(epb(false, 0, 6, &[8; 3], 3));
        for f in [pcap, ng] {
            let got = all_in_place(&f).unwrap();
            assert!(got.len() >= 2, "{got:?}");
            assert_eq!(got, all(&f).unwrap());
            // Cut anywhere: the same records and the same error.
            for cut in 0..f.len() {
                assert_eq!(all_in_place(&f[..cut]), all(&f[..cut]), "cut at {cut}");
            }
        }
        let empty = CaptureReader::from_bytes(&[]).err().unwrap();
        assert_eq!(empty.to_string(), "bad file header: empty file");
    }

    proptest::proptest! {
        #[test]
        fn no_bytes_make_the_reader_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
                                           head in 0usize..3) {
            // Prefix a valid header now and then so the record parsers get exercised too.
            let mut f = match head {
                0 => pcap_header(false, true, 1),
                1 => { let mut s = shb(false); s.extend(idb(false, 1, 6, None)); s }
                _ => Vec::new(),
            };
            f.extend(data);
            // In place: the same records and errors, each where its offset says.
            proptest::prop_assert_eq!(all_in_place(&f), all(&f));
            proptest::prop_assert_eq!(all_fixed(&f), all(&f));
        }
    }

    #[test]
    fn for_each_ip_packet_gives_the_ip_datagrams_and_passes_over_the_rest() {
        let ip = wire::build::Ip::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into()).udp(1, 2, b"x");
        let frame = |ethertype: [u8; 2], body: &[u8]| {
            let mut f = vec![0u8; 12];
            f.extend_from_slice(&ethertype);
            f.extend_from_slice(body);
            f
        };
        let mut cap = pcap_header(false, true, 1);
        cap.extend(pcap_record(false, 1, 5, &frame([0x08, 0x00], &ip)));
        cap.extend(pcap_record(false, 2, 0, &frame([0x08, 0x06], &[0; 28])));
        cap.extend(pcap_record(false, 3, 7, &frame([0x08, 0x00], &ip)));
        let mut got = Vec::new();
        for_each_ip_packet(&cap[..], |t, p| got.push((t.as_nanos(), p.to_vec()))).unwrap();
        assert_eq!(got, vec![(1_000_000_005, ip.clone()), (3_000_000_007, ip)]);
        assert!(for_each_ip_packet(&b"not a capture"[..], |_, _| {}).is_err());
    }
}
