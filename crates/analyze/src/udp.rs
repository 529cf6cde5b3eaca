//! UDP flows: packets, bytes, ECN codepoints and payload rate over time, per direction.
//!
//! A flow is an address/port pair at one vantage point, in both directions; there is no
//! notion of a connection, so a flow lasts from its first packet to its last. Rate bins have
//! a fixed width, so state grows with a flow's duration, not with its packet count.

use std::net::SocketAddr;

use wire::{Ecn, Instant};

use crate::model::{UdpDirection, UdpFlow, Vantage};
use crate::quic::QuicFlow;

/// Width of the rate bins.
pub const UDP_BIN_MS: u64 = 100;

#[derive(Clone, Debug)]
pub(crate) struct UdpState {
    flow: UdpFlow,
    bins: [Vec<u64>; 2],
    /// Read as QUIC once a datagram starts with a client's Initial.
    quic: Option<QuicFlow>,
}

impl UdpState {
    pub(crate) fn new(vantage: Vantage, src: SocketAddr, dst: SocketAddr, t: Instant) -> Self {
        UdpState {
            flow: UdpFlow {
                vantage,
                a: src,
                b: dst,
                first_time: t,
                last_time: t,
                a2b: UdpDirection::default(),
                b2a: UdpDirection::default(),
                quic: Vec::new(),
                quic_rejected: Vec::new(),
            },
            bins: [Vec::new(), Vec::new()],
            quic: None,
        }
    }

    /// One datagram: `payload` is its UDP payload length, `bytes` as much of the payload as
    /// the capture kept.
    pub(crate) fn handle(
        &mut self,
        src: SocketAddr,
        t: Instant,
        payload: usize,
        bytes: &[u8],
        ecn: Ecn,
    ) {
        let d = usize::from(src != self.flow.a);
        if self.quic.is_none() && QuicFlow::starts_quic(bytes) {
            self.quic = Some(QuicFlow::default());
        }
        if let Some(q) = &mut self.quic {
            q.handle(t, d == 0, bytes, payload as u64);
        }
        self.flow.last_time = self.flow.last_time.max(t);
        let st = if d == 0 {
            &mut self.flow.a2b
        } else {
            &mut self.flow.b2a
        };
        st.packets += 1;
        st.bytes += payload as u64;
        match ecn {
            Ecn::NotEct => st.not_ect += 1,
            Ecn::Ect0 => st.ect0 += 1,
            Ecn::Ect1 => st.ect1 += 1,
            Ecn::Ce => st.ce += 1,
        }
        let bin = ((t - self.flow.first_time).as_millis() as u64 / UDP_BIN_MS) as usize;
        // A flow cannot last longer than the capture; cap the bins at a day anyway.
        if bin < 864_000 {
            let b = &mut self.bins[d];
            if b.len() <= bin {
                b.resize(bin + 1, 0);
            }
            b[bin] += payload as u64;
        }
    }

    pub(crate) fn finish(mut self) -> UdpFlow {
        if let Some(q) = self.quic.take() {
            (self.flow.quic, self.flow.quic_rejected) = q.finish();
        }
        let secs = (self.flow.last_time - self.flow.first_time).as_secs_f64();
        for (d, bins) in self.bins.iter().enumerate() {
            let st = if d == 0 {
                &mut self.flow.a2b
            } else {
                &mut self.flow.b2a
            };
            st.rate_bps = if secs > 0.0 {
                st.bytes as f64 * 8.0 / secs
            } else {
                0.0
            };
            st.bin_ms = UDP_BIN_MS;
            st.rate_series_bps = bins
                .iter()
                .map(|&b| b as f64 * 8.0 * 1000.0 / UDP_BIN_MS as f64)
                .collect();
        }
        self.flow
    }
}
