//! A hand-built analysis for the report tests: one bulk download through a filling queue
//! (server 10.0.0.2:5201 sends to client 10.0.0.1:40000), with the handshake, a tail drop
//! repaired by SACK and a retransmission, CE marks answered by ECE and CWR, RTT samples,
//! throughput bins and bytes in flight; plus a second, small connection and a UDP flow.
//! Built from the analyzer's public model, so it needs no capture and no analyzer run.

#![allow(dead_code)]

use analyze::*;
use std::time::Duration;
use wire::{Ecn, Instant};

pub const EPOCH_S: u64 = 1_700_000_000;
pub const MSS: u64 = 1448;
pub const SEGMENTS: u64 = 400;
pub const LOST: u64 = 150;

fn at(ms: f64) -> Instant {
    Instant::from_nanos(EPOCH_S * 1_000_000_000 + (ms * 1e6) as u64)
}

fn conn(a: &str, b: &str) -> Connection {
    Connection {
        vantage: Vantage::default(),
        a: a.parse().unwrap(),
        b: b.parse().unwrap(),
        first_time: at(0.0),
        last_time: at(1000.0),
        handshake: Handshake::default(),
        a2b: Direction::default(),
        b2a: Direction::default(),
        diagnoses: Vec::new(),
        frames: analyze::Frames::default(),
        state: ConnState::Closed,
        story: Story::default(),
    }
}

pub fn bulk_download() -> Analysis {
    let mut c = conn("10.0.0.1:40000", "10.0.0.2:5201");
    c.handshake = Handshake {
        syn_time: Some(at(0.0)),
        syn_count: 1,
        synack_time: Some(at(20.0)),
        synack_count: 1,
        ack_time: Some(at(20.5)),
        duration: Some(Duration::from_micros(20_500)),
        syn_rtt: Some(Duration::from_millis(20)),
        synack_rtt: None,
        ecn: EcnSetup::Classic,
    };
    let d = &mut c.b2a;
    d.src = Some(c.b);
    d.options.mss = Some(MSS as u16);
    let s = &mut d.series;
    s.segments.push(Segment {
        time: at(20.0),
        seq: 0,
        len: 0,
        kind: SegmentKind::New,
        ecn: Ecn::NotEct,
        flags: 0x12,
    });
    let mut data_bytes = 0;
    for i in 0..SEGMENTS {
        let send_ms = 25.0 + i as f64 * 1.2;
        let rtt_ms = 20.0 + i as f64 * 0.4;
        let seq = 1 + i * MSS;
        let ce = i % 97 == 50;
        s.segments.push(Segment {
            time: at(send_ms),
            seq,
            len: MSS as u32,
            kind: SegmentKind::New,
            ecn: if ce { Ecn::Ce } else { Ecn::Ect0 },
            flags: 0x10,
        });
        data_bytes += MSS;
        if ce {
            s.marks.push(Mark {
                time: at(send_ms),
                seq: seq + MSS,
                kind: MarkKind::Ce,
            });
            s.marks.push(Mark {
                time: at(send_ms + rtt_ms),
                seq: seq + MSS,
                kind: MarkKind::Ece,
            });
            s.marks.push(Mark {
                time: at(send_ms + rtt_ms + 2.0),
                seq: seq + 10 * MSS,
                kind: MarkKind::Cwr,
            });
        }
        s.in_flight.push(InFlightPoint {
            time: at(send_ms),
            bytes: (16 + i / 4) * MSS,
        });
        let ack_ms = send_ms + rtt_ms;
        if (LOST + 1..LOST + 12).contains(&i) {
            s.sacks.push(SackBlock {
                time: at(ack_ms),
                left: 1 + (LOST + 1) * MSS,
                right: seq + MSS,
            });
        } else if i != LOST {
            s.acks.push(SeqPoint {
                time: at(ack_ms),
                seq: seq + MSS,
            });
            s.windows.push(WindowPoint {
                time: at(ack_ms),
                ack: seq + MSS,
                window_bytes: 256 * 1024,
            });
            s.rtt.push(RttSample {
                time: at(ack_ms),
                seq: seq + MSS,
                rtt: Duration::from_micros((rtt_ms * 1e3) as u64),
            });
        }
    }
    let rs_ms = 25.0 + (LOST + 5) as f64 * 1.2 + 80.0;
    s.segments.push(Segment {
        time: at(rs_ms),
        seq: 1 + LOST * MSS,
        len: MSS as u32,
        kind: SegmentKind::Retransmit,
        ecn: Ecn::Ect0,
        flags: 0x10,
    });
    s.segments.sort_by_key(|x| x.time);
    for b in 0..10 {
        s.throughput.push(ThroughputPoint {
            time: at(b as f64 * 100.0),
            width: Duration::from_millis(100),
            goodput_bps: 9.5e6 - (b % 3) as f64 * 1e6,
            throughput_bps: 9.8e6,
        });
    }
    d.stats = DirectionStats {
        packets: SEGMENTS + 2,
        data_packets: SEGMENTS + 1,
        data_bytes: data_bytes + MSS,
        unique_bytes: data_bytes,
        retransmitted_packets: 1,
        retransmitted_bytes: MSS,
        rtt_samples: s.rtt.len() as u64,
        rtt_min_ms: Some(20.0),
        rtt_avg_ms: Some(100.0),
        rtt_max_ms: Some(180.0),
        ce: (0..SEGMENTS).filter(|i| i % 97 == 50).count() as u64,
        throughput_bps: 9.3e6,
        ..Default::default()
    };
    c.b2a.stats.max_in_flight_bytes = 116 * MSS;
    c.a2b.stats.packets = 350;
    c.diagnoses.push(Diagnosis {
        kind: DiagnosisKind::Bufferbloat,
        frames: analyze::Frames::default(),
        dir: Some(Dir::BtoA),
        start: at(100.0),
        end: at(500.0),
        delay_ms: 150.0,
        summary: "RTT 150 ms above its 20 ms minimum for 0.4 s: a standing queue.".into(),
    });
    c.diagnoses.push(Diagnosis {
        kind: DiagnosisKind::LossBurst,
        frames: analyze::Frames::default(),
        dir: Some(Dir::BtoA),
        start: at(205.0),
        end: at(300.0),
        delay_ms: 95.0,
        summary: "1 segment lost, repaired after 11 SACKed segments.".into(),
    });

    let mut small = conn("10.0.0.1:40002", "10.0.0.2:80");
    small.handshake.duration = Some(Duration::from_millis(45));
    small.a2b.stats.data_bytes = 0;

    let udp = UdpFlow {
        vantage: Vantage::default(),
        a: "10.0.0.1:5000".parse().unwrap(),
        b: "10.0.0.2:5000".parse().unwrap(),
        first_time: at(0.0),
        last_time: at(1000.0),
        a2b: UdpDirection {
            packets: 100,
            bytes: 10_000,
            ect0: 100,
            rate_bps: 80_000.0,
            ..Default::default()
        },
        b2a: UdpDirection::default(),
        quic: vec![],
        quic_rejected: vec![],
    };
    Analysis {
        epoch: at(0.0),
        captures: vec![CaptureSummary {
            name: "download.pcap".into(),
            format: "pcap".into(),
            packets: 760,
            ..Default::default()
        }],
        connections: vec![c, small],
        udp: vec![udp],
        warnings: vec![Warning {
            capture: 0,
            packet: 7,
            message: "truncated tcp header".into(),
        }],
    }
}
