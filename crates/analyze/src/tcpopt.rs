//! TCP options (RFC 9293 §3.2): the few the analyzer needs, read from untrusted bytes.
//!
//! `wire::packet::parse` gives the fixed TCP header; this reads the option bytes after it:
//! MSS (kind 2), window scale (3, RFC 7323 §2), SACK-permitted (4) and SACK blocks (5,
//! RFC 2018 §3), timestamps (8, RFC 7323 §3), TCP Fast Open (34, RFC 7413 §4.1.1, and the
//! experimental kind 254 with magic 0xF989). A malformed option list ends the walk; what was
//! read before it stays. Options cut by the snaplen are simply absent.

/// The options the analyzer uses, as plain data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    /// (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
    /// SACK blocks (left edge, right edge), raw 32-bit sequence numbers; at most 4 fit.
    pub sack: [(u32, u32); 4],
    pub sack_len: usize,
    /// Fast Open cookie length (0: a cookie request).
    pub tfo_cookie_len: Option<u8>,
}

impl TcpOptions {
    pub fn sack_blocks(&self) -> &[(u32, u32)] {
        &self.sack[..self.sack_len]
    }
}

/// Reads the option bytes of a TCP header (everything after the 20 fixed bytes).
pub fn parse(b: &[u8]) -> TcpOptions {
    let mut o = TcpOptions::default();
    // What Linux puts on every segment after the handshake (RFC 7323 Appendix A's layout:
    // NOP, NOP, timestamps), read without the walk.
    if let [1, 1, 8, 10, v @ ..] = b {
        if v.len() == 8 {
            o.timestamps = Some((
                u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
                u32::from_be_bytes([v[4], v[5], v[6], v[7]]),
            ));
            return o;
        }
    }
    walk(b)
}

/// The general option walk.
fn walk(mut b: &[u8]) -> TcpOptions {
    let mut o = TcpOptions::default();
    while let Some(&kind) = b.first() {
        match kind {
            0 => break,
            1 => {
                b = &b[1..];
                continue;
            }
            _ => {}
        }
        let Some(&len) = b.get(1) else { break };
        let len = usize::from(len);
        if len < 2 || len > b.len() {
            break;
        }
        let v = &b[2..len];
        match (kind, v.len()) {
            (2, 2) => o.mss = Some(u16::from_be_bytes([v[0], v[1]])),
            // RFC 7323 §2.3: shift counts above 14 are treated as 14.
            (3, 1) => o.window_scale = Some(v[0].min(14)),
            (4, 0) => o.sack_permitted = true,
            (5, n) if n % 8 == 0 => {
                for (i, c) in v.chunks_exact(8).take(4).enumerate() {
                    o.sack[i] = (
                        u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                        u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
                    );
                    o.sack_len = i + 1;
                }
            }
            (8, 8) => {
                o.timestamps = Some((
                    u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
                    u32::from_be_bytes([v[4], v[5], v[6], v[7]]),
                ))
            }
            (34, n) => o.tfo_cookie_len = Some(n as u8),
            (254, n) if n >= 2 && v[0] == 0xf9 && v[1] == 0x89 => {
                o.tfo_cookie_len = Some((n - 2) as u8)
            }
            _ => {}
        }
        b = &b[len..];
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linux_syn_option_list_reads_fully() {
        // MSS 1460, SACK-permitted, timestamps 1/0, NOP, window scale 7.
        let b = [
            2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
        ];
        let o = parse(&b);
        assert_eq!(o.mss, Some(1460));
        assert!(o.sack_permitted);
        assert_eq!(o.timestamps, Some((1, 0)));
        assert_eq!(o.window_scale, Some(7));
    }

    #[test]
    fn sack_blocks_and_fast_open_cookies_are_read() {
        let b = [
            1, 1, 5, 18, 0, 0, 0, 10, 0, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0, 40, 34, 10, 1, 2, 3, 4, 5,
            6, 7, 8,
        ];
        let o = parse(&b);
        assert_eq!(o.sack_blocks(), &[(10, 20), (30, 40)]);
        assert_eq!(o.tfo_cookie_len, Some(8));
        assert_eq!(parse(&[254, 4, 0xf9, 0x89]).tfo_cookie_len, Some(0));
    }

    #[test]
    fn a_bad_length_stops_the_walk_but_keeps_what_came_before() {
        let o = parse(&[2, 4, 0, 100, 3, 0, 7]);
        assert_eq!(o.mss, Some(100));
        assert_eq!(o.window_scale, None);
        assert_eq!(parse(&[2, 40, 0, 1]), TcpOptions::default());
    }

    #[test]
    fn the_timestamp_only_layout_reads_as_the_walk_does() {
        let b = [1, 1, 8, 10, 0, 0, 1, 2, 0xff, 0, 0, 3];
        assert_eq!(parse(&b), walk(&b));
        assert_eq!(parse(&b).timestamps, Some((258, 0xff00_0003)));
        // One byte more or less is not that layout.
        assert_eq!(parse(&b[..11]), walk(&b[..11]));
        let mut c = b.to_vec();
        c.push(0);
        assert_eq!(parse(&c), walk(&c));
    }

    proptest::proptest! {
        #[test]
        fn parse_agrees_with_the_walk_on_any_bytes(
            tail in proptest::collection::vec(proptest::num::u8::ANY, 0..14),
            ts_head in proptest::bool::ANY,
        ) {
            let mut b = if ts_head { vec![1, 1, 8, 10] } else { Vec::new() };
            b.extend(tail);
            proptest::prop_assert_eq!(parse(&b), walk(&b));
        }
    }
}
