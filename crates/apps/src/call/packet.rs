//! The call's three datagram kinds, parsed with checks (bytes from the network are untrusted)
//! and emitted into buffers. All integers are big-endian.
//!
//! ```text
//! media    (28-byte header, then zero padding to the packet size)
//!   0  'M'   1 version=2   2 flags (bit 0: keyframe)   3 zero
//!   4  seq u64            per-sender packet sequence number, from 0
//!   12 frame u32          frame number
//!   16 index u16          packet index within the frame
//!   18 count u16          packets in the frame
//!   20 send_ns u64        sender's clock at sending, echoed back for the RTT
//! feedback (76 bytes + 12 per echo)
//!   0  'F'   1 version=2   2 flags (bit 0: ECN counts present)   3 echoes n (≤ 64)
//!   4  fb_seq u64         feedback sequence number (stale feedback is ignored)
//!   12 received u64, 20 received_bytes u64, 28 lost u64,
//!   36 not_ect u64, 44 ect1 u64, 52 ect0 u64, 60 ce u64        (cumulative)
//!   68 rx_ns u64          the receiver's clock when it made this feedback
//!   76 n × { send_ns u64, hold_us u32 }   one per media packet received since the last
//!                                          feedback: its send_ns and how long the
//!                                          receiver held it before this feedback
//! bye      'B' 2         the peer is leaving
//! pli      'P' 2 0 0, then request u64: a picture-loss indication (RFC 4585 §6.3.1): the
//!          receiver's picture is frozen and it asks for a keyframe; `request` numbers them
//! ```
//!
//! The echo list gives an RTT sample per media packet (RFC 8888 reports every packet's arrival
//! for the same reason): `rtt = now − send_ns − hold`, and each packet's arrival time on the
//! receiver's clock, `rx_ns − hold`, which a delay-based controller compares with the send
//! times (as WebRTC's transport-wide feedback does). This module does not count anything.

use std::fmt;

use congestion::EcnCounts;

pub const VERSION: u8 = 2;
pub const MEDIA_HEADER_LEN: usize = 28;
pub const FEEDBACK_FIXED_LEN: usize = 76;
pub const ECHO_LEN: usize = 12;
pub const PLI_LEN: usize = 12;
/// Most echoes in one feedback; a receiver with more pending keeps the newest.
pub const MAX_ECHOES: usize = 64;

/// A media packet's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Media {
    pub keyframe: bool,
    pub seq: u64,
    pub frame: u32,
    pub index: u16,
    pub count: u16,
    pub send_ns: u64,
}

/// One echoed media packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Echo {
    pub send_ns: u64,
    pub hold_us: u32,
}

/// A feedback packet: cumulative counts and the echoes.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FeedbackPacket {
    pub fb_seq: u64,
    pub received: u64,
    pub received_bytes: u64,
    pub lost: u64,
    /// `None` when the receiver does not report ECN.
    pub ecn: Option<EcnCounts>,
    /// The receiver's clock, ns, when it made this feedback.
    pub rx_ns: u64,
    pub echoes: Vec<Echo>,
}

/// Any datagram of the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    Media(Media),
    Feedback(FeedbackPacket),
    /// A picture-loss indication: the peer wants a keyframe. Its number, from 1.
    Pli(u64),
    Bye,
}

/// Why a datagram was not understood.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketError {
    Truncated,
    UnknownKind(u8),
    Version(u8),
    BadFrame,
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketError::Truncated => f.write_str("truncated call packet"),
            PacketError::UnknownKind(k) => write!(f, "unknown call packet kind {k:#04x}"),
            PacketError::Version(v) => write!(f, "unsupported call packet version {v}"),
            PacketError::BadFrame => f.write_str("packet index beyond its frame's count"),
        }
    }
}

