//! The readable text summary (the default output of `latencylab analyze`).
//!
//! One block per connection: endpoints, handshake, per-direction lines in tcptrace's spirit,
//! then the diagnoses in plain words; UDP flows and warnings after. Layout only: every number
//! comes from the [`Analysis`].

use std::fmt::Write;

use crate::model::*;

fn opt_ms(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.1}"))
}

/// An option of the handshake as printed: its value, or `-` when the SYN did not carry it.
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("-".to_string(), |x| x.to_string())
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn ecn_words(e: EcnSetup) -> &'static str {
    match e {
        EcnSetup::None => "not asked",
        EcnSetup::Requested => "asked, not agreed",
        EcnSetup::Classic => "classic",
        EcnSetup::AccEcn => "AccECN",
    }
}

/// A rate in the unit a person reads (bit/s, kbit/s, Mbit/s or Gbit/s).
pub fn rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.2} Mbit/s", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.1} kbit/s", bps / 1e3)
    } else {
        format!("{bps:.0} bit/s")
    }
}

/// One line on where the capture sat on this direction's path and what that hides, for
/// every point but the sender's (where nothing is hidden).
fn vantage_note(d: &Direction) -> Option<String> {
    let hidden = |d: &Direction| {
        d.not_judged
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let how = match d.vantage_basis {
        VantageBasis::Handshake => " (from the handshake's timing)",
        VantageBasis::Ttl => " (from the TTLs: the path is under 1 ms)",
        VantageBasis::DataRtt => " (from the data RTTs, no handshake: medium confidence)",
        VantageBasis::None | VantageBasis::ShortPath => "",
    };
    let judged = if d.not_judged.is_empty() {
        "; within 1 ms of the sender with no queue in between, so every diagnosis applies"
            .to_string()
    } else {
        format!("; not judged from here: {}", hidden(d))
    };
    match d.capture_point {
        CapturePoint::Sender => None,
        CapturePoint::Unknown if d.vantage_basis == VantageBasis::ShortPath => Some(format!(
            "capture point unknown (a path under 1 ms whose TTLs do not tell){judged}"
        )),
        CapturePoint::Unknown => Some(
            "capture point unknown (no handshake, data one way): diagnoses assume it is at the sender"
                .to_string(),
        ),
        CapturePoint::Middle => Some(format!(
            "captured between sender and receiver{how}: RTTs cover only the path beyond this point{judged}"
        )),
        CapturePoint::Receiver => Some(format!(
            "captured at the receiver{how}: RTT here is the receiver's ACK delay{judged}{}",
            if d.not_judged.contains(&DiagnosisKind::Bufferbloat) {
                " (bufferbloat needs 1 kHz TCP timestamps from the sender over at least 0.5 s)"
            } else {
                "; bufferbloat is judged from the one-way delay (TCP timestamps)"
            }
        )),
    }
}

/// ", frames 3-8" (Wireshark's frame numbers of the packets that show it), or nothing.
fn frames_words(f: &Frames) -> String {
    match f.packets {
        0 => String::new(),
        _ if f.first == f.last => format!(", frame {}", f.first),
        _ => format!(", frames {}-{}", f.first, f.last),
    }
}

/// A duration in nanoseconds for people: "1.07 s" from one second on, "67 ms" (or "0.4 ms")
/// below.
pub fn human(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1e3)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// The line a newcomer reads first: the connection's duration and where it went, largest
/// part first, with the evidence for the largest ("1.07 s: server 0.98 s (first byte 983 ms
/// after the request was ACKed), network 67 ms, client 16 ms").
pub fn budget_line(c: &Connection) -> String {
    let b = &c.story.budget;
    let total = b.total_ns();
    let mut parts: Vec<(&str, u64)> = b.parts().into_iter().filter(|p| p.1 > 0).collect();
    parts.sort_by_key(|p| std::cmp::Reverse(p.1));
    // Parts under 0.5 % of the whole are noise on this line (they stay in the JSON).
    let shown: Vec<String> = parts
        .iter()
        .enumerate()
        .filter(|(i, p)| *i == 0 || u128::from(p.1) * 200 >= u128::from(total))
        .map(|(i, &(name, ns))| {
            let why = if i == 0 { evidence(c, name) } else { None };
            match why {
                Some(w) => format!("{name} {} ({w})", human(ns)),
                None => format!("{name} {}", human(ns)),
            }
        })
        .collect();
    if shown.is_empty() {
        return format!("{}: a single instant", human(total));
    }
    format!("{}: {}", human(total), shown.join(", "))
}

/// A few words of evidence for the budget part that dominates.
fn evidence(c: &Connection, part: &str) -> Option<String> {
    let diag = |k: DiagnosisKind| c.diagnoses.iter().find(|d| d.kind == k);
    let ms = |d: wire::Duration| d.as_secs_f64() * 1e3;
    match part {
        "server" => {
            let e = c
                .story
                .exchanges
                .iter()
                .filter_map(|e| Some((e, e.response_start?)))
                .max_by_key(|(e, r)| *r - e.request_end)?;
            Some(match e.0.request_acked.filter(|&a| a < e.1) {
                Some(a) => format!(
                    "first byte {:.0} ms after the request was ACKed",
                    ms(e.1 - a)
                ),
                None => format!(
                    "first byte {:.0} ms after the request's last byte",
                    ms(e.1 - e.0.request_end)
                ),
            })
        }
        "client" => diag(DiagnosisKind::ClientDelay)
            .map(|d| format!("first request {:.0} ms after the handshake", d.delay_ms))
            .or_else(|| {
                diag(DiagnosisKind::NagleDelayedAck)
                    .filter(|d| d.dir == c.story.client)
                    .map(|_| "small writes held by Nagle until the server's delayed ACK".into())
            })
            .or_else(|| Some("between answers and the next request".into())),
        "transfer" => {
            let bytes = c.a2b.stats.unique_bytes.max(c.b2a.stats.unique_bytes);
            let secs = c.story.budget.transfer_ns as f64 / 1e9;
            (bytes > 0 && secs > 0.0).then(|| {
                format!(
                    "{bytes} bytes, {} while moving",
                    rate(bytes as f64 * 8.0 / secs)
                )
            })
        }
        "network" => {
            let rtt = c.handshake.syn_rtt.zip(c.handshake.synack_rtt);
            rtt.map(|(x, y)| format!("round trip {:.0} ms from here", ms(x + y)))
        }
        "stalled" => [
            DiagnosisKind::PeerUnresponsive,
            DiagnosisKind::ZeroWindowStall,
            DiagnosisKind::SynTimeout,
            DiagnosisKind::RtoStall,
        ]
        .into_iter()
        .find_map(|k| diag(k).map(|_| k.name().replace('_', " "))),
        _ => None,
    }
}

/// The handshake times over all connections in one line ("handshakes: 40 connections (SYN
/// to SYN-ACK at the client): median 52.1 ms, 90th percentile 231 ms, 48% under 100 ms");
/// `None` when no handshake was captured.
pub fn handshakes_line(a: &Analysis) -> Option<String> {
    let h = a.handshakes();
    let (p50, p90, under) = (
        h.percentile_ms(50.0)?,
        h.percentile_ms(90.0)?,
        h.under_pct(100.0)?,
    );
    let ms = |x: f64| human((x * 1e6) as u64);
    Some(format!(
        "handshakes: {} connection{} ({}): median {}, 90th percentile {}, {under:.0}% under 100 ms",
        h.count(),
        if h.count() == 1 { "" } else { "s" },
        h.what(),
        ms(p50),
        ms(p90)
    ))
}

/// Renders the whole analysis as text.
pub fn summary(a: &Analysis) -> String {
    let mut s = String::new();
    for c in &a.captures {
        let _ = writeln!(
            s,
            "{}: {}, {} packets ({} IP), link types {:?}",
            c.name,
            c.format,
            c.packets,
            c.ip_packets,
            c.interfaces.iter().map(|i| i.linktype).collect::<Vec<_>>()
        );
    }
    let _ = writeln!(
        s,
        "{} TCP connections, {} UDP flows\n",
        a.connections.len(),
        a.udp.len()
    );
    if let Some(line) = handshakes_line(a) {
        let _ = writeln!(s, "{line}\n");
    }
    for (i, c) in a.connections.iter().enumerate() {
        let _ = writeln!(
            s,
            "TCP {}: {} <-> {}  at {:.3} s for {:.3} s, {:?}{}",
            i + 1,
            c.a,
            c.b,
            a.rel_secs(c.first_time),
            c.duration().as_secs_f64(),
            c.state,
            if a.captures.len() > 1 || c.vantage.interface > 0 {
                format!(
                    "  [{}#{}]",
                    a.captures
                        .get(c.vantage.capture)
                        .map_or("", |x| x.name.as_str()),
                    c.vantage.interface
                )
            } else {
                String::new()
            }
        );
        let _ = writeln!(s, "  {}", budget_line(c));
        let h = &c.handshake;
        let _ = writeln!(
            s,
            "  handshake {} ms (SYN sent {}x, SYN->SYN-ACK {} ms), ECN {}, MSS {}/{}, wscale {}/{}, SACK {}/{}",
            opt_ms(h.duration.map(|d| d.as_secs_f64() * 1e3)),
            h.syn_count,
            opt_ms(h.syn_rtt.map(|d| d.as_secs_f64() * 1e3)),
            ecn_words(h.ecn),
            opt(c.a2b.options.mss),
            opt(c.b2a.options.mss),
            opt(c.a2b.options.window_scale),
            opt(c.b2a.options.window_scale),
            yes_no(c.a2b.options.sack_permitted),
            yes_no(c.b2a.options.sack_permitted)
        );
        if c.tfo() {
            let _ = writeln!(
                s,
                "  TCP Fast Open: the SYN carried {} bytes of data and a cookie of {} bytes",
                c.a2b.options.syn_data_bytes,
                c.a2b.options.tfo_cookie_len.unwrap_or(0)
            );
        }
        for (name, dir) in [("a->b", &c.a2b), ("b->a", &c.b2a)] {
            let d = &dir.stats;
            let _ = writeln!(
                s,
                "  {name}: {} pkts, {} data pkts, {} data bytes ({} unique), {} rexmt pkts ({} bytes), {} out-of-order, {} dup acks, {} zero-window",
                d.packets,
                d.data_packets,
                d.data_bytes,
                d.unique_bytes,
                d.retransmitted_packets,
                d.retransmitted_bytes,
                d.out_of_order_packets,
                d.dup_acks,
                d.zero_window
            );
            let _ = writeln!(
                s,
                "        RTT {} samples min/avg/max {}/{}/{} ms, CE {} ECE {} CWR {}, max in flight {} bytes, {}",
                d.rtt_samples,
                opt_ms(d.rtt_min_ms),
                opt_ms(d.rtt_avg_ms),
                opt_ms(d.rtt_max_ms),
                d.ce,
                d.ece,
                d.cwr,
                d.max_in_flight_bytes,
                rate(d.throughput_bps)
            );
            if d.data_packets > 0 {
                if let Some(note) = vantage_note(dir) {
                    let _ = writeln!(s, "        {note}");
                }
            }
        }
        for d in &c.diagnoses {
            let _ = writeln!(
                s,
                "  * {} {}({:.3}-{:.3} s{}): {}",
                d.kind,
                d.dir.map_or(String::new(), |x| format!("{} ", x.name())),
                a.rel_secs(d.start),
                a.rel_secs(d.end),
                frames_words(&d.frames),
                d.summary
            );
        }
        s.push('\n');
    }
    for u in &a.udp {
        let _ = writeln!(
            s,
            "UDP {} <-> {}: a->b {} pkts {} bytes {} (CE {}, ECT0 {}, ECT1 {}); b->a {} pkts {} bytes {}",
            u.a,
            u.b,
            u.a2b.packets,
            u.a2b.bytes,
            rate(u.a2b.rate_bps),
            u.a2b.ce,
            u.a2b.ect0,
            u.a2b.ect1,
            u.b2a.packets,
            u.b2a.bytes,
            rate(u.b2a.rate_bps)
        );
        for q in &u.quic {
            let (client, server) = if q.client_is_a {
                (u.a, u.b)
            } else {
                (u.b, u.a)
            };
            let _ = writeln!(
                s,
                "  QUIC v{:#x} {client} -> {server} (server CID {}): handshake {}, {:.3} s, \
                 client->server {} pkts {} bytes, server->client {} pkts {} bytes, spin-bit RTT {}",
                q.version,
                if q.server_cid.is_empty() {
                    "unseen"
                } else {
                    &q.server_cid
                },
                q.handshake_ms()
                    .map_or("not completed".into(), |ms| format!("{ms:.1} ms")),
                (q.last_time - q.first_time).as_secs_f64(),
                q.client_to_server.packets,
                q.client_to_server.bytes,
                q.server_to_client.packets,
                q.server_to_client.bytes,
                q.spin_rtt_median_ms()
                    .map_or("none (the endpoints do not spin)".into(), |ms| {
                        format!("{ms:.1} ms median of {}", q.spin_rtt_ms.len())
                    }),
            );
        }
        if !u.quic.is_empty() {
            let _ = writeln!(
                s,
                "  (QUIC encrypts the rest: no streams, acknowledgements or losses are visible)"
            );
        }
        for (why, n) in &u.quic_rejected {
            let _ = writeln!(s, "  {n} packets not read as QUIC: {why}");
        }
    }
    // The warnings themselves go to standard error (see [`warnings`]); a count stays here so
    // that a saved report says its input was damaged.
    if !a.warnings.is_empty() {
        let _ = writeln!(
            s,
            "{} warning(s) about damaged input, listed on standard error",
            a.warnings.len()
        );
    }
    s
}

/// Warnings printed in full per capture; the rest of that capture's are summed up in one line.
const WARNINGS_SHOWN_PER_CAPTURE: usize = 5;

/// The warnings for standard error: the first [`WARNINGS_SHOWN_PER_CAPTURE`] of each capture one
/// line each, then one line that counts the rest of that capture's (those kept, which `--json`
/// lists, and those beyond the cap) and the packets they span.
pub fn warnings(a: &Analysis) -> String {
    let mut s = String::new();
    for (capture, c) in a.captures.iter().enumerate() {
        let of_capture: Vec<_> = a.warnings.iter().filter(|w| w.capture == capture).collect();
        for w in of_capture.iter().take(WARNINGS_SHOWN_PER_CAPTURE) {
            // Some messages already start with the packet number.
            let prefix = format!("packet {}: ", w.packet);
            let _ = writeln!(
                s,
                "latencylab: warning: {}: {prefix}{}",
                c.name,
                w.message.strip_prefix(&prefix).unwrap_or(&w.message)
            );
        }
        let rest = &of_capture[of_capture.len().min(WARNINGS_SHOWN_PER_CAPTURE)..];
        let beyond_cap = c.warnings_dropped;
        if !rest.is_empty() || beyond_cap > 0 {
            let more = rest.len() as u64 + beyond_cap;
            let span = match (rest.first(), rest.last()) {
                (Some(first), Some(last)) if beyond_cap == 0 => {
                    format!(", packets {} to {}", first.packet, last.packet)
                }
                (Some(first), _) => format!(", from packet {}", first.packet),
                _ => String::new(),
            };
            let listed = if rest.is_empty() {
                String::new()
            } else {
                format!("; `--json` lists {} of them", rest.len())
            };
            let _ = writeln!(
                s,
                "latencylab: warning: {}: {more} more warning(s){span}{listed}",
                c.name
            );
        }
    }
    s
}

#[cfg(test)]
mod handshake_words_tests {
    use super::*;

    #[test]
    fn handshake_options_print_as_values_and_words_not_rust_debug() {
        assert_eq!(opt(Some(1440u16)), "1440");
        assert_eq!(opt(None::<u8>), "-");
        assert_eq!(yes_no(true), "yes");
        assert_eq!(ecn_words(EcnSetup::None), "not asked");
        assert_eq!(ecn_words(EcnSetup::Classic), "classic");
    }
}

#[cfg(test)]
mod warning_tests {
    use super::*;
    use crate::model::{CaptureSummary, Warning};

    fn analysis(per_capture: &[(u64, u64)]) -> Analysis {
        let mut a = Analysis::default();
        for (capture, &(kept, dropped)) in per_capture.iter().enumerate() {
            a.captures.push(CaptureSummary {
                name: format!("c{capture}.pcap"),
                warnings_dropped: dropped,
                ..CaptureSummary::default()
            });
            for packet in 1..=kept {
                a.warnings.push(Warning {
                    capture,
                    packet: packet * 10,
                    message: format!("packet {}: the capture kept only part of it", packet * 10),
                });
            }
        }
        a
    }

    #[test]
    fn each_capture_shows_its_first_warnings_and_sums_up_the_rest_in_one_line() {
        let text = warnings(&analysis(&[(12, 0), (2, 0)]));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), WARNINGS_SHOWN_PER_CAPTURE + 1 + 2, "{text}");
        assert_eq!(
            lines[0],
            "latencylab: warning: c0.pcap: packet 10: the capture kept only part of it"
        );
        assert_eq!(
            lines[WARNINGS_SHOWN_PER_CAPTURE],
            "latencylab: warning: c0.pcap: 7 more warning(s), packets 60 to 120; `--json` lists 7 of them"
        );
        assert!(lines[WARNINGS_SHOWN_PER_CAPTURE + 1]
            .starts_with("latencylab: warning: c1.pcap: packet 10:"));
    }

    #[test]
    fn warnings_beyond_the_cap_are_counted_in_the_summary_line() {
        let text = warnings(&analysis(&[(100, 40)]));
        let last = text.lines().last().unwrap();
        assert_eq!(
            last,
            "latencylab: warning: c0.pcap: 135 more warning(s), from packet 60; `--json` lists 95 of them"
        );
        // Only counted, none kept beyond the ones shown.
        let text = warnings(&analysis(&[(3, 9)]));
        assert_eq!(
            text.lines().last().unwrap(),
            "latencylab: warning: c0.pcap: 9 more warning(s)"
        );
    }
}
