//! What the client's capture says about its flows: the TCP connections it opened and how each
//! open ended, and the UDP flows that never got a datagram back.

use std::collections::BTreeMap;
use std::net::SocketAddr;

/// How a TCP connection the client opened ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpOpen {
    Completed,
    Refused,
    Unanswered,
}

/// Follows the client's packets (fed in capture order with [`Flows::packet`]).
#[derive(Debug, Default)]
pub struct Flows {
    /// (client port, destination) → outcome so far.
    opens: BTreeMap<(u16, SocketAddr), TcpOpen>,
    /// (client port, destination) → (datagrams sent, answered).
    udp: BTreeMap<(u16, SocketAddr), (u64, bool)>,
}

impl Flows {
    /// One IP packet of the client's capture (sent or received); anything that is not TCP or
    /// UDP over IP is ignored.
    pub fn packet(&mut self, ip: &[u8]) {
        let Ok(h) = wire::packet::parse(ip) else {
            return;
        };
        let t = match h.transport {
            wire::packet::Transport::Tcp(t) => t,
            wire::packet::Transport::Udp {
                src_port, dst_port, ..
            } => {
                // The capture is the client's: what it sent has its address as source.
                let reply = (dst_port, SocketAddr::new(h.ip.src, src_port));
                if let Some(f) = self.udp.get_mut(&reply) {
                    f.1 = true;
                } else {
                    self.udp
                        .entry((src_port, SocketAddr::new(h.ip.dst, dst_port)))
                        .or_default()
                        .0 += 1;
                }
                return;
            }
            _ => return,
        };
        use wire::packet::TcpHeader as F;
        if t.has(F::SYN) && !t.has(F::ACK) {
            self.opens
                .entry((t.src_port, SocketAddr::new(h.ip.dst, t.dst_port)))
                .or_insert(TcpOpen::Unanswered);
        } else if let Some(o) = self
            .opens
            .get_mut(&(t.dst_port, SocketAddr::new(h.ip.src, t.src_port)))
        {
            if *o == TcpOpen::Unanswered {
                if t.has(F::SYN) && t.has(F::ACK) {
                    *o = TcpOpen::Completed;
                } else if t.has(F::RST) {
                    *o = TcpOpen::Refused;
                }
            }
        }
    }

    /// The TCP opens (destination, outcome), in the order of their destinations.
    pub fn tcp(&self) -> Vec<(SocketAddr, TcpOpen)> {
        self.opens.iter().map(|((_, d), o)| (*d, *o)).collect()
    }

    /// UDP flows that got no datagram back: (destination, datagrams sent).
    pub fn udp_unanswered(&self) -> Vec<(SocketAddr, u64)> {
        self.udp
            .iter()
            .filter(|(_, (_, answered))| !answered)
            .map(|((_, d), (n, _))| (*d, *n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv6 TCP segment with the given flags.
    fn tcp6(src: &str, dst: &str, sport: u16, dport: u16, flags: u8) -> Vec<u8> {
        wire::build::Ip::v6(src.parse().unwrap(), dst.parse().unwrap())
            .tcp(&wire::build::Tcp::new(sport, dport, 1).flags(flags), &[])
    }

    #[test]
    fn syns_are_completed_refused_or_unanswered() {
        let (c, s) = ("fd4c:6c61:6200:1::1", "64:ff9b::a4d:201");
        let mut f = Flows::default();
        f.packet(&tcp6(c, s, 40000, 80, 0x02));
        f.packet(&tcp6(s, c, 80, 40000, 0x12));
        f.packet(&tcp6(c, s, 40001, 81, 0x02));
        f.packet(&tcp6(s, c, 81, 40001, 0x14));
        f.packet(&tcp6(c, s, 40002, 82, 0x02));
        f.packet(&tcp6(c, s, 40002, 82, 0x02));
        let got: Vec<(u16, TcpOpen)> = f.tcp().into_iter().map(|(d, o)| (d.port(), o)).collect();
        assert_eq!(
            got,
            vec![
                (80, TcpOpen::Completed),
                (81, TcpOpen::Refused),
                (82, TcpOpen::Unanswered)
            ]
        );
        f.packet(b"\x45 not a packet");
        assert_eq!(f.tcp().len(), 3);
    }
}