impl std::error::Error for PacketError {}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl Packet {
    /// Parses a datagram; every length is checked before it is read.
    pub fn parse(b: &[u8]) -> Result<Packet, PacketError> {
        if b.len() < 2 {
            return Err(PacketError::Truncated);
        }
        if b[1] != VERSION {
            return Err(PacketError::Version(b[1]));
        }
        match b[0] {
            b'M' => {
                if b.len() < MEDIA_HEADER_LEN {
                    return Err(PacketError::Truncated);
                }
                let m = Media {
                    keyframe: b[2] & 1 != 0,
                    seq: u64_at(b, 4),
                    frame: u32_at(b, 12),
                    index: u16_at(b, 16),
                    count: u16_at(b, 18),
                    send_ns: u64_at(b, 20),
                };
                if m.count == 0 || m.index >= m.count {
                    return Err(PacketError::BadFrame);
                }
                Ok(Packet::Media(m))
            }
            b'F' => {
                if b.len() < FEEDBACK_FIXED_LEN {
                    return Err(PacketError::Truncated);
                }
                let n = usize::from(b[3]);
                if n > MAX_ECHOES || b.len() < FEEDBACK_FIXED_LEN + n * ECHO_LEN {
                    return Err(PacketError::Truncated);
                }
                let ecn = (b[2] & 1 != 0).then(|| EcnCounts {
                    not_ect: u64_at(b, 36),
                    ect1: u64_at(b, 44),
                    ect0: u64_at(b, 52),
                    ce: u64_at(b, 60),
                });
                let echoes = (0..n)
                    .map(|i| {
                        let at = FEEDBACK_FIXED_LEN + i * ECHO_LEN;
                        Echo {
                            send_ns: u64_at(b, at),
                            hold_us: u32_at(b, at + 8),
                        }
                    })
                    .collect();
                Ok(Packet::Feedback(FeedbackPacket {
                    fb_seq: u64_at(b, 4),
                    received: u64_at(b, 12),
                    received_bytes: u64_at(b, 20),
                    lost: u64_at(b, 28),
                    ecn,
                    rx_ns: u64_at(b, 68),
                    echoes,
                }))
            }
            b'B' => Ok(Packet::Bye),
            b'P' => {
                if b.len() < PLI_LEN {
                    return Err(PacketError::Truncated);
                }
                Ok(Packet::Pli(u64_at(b, 4)))
            }
            k => Err(PacketError::UnknownKind(k)),
        }
    }
}

impl Media {
    /// Writes the header into the first [`MEDIA_HEADER_LEN`] bytes of `buf` and zeroes the rest;
    /// `buf` must be at least that long.
    pub fn emit(&self, buf: &mut [u8]) {
        buf.fill(0);
        buf[0] = b'M';
        buf[1] = VERSION;
        buf[2] = u8::from(self.keyframe);
        buf[4..12].copy_from_slice(&self.seq.to_be_bytes());
        buf[12..16].copy_from_slice(&self.frame.to_be_bytes());
        buf[16..18].copy_from_slice(&self.index.to_be_bytes());
        buf[18..20].copy_from_slice(&self.count.to_be_bytes());
        buf[20..28].copy_from_slice(&self.send_ns.to_be_bytes());
    }
}

impl FeedbackPacket {
    /// The datagram (at most [`MAX_ECHOES`] echoes are written: the newest).
    pub fn to_bytes(&self) -> Vec<u8> {
        let echoes = &self.echoes[self.echoes.len().saturating_sub(MAX_ECHOES)..];
        let mut b = vec![0u8; FEEDBACK_FIXED_LEN + echoes.len() * ECHO_LEN];
        b[0] = b'F';
        b[1] = VERSION;
        b[2] = u8::from(self.ecn.is_some());
        b[3] = echoes.len() as u8;
        let c = self.ecn.unwrap_or_default();
        for (at, v) in [
            (4, self.fb_seq),
            (12, self.received),
            (20, self.received_bytes),
            (28, self.lost),
            (36, c.not_ect),
            (44, c.ect1),
            (52, c.ect0),
            (60, c.ce),
            (68, self.rx_ns),
        ] {
            b[at..at + 8].copy_from_slice(&v.to_be_bytes());
        }
        for (i, e) in echoes.iter().enumerate() {
            let at = FEEDBACK_FIXED_LEN + i * ECHO_LEN;
            b[at..at + 8].copy_from_slice(&e.send_ns.to_be_bytes());
            b[at + 8..at + 12].copy_from_slice(&e.hold_us.to_be_bytes());
        }
        b
    }
}

/// The bye datagram.
pub const BYE: [u8; 2] = [b'B', VERSION];

/// The picture-loss indication numbered `request`.
pub fn pli_bytes(request: u64) -> [u8; PLI_LEN] {
    let mut b = [0u8; PLI_LEN];
    b[0] = b'P';
    b[1] = VERSION;
    b[4..12].copy_from_slice(&request.to_be_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn media_headers_round_trip_on_literal_bytes() {
        let m = Media {
            keyframe: true,
            seq: 0x0102_0304_0506_0708,
            frame: 9,
            index: 2,
            count: 5,
            send_ns: 1_000_000,
        };
        let mut buf = [0xffu8; 40];
        m.emit(&mut buf);
        assert_eq!(
            &buf[..MEDIA_HEADER_LEN],
            &[
                b'M', 2, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 9, 0, 2, 0, 5, 0, 0, 0, 0, 0, 0x0f,
                0x42, 0x40
            ]
        );
        assert!(buf[MEDIA_HEADER_LEN..].iter().all(|&b| b == 0));
        assert_eq!(Packet::parse(&buf), Ok(Packet::Media(m)));
    }

    #[test]
    fn feedback_round_trips_with_and_without_ecn_counts() {
        let mut f = FeedbackPacket {
            fb_seq: 3,
            received: 100,
            received_bytes: 120_000,
            lost: 2,
            ecn: Some(EcnCounts {
                not_ect: 0,
                ect1: 90,
                ect0: 0,
                ce: 10,
            }),
            rx_ns: 0x0102_0304_0506_0708,
            echoes: vec![
                Echo {
                    send_ns: 5,
                    hold_us: 7,
                },
                Echo {
                    send_ns: 6,
                    hold_us: 1,
                },
            ],
        };
        let b = f.to_bytes();
        assert_eq!(b.len(), FEEDBACK_FIXED_LEN + 2 * ECHO_LEN);
        assert_eq!(&b[68..76], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(Packet::parse(&b), Ok(Packet::Feedback(f.clone())));
        f.ecn = None;
        assert_eq!(Packet::parse(&f.to_bytes()), Ok(Packet::Feedback(f)));
    }

    #[test]
    fn bad_datagrams_are_errors() {
        assert_eq!(Packet::parse(&[]), Err(PacketError::Truncated));
        assert_eq!(Packet::parse(&[b'M', 2, 0]), Err(PacketError::Truncated));
        assert_eq!(Packet::parse(&[b'M', 1]), Err(PacketError::Version(1)));
        assert_eq!(
            Packet::parse(&[b'X', 2]),
            Err(PacketError::UnknownKind(b'X'))
        );
        let mut m = [0u8; MEDIA_HEADER_LEN];
        Media {
            keyframe: false,
            seq: 0,
            frame: 0,
            index: 0,
            count: 1,
            send_ns: 0,
        }
        .emit(&mut m);
        m[17] = 1; // index 1 of a one-packet frame
        assert_eq!(Packet::parse(&m), Err(PacketError::BadFrame));
        let mut f = FeedbackPacket::default().to_bytes();
        f[3] = 1; // claims an echo that is not there
        assert_eq!(Packet::parse(&f), Err(PacketError::Truncated));
        assert_eq!(Packet::parse(&BYE), Ok(Packet::Bye));
    }

    #[test]
    fn a_picture_loss_indication_round_trips_on_literal_bytes_and_short_ones_are_errors() {
        let b = pli_bytes(0x0102);
        assert_eq!(b, [b'P', 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(Packet::parse(&b), Ok(Packet::Pli(0x0102)));
        assert_eq!(Packet::parse(&b[..11]), Err(PacketError::Truncated));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_the_parser(b in proptest::collection::vec(any::<u8>(), 0..900)) {
            let _ = Packet::parse(&b);
        }
    }
}
