//! `call`: a two-way video call over UDP with an L4S-capable transport. Each endpoint sends a
//! synthetic video stream whose bitrate a [`congestion::Controller`] sets, receives the other
//! endpoint's stream, and feeds back what it received: cumulative packet, byte, loss and
//! per-codepoint ECN counts, plus an echo of each media packet's send time (formats in
//! [`packet`]).
//!
//! In L4S mode the socket marks every packet ECT(1) (IP_TOS / IPV6_TCLASS); classic mode marks
//! ECT(0); `no-ecn` marks nothing. The received ECN field is read per datagram from the
//! IP_TOS / IPV6_TCLASS control message (IP_RECVTOS / IPV6_RECVTCLASS). When ECN validation
//! fails, the socket is switched to Not-ECT and an `ecn_fallback` line says when and why.
//!
//! The receiving side decodes as a video decoder does (a frame needs the one before it), so a
//! lost packet freezes the picture until a keyframe, which it asks for with a picture-loss
//! indication; the sending side answers with a keyframe ([`receiver`], [`sender`]).
//!
//! One endpoint listens (`--listen PORT`) and answers whoever calls first; the other connects
//! (`--connect HOST:PORT`). The loop is single-threaded: ppoll until the next deadline (frame,
//! pacer, feedback, second), then read every datagram waiting. Pure parts: [`packet`],
//! [`receiver`], [`sender`].

pub mod packet;
pub mod receiver;
pub mod sender;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use congestion::{Controller, EcnState, Event, Mode, Params};
use wire::{Instant, Rate};

use crate::common::{
    bind_udp, ms, positive_time_arg, rate_arg, resolve, secs, start_record, time_arg, udp_for_peer,
    Clock, JsonLines, Stop, UsageError,
};
use crate::records::Record;
use crate::stats::Percentiles;
use packet::{pli_bytes, Media, Packet, BYE};
use receiver::Receiver;
use sender::{echo_arrival, echo_rtt, FeedbackTracker, VideoParams, VideoSource};

/// The congestion response and ECN codepoint of the call.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallMode {
    /// ECT(1) and a Prague-style scalable controller.
    L4s,
    /// ECT(0) and a legacy real-time video sender: the Google Congestion Control of WebRTC
    /// (draft-ietf-rmcat-gcc).
    Classic,
    /// Not-ECT; Reno on loss only.
    NoEcn,
}

impl CallMode {
    fn controller_mode(self) -> Mode {
        match self {
            CallMode::L4s => Mode::L4s,
            CallMode::Classic => Mode::Classic,
            CallMode::NoEcn => Mode::NotEct,
        }
    }
}

/// Options of `call`.
#[derive(clap::Args, Clone, Debug)]
pub struct CallArgs {
    /// Wait for a call on this UDP port, and answer the first caller.
    #[arg(
        long,
        value_name = "PORT",
        conflicts_with = "connect",
        required_unless_present = "connect"
    )]
    pub listen: Option<u16>,
    /// Call the endpoint listening at HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,
    /// Address to listen on [default: all addresses, IPv6 and IPv4].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Congestion response and ECN marking.
    #[arg(long, value_enum, default_value_t = CallMode::L4s)]
    pub mode: CallMode,
    /// Video frames per second.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=240))]
    pub fps: u32,
    /// Lowest video bitrate.
    #[arg(long, default_value = "500kbit", value_parser = rate_arg, value_name = "RATE")]
    pub min_rate: Rate,
    /// Highest video bitrate.
    #[arg(long, default_value = "8mbit", value_parser = rate_arg, value_name = "RATE")]
    pub max_rate: Rate,
    /// Bitrate at the start of the call.
    #[arg(long, default_value = "1mbit", value_parser = rate_arg, value_name = "RATE")]
    pub start_rate: Rate,
    /// A keyframe every this long besides those the peer asks for [default: 3000 frames'
    /// time, WebRTC's encoders' interval: 100 s at 30 fps, so keyframes come on request].
    #[arg(long, value_parser = positive_time_arg, value_name = "TIME")]
    pub keyframe_interval: Option<Duration>,
    /// Size of a keyframe relative to a normal frame [default: 0.3 × fps, at least 3: the cap
    /// libwebrtc puts on its VP8/VP9 keyframes, 9 at 30 fps].
    #[arg(long, value_name = "FACTOR")]
    pub keyframe_factor: Option<f64>,
    /// UDP payload bytes per packet (header included).
    #[arg(long, default_value_t = 1200, value_parser = clap::value_parser!(u16).range(64..=9000))]
    pub packet_size: u16,
    /// Feedback every this long while packets arrive.
    #[arg(long, default_value = "10ms", value_parser = positive_time_arg, value_name = "TIME")]
    pub feedback_interval: Duration,
    /// No complete frame for longer than this is a stall.
    #[arg(long, default_value = "200ms", value_parser = positive_time_arg, value_name = "TIME")]
    pub stall_threshold: Duration,
    /// How long the call lasts.
    #[arg(long, default_value = "30s", value_parser = time_arg, value_name = "TIME")]
    pub duration: Duration,
    /// Write every per-packet RTT sample as a `call_rtt` line.
    #[arg(long)]
    pub rtt_samples: bool,
    /// Report no ECN counts, like a receiver that cannot read the ECN field (tests the peer's
    /// ECN validation).
    #[arg(long)]
    pub no_ecn_feedback: bool,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

impl CallArgs {
    /// The checks clap cannot express; each error quotes the values.
    fn check(&self) -> Result<(), UsageError> {
        if self.min_rate > self.max_rate {
            return Err(UsageError(format!(
                "--min-rate '{}' is above --max-rate '{}'",
                self.min_rate, self.max_rate
            )));
        }
        if let Some(f) = self.keyframe_factor {
            if !(f.is_finite() && (1.0..=100.0).contains(&f)) {
                return Err(UsageError(format!(
                    "--keyframe-factor '{f}' must be between 1 and 100 (try 9)"
                )));
            }
        }
        Ok(())
    }

    /// `--keyframe-interval`, or WebRTC's: 3000 frames (`keyFrameInterval` of its default VP8
    /// and H.264 settings, api/video_codecs/video_encoder.cc).
    fn keyframe_interval(&self) -> Duration {
        self.keyframe_interval
            .unwrap_or(Duration::from_secs(3000) / self.fps.max(1))
    }

    /// `--keyframe-factor`, or libwebrtc's cap on a keyframe for the frame rate: its libvpx
    /// encoders set `rc_max_intra_bitrate_pct` to `0.5 × rc_buf_optimal_sz (600 ms) × fps / 10`
    /// percent of a frame's budget, at least 300 % (`MaxIntraTarget`): 0.3 × fps, 9 at 30 fps.
    fn keyframe_factor(&self) -> f64 {
        self.keyframe_factor
            .unwrap_or((0.3 * f64::from(self.fps)).max(3.0))
    }
}

/// `call`: one endpoint of a call.
pub fn run(args: &CallArgs) -> anyhow::Result<()> {
    args.check()?;
    let out = JsonLines::open(args.out.as_ref())?;
    let (socket, peer) = match (&args.connect, args.listen) {
        (Some(target), _) => {
            let peer = resolve(target)?;
            (udp_for_peer(&peer)?, Some(peer))
        }
        (None, Some(port)) => (bind_udp(args.bind.as_deref(), port)?, None),
        (None, None) => {
            return Err(UsageError("give --listen PORT or --connect HOST:PORT".into()).into())
        }
    };
    crate::sys::install_stop_signals().context("cannot install signal handlers")?;
    let r = call(args, socket, peer, &out, &Stop::new());
    out.flush();
    r
}

/// Runs a call on `socket`; with `peer == None` it waits for the first caller.
pub fn call(
    args: &CallArgs,
    socket: UdpSocket,
    peer: Option<SocketAddr>,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    args.check()?;
    let clock = Clock::start();
    out.emit(&start_record("call", &clock));
    let local = socket.local_addr()?;
    if peer.is_none() {
        out.emit(&Record::Listening {
            t_s: clock.t_s(),
            addr: local.to_string(),
            proto: "udp".into(),
        });
    }
    socket.set_nonblocking(true)?;
    crate::sys::enable_recv_timestamps(socket.as_fd()).context("asking for arrival timestamps")?;
    crate::sys::enable_recv_ecn(socket.as_fd(), &local)
        .context("cannot ask for the received ECN field (IP_RECVTOS/IPV6_RECVTCLASS)")?;
    let mut ep = Endpoint::new(args, socket, local, peer, clock, out)?;
    let end = clock.now() + args.duration;
    let mut buf = vec![0u8; 65_536];
    loop {
        let now = clock.now();
        if now >= end || stop.requested() || ep.peer_left {
            break;
        }
        ep.send_due(now)?;
        let wake = ep.next_wakeup().min(end);
        let wait = (wake - clock.now()).min(Duration::from_millis(50));
        if !wait.is_zero() {
            crate::sys::wait_readable_precise(ep.socket.as_fd(), wait)?;
        }
        // Read everything waiting.
        for _ in 0..10_000 {
            match crate::sys::recv_with_ecn(ep.socket.as_fd(), &mut buf) {
                Ok(r) => {
                    let (now, unix_now) = clock_pair(&clock);
                    let at = arrival_instant(now, unix_now, r.arrival_unix_ns);
                    ep.on_datagram(at, &buf[..r.len], r.from, r.ecn)?
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ep.drained = clock.now();
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // ICMP errors from a peer that is not (yet or any more) there.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                Err(e) => return Err(e).context("receive failed"),
            }
        }
    }
    ep.finish(clock.now().min(end));
    Ok(())
}

/// When a datagram really arrived, on the program's clock: `now` minus how long ago the kernel
/// stamped it. Hold times and RTTs then leave out the time the packet sat in the socket buffer
/// while this process waited for a CPU, which on a busy machine would otherwise add tens of
/// milliseconds that the network never caused. Without a stamp, `now`.
/// `now` and `unix_now_ns` are the program's clock and the wall clock read together
/// ([`clock_pair`]).
fn arrival_instant(now: Instant, unix_now_ns: u64, arrival_unix_ns: Option<u64>) -> Instant {
    let Some(at) = arrival_unix_ns else {
        return now;
    };
    now - Duration::from_nanos(unix_now_ns.saturating_sub(at))
}

/// The gap between two reads of the program's clock within which a wall-clock read between
/// them is taken as simultaneous with the first.
const CLOCK_PAIR_SLACK: Duration = Duration::from_micros(5);

/// The program's clock and the wall clock (ns since the Unix epoch), read together: the wall
/// clock is read between two reads of the program's clock, and the tightest of a few tries
/// is kept. A process preempted between two plain reads would move every arrival stamp it
/// converts by as long as it waited, and make an RTT look shorter than the path.
fn clock_pair(clock: &Clock) -> (Instant, u64) {
    let mut best: Option<(Duration, Instant, u64)> = None;
    for _ in 0..4 {
        let before = clock.now();
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let gap = clock.now() - before;
        if best.is_none_or(|(g, _, _)| gap < g) {
            best = Some((gap, before, unix));
        }
        if gap <= CLOCK_PAIR_SLACK {
            break;
        }
    }
    let (_, now, unix) = best.expect("one try at least");
    (now, unix)
}

/// Everything one endpoint keeps.
struct Endpoint<'a> {
    socket: UdpSocket,
    local: SocketAddr,
    peer: Option<SocketAddr>,
    clock: Clock,
    out: &'a JsonLines,
    rtt_samples: bool,
    feedback_interval: Duration,
    ctl: Controller,
    sent_ecn: wire::Ecn,
    video: VideoSource,
    rx: Receiver,
    tracker: FeedbackTracker,
    seq: u64,
    last_feedback_sent: Instant,
    next_second: Instant,
    /// When the socket was last found empty: every datagram that arrived before then has been
    /// handled, so a second that ended by then can be closed.
    drained: Instant,
    peer_left: bool,
    packet: Vec<u8>,
    mode_name: &'static str,
    // This second (sender's view, from the peer's feedback).
    sec_rtts_ms: Vec<f64>,
    sec_acked: u64,
    sec_lost: u64,
    sec_ce: u64,
    sec_sent_bytes: u64,
    sec_frames_sent: u64,
    sec_skipped: u64,
    // The whole call.
    all_rtts_ms: Vec<f64>,
    seconds: u64,
    seconds_ge25: u64,
    fallback_at: Option<Instant>,
    plis_received: u64,
}

/// At most this many RTT samples are kept for the call's summary percentiles.
const MAX_RTT_SAMPLES: usize = 2_000_000;

impl<'a> Endpoint<'a> {
    fn new(
        args: &CallArgs,
        socket: UdpSocket,
        local: SocketAddr,
        peer: Option<SocketAddr>,
        clock: Clock,
        out: &'a JsonLines,
    ) -> anyhow::Result<Endpoint<'a>> {
        let now = clock.now();
        let params = Params {
            min_rate_bps: args.min_rate.bits_per_sec,
            max_rate_bps: args.max_rate.bits_per_sec,
            start_rate_bps: args.start_rate.bits_per_sec,
            mss_bytes: u64::from(args.packet_size),
            ..Params::default()
        };
        let ctl = Controller::new(params, args.mode.controller_mode(), now);
        let sent_ecn = ctl.send_ecn();
        crate::sys::set_send_ecn(socket.as_fd(), &local, sent_ecn)
            .context("cannot set the ECN field (IP_TOS/IPV6_TCLASS)")?;
        let video = VideoSource::new(
            VideoParams {
                fps: args.fps,
                keyframe_interval: args.keyframe_interval(),
                keyframe_factor: args.keyframe_factor(),
                packet_bytes: usize::from(args.packet_size),
                max_queue_delay: Duration::from_millis(100),
            },
            now,
        );
        Ok(Endpoint {
            socket,
            local,
            peer,
            clock,
            out,
            rtt_samples: args.rtt_samples,
            feedback_interval: args.feedback_interval,
            ctl,
            sent_ecn,
            video,
            rx: Receiver::new(now, args.stall_threshold, !args.no_ecn_feedback),
            tracker: FeedbackTracker::default(),
            seq: 0,
            last_feedback_sent: now,
            next_second: now + Duration::from_secs(1),
            drained: now,
            peer_left: false,
            packet: vec![0u8; usize::from(args.packet_size)],
            mode_name: args.mode.controller_mode().name(),
            sec_rtts_ms: Vec::new(),
            sec_acked: 0,
            sec_lost: 0,
            sec_ce: 0,
            sec_sent_bytes: 0,
            sec_frames_sent: 0,
            sec_skipped: 0,
            all_rtts_ms: Vec::new(),
            seconds: 0,
            seconds_ge25: 0,
            fallback_at: None,
            plis_received: 0,
        })
    }

    fn next_wakeup(&self) -> Instant {
        let mut t = self.next_second;
        if self.peer.is_some() {
            t = t
                .min(self.video.next_frame_at())
                .min(self.ctl.next_wakeup());
            if self.video.has_queued() {
                t = t.min(self.ctl.next_send_time());
            }
            if let Some(pli) = self.rx.next_pli_at() {
                t = t.min(pli);
            }
        }
        t.min(self.last_feedback_sent + self.feedback_interval)
    }

    /// Everything due at `now`: a frame, paced packets, feedback, the controller's timer,
    /// events, and the per-second line.
    fn send_due(&mut self, now: Instant) -> anyhow::Result<()> {
        if let Some(peer) = self.peer {
            let frames_before = self.video.frames_sent;
            let skipped_before = self.video.frames_skipped;
            self.video
                .poll_frame(now, self.ctl.target_rate_bps(), self.ctl.pacing_rate_bps());
            self.sec_frames_sent += self.video.frames_sent - frames_before;
            self.sec_skipped += self.video.frames_skipped - skipped_before;
            // Paced packets; bounded so that one turn cannot starve the receive side.
            for _ in 0..64 {
                if !self.video.has_queued() || self.ctl.next_send_time() > now {
                    break;
                }
                let Some(q) = self.video.pop() else { break };
                let m = Media {
                    keyframe: q.keyframe,
                    seq: self.seq,
                    frame: q.frame,
                    index: q.index,
                    count: q.count,
                    send_ns: self.clock.now().as_nanos(),
                };
                self.seq += 1;
                let pkt = &mut self.packet[..q.bytes];
                m.emit(pkt);
                match self.socket.send_to(pkt, peer) {
                    Ok(_) => {}
                    // A full socket buffer or an ICMP error is a lost packet, as on a path.
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused
                        ) => {}
                    Err(e) => return Err(e).with_context(|| format!("cannot send to {peer}")),
                }
                self.ctl.on_packet_sent(now, q.bytes as u64);
                self.sec_sent_bytes += q.bytes as u64;
            }
            if self
                .rx
                .feedback_due(now, self.last_feedback_sent, self.feedback_interval)
            {
                let fb = self.rx.make_feedback(now).to_bytes();
                let _ = self.socket.send_to(&fb, peer);
                self.last_feedback_sent = now;
            }
            // The picture froze: ask for a keyframe (a lost one is asked for again later).
            if let Some(n) = self.rx.poll_pli(now) {
                let _ = self.socket.send_to(&pli_bytes(n), peer);
            }
            self.ctl.on_tick(now);
            self.handle_events()?;
        }
        // Frames count in the second their last packet arrived in, so a second closes only
        // once the socket has been read after its end.
        if self.drained >= self.next_second {
            self.second_line(self.next_second);
            self.next_second += Duration::from_secs(1);
        }
        Ok(())
    }

    fn handle_events(&mut self) -> anyhow::Result<()> {
        while let Some(ev) = self.ctl.poll_event() {
            match ev {
                Event::EcnFallback { at, reason } => {
                    self.fallback_at.get_or_insert(at);
                    self.out.emit(&Record::EcnFallback {
                        t_s: secs(at),
                        reason: reason.name().into(),
                        detail: format!(
                            "sent {}, the peer's counts disagree; now sending not-ect with the classic response",
                            self.sent_ecn
                        ),
                    });
                }
            }
        }
        let want = self.ctl.send_ecn();
        if want != self.sent_ecn {
            crate::sys::set_send_ecn(self.socket.as_fd(), &self.local, want)
                .context("cannot change the ECN field")?;
            self.sent_ecn = want;
        }
        Ok(())
    }

    fn on_datagram(
        &mut self,
        now: Instant,
        bytes: &[u8],
        from: SocketAddr,
        ecn: Option<wire::Ecn>,
    ) -> anyhow::Result<()> {
        match self.peer {
            None => {
                self.peer = Some(from);
                self.video.restart(now);
            }
            // A listener answers one caller; anyone else is ignored.
            Some(p) if !same_peer(p, from) => return Ok(()),
            Some(_) => {}
        }
        let Ok(pkt) = Packet::parse(bytes) else {
            return Ok(());
        };
        match pkt {
            Packet::Media(m) => {
                self.rx.on_media(now, &m, bytes.len(), ecn);
            }
            Packet::Feedback(fb) => {
                for e in &fb.echoes {
                    let rtt = echo_rtt(now, e.send_ns, e.hold_us);
                    self.ctl.on_rtt_sample(rtt);
                    let rtt_ms = ms(rtt);
                    self.sec_rtts_ms.push(rtt_ms);
                    if self.all_rtts_ms.len() < MAX_RTT_SAMPLES {
                        self.all_rtts_ms.push(rtt_ms);
                    }
                    if self.rtt_samples {
                        self.out.emit(&Record::CallRtt {
                            t_s: secs(now),
                            sent_s: e.send_ns as f64 / 1e9,
                            rtt_ms,
                        });
                    }
                }
                if let Some(news) = self.tracker.on_feedback(&fb) {
                    self.sec_acked += news.acked_packets;
                    self.sec_lost += news.lost_packets;
                    self.sec_ce += news.ecn.map_or(0, |c| c.ce);
                    self.ctl.on_feedback(now, &news);
                    // Each packet's send and arrival times, in arrival order (the classic
                    // mode's delay-based controller).
                    for e in &fb.echoes {
                        self.ctl.on_arrival(
                            now,
                            wire::Instant::from_nanos(e.send_ns),
                            echo_arrival(fb.rx_ns, e.hold_us),
                        );
                    }
                    self.handle_events()?;
                }
            }
            Packet::Pli(_) => {
                self.plis_received += 1;
                self.video.request_keyframe(now);
            }
            Packet::Bye => self.peer_left = true,
        }
        Ok(())
    }

    fn second_line(&mut self, end: Instant) {
        let rx = self.rx.take_second(end);
        let p = Percentiles::of(&self.sec_rtts_ms);
        let counts = self.rx.ecn_counts();
        let reported = self.sec_acked + self.sec_lost;
        self.seconds += 1;
        // What the viewer saw: frames the decoder showed.
        if rx.shown >= 25 {
            self.seconds_ge25 += 1;
        }
        self.out.emit(&Record::CallSecond {
            t_s: secs(end),
            fps_sent: self.sec_frames_sent,
            fps_received: rx.frames,
            fps_shown: rx.shown,
            frames_skipped: self.sec_skipped,
            stall_ms: ms(rx.stall),
            freeze_ms: ms(rx.freeze),
            rtt_samples: self.sec_rtts_ms.len() as u64,
            rtt_p50_ms: p.map(|p| p.p50),
            rtt_p99_ms: p.map(|p| p.p99),
            loss_pct: pct(self.sec_lost, reported),
            ce_pct: pct(self.sec_ce, self.sec_acked),
            rate_kbps: self.ctl.target_rate_bps() as f64 / 1e3,
            send_kbps: self.sec_sent_bytes as f64 * 8.0 / 1e3,
            recv_kbps: rx.bytes as f64 * 8.0 / 1e3,
            alpha: self.ctl.alpha(),
            ecn: self.sent_ecn.name().into(),
            rx_ect1: counts.ect1,
            rx_ect0: counts.ect0,
            rx_ce: counts.ce,
            rx_not_ect: counts.not_ect,
        });
        self.sec_rtts_ms.clear();
        self.sec_acked = 0;
        self.sec_lost = 0;
        self.sec_ce = 0;
        self.sec_sent_bytes = 0;
        self.sec_frames_sent = 0;
        self.sec_skipped = 0;
    }

    fn finish(&mut self, now: Instant) {
        if let Some(peer) = self.peer {
            if !self.peer_left {
                // Three copies: one lost bye should not leave the peer waiting.
                for _ in 0..3 {
                    let _ = self.socket.send_to(&BYE, peer);
                }
            }
        }
        let _ = self.rx.finish(now);
        for s in self.rx.stalls() {
            self.out.emit(&Record::CallStall {
                t_s: secs(s.start),
                duration_ms: ms(s.duration),
            });
        }
        for f in self.rx.freezes() {
            self.out.emit(&Record::CallFreeze {
                t_s: secs(f.start),
                duration_ms: ms(f.duration),
            });
        }
        let p = Percentiles::of(&self.all_rtts_ms);
        let stats = *self.ctl.stats();
        let counts = self.rx.ecn_counts();
        let fallback_s = match self.ctl.ecn_state() {
            EcnState::Failed { at, .. } => Some(secs(at)),
            _ => self.fallback_at.map(secs),
        };
        self.out.emit(&Record::CallSummary {
            t_s: self.clock.t_s(),
            mode: self.mode_name.into(),
            duration_s: secs(now),
            frames_sent: self.video.frames_sent,
            frames_received: self.rx.frames_completed(),
            frames_shown: self.rx.frames_shown(),
            fps_ge25_pct: pct(self.seconds_ge25, self.seconds),
            stalls: self.rx.stalls().len() as u64,
            freezes: self.rx.freezes().len() as u64,
            freeze_s_total: self
                .rx
                .freezes()
                .iter()
                .fold(0.0, |t, f| t + f.duration.as_secs_f64()),
            plis_sent: self.rx.plis(),
            plis_received: self.plis_received,
            keyframes_sent: self.video.keyframes_sent,
            rtt_p50_ms: p.map(|p| p.p50),
            rtt_p99_ms: p.map(|p| p.p99),
            loss_pct: pct(stats.lost_packets, stats.acked_packets + stats.lost_packets),
            ce_pct: pct(stats.ce_packets, stats.acked_packets),
            fallback_s,
            rx_ect1: counts.ect1,
            rx_ect0: counts.ect0,
            rx_ce: counts.ce,
            rx_not_ect: counts.not_ect,
        });
    }
}

/// `part / whole` in percent, 0 for an empty whole.
fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Same endpoint, treating an IPv4 address and its IPv4-mapped IPv6 form as one.
fn same_peer(a: SocketAddr, b: SocketAddr) -> bool {
    let canon = |s: SocketAddr| match s {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::from((v4, v6.port())),
            None => s,
        },
        v4 => v4,
    };
    canon(a) == canon(b)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_datagram_is_handled_at_its_kernel_arrival_time() {
        let now = Instant::from_secs(100);
        let unix_now = 1_700_000_000_000_000_000;
        assert_eq!(arrival_instant(now, unix_now, None), now);
        // Stamped 30 ms before the clocks were read: handled 30 ms before `now`.
        let at = arrival_instant(now, unix_now, Some(unix_now - 30_000_000));
        assert_eq!(now - at, Duration::from_millis(30));
        // A stamp from the future (a clock step) never moves time forward.
        assert_eq!(
            arrival_instant(now, unix_now, Some(unix_now + 1_000_000_000)),
            now
        );
    }

    use super::*;
    use crate::records::parse_records;

    fn args(mode: CallMode) -> CallArgs {
        CallArgs {
            listen: None,
            connect: None,
            bind: None,
            mode,
            fps: 30,
            min_rate: Rate::from_bits_per_sec(500_000),
            max_rate: Rate::from_mbit(4),
            start_rate: Rate::from_mbit(1),
            keyframe_interval: Some(Duration::from_secs(1)),
            keyframe_factor: Some(3.0),
            packet_size: 1200,
            feedback_interval: Duration::from_millis(10),
            stall_threshold: Duration::from_millis(200),
            duration: Duration::from_millis(1600),
            rtt_samples: true,
            no_ecn_feedback: false,
            out: None,
        }
    }

    /// Runs a listener with `a` and a caller with `b` on loopback; returns their records.
    fn call_pair(a: CallArgs, b: CallArgs) -> (Vec<Record>, Vec<Record>) {
        let listen = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = listen.local_addr().unwrap();
        let (la, lb) = (JsonLines::memory(), JsonLines::memory());
        let la2 = la.clone();
        let mut la_args = a;
        la_args.duration += Duration::from_millis(300);
        let t =
            std::thread::spawn(move || call(&la_args, listen, None, &la2, &Stop::new()).unwrap());
        let caller = UdpSocket::bind("127.0.0.1:0").unwrap();
        call(&b, caller, Some(addr), &lb, &Stop::new()).unwrap();
        t.join().unwrap();
        (
            parse_records(&la.contents()).unwrap(),
            parse_records(&lb.contents()).unwrap(),
        )
    }

    fn summary(recs: &[Record]) -> (u64, u64, Option<f64>, Option<f64>, [u64; 4]) {
        recs.iter()
            .find_map(|r| match r {
                Record::CallSummary {
                    frames_sent,
                    frames_received,
                    rtt_p99_ms,
                    fallback_s,
                    rx_ect1,
                    rx_ect0,
                    rx_ce,
                    rx_not_ect,
                    ..
                } => Some((
                    *frames_sent,
                    *frames_received,
                    *rtt_p99_ms,
                    *fallback_s,
                    [*rx_not_ect, *rx_ect1, *rx_ect0, *rx_ce],
                )),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no call summary in {recs:?}"))
    }

    #[test]
    fn an_l4s_call_on_loopback_flows_both_ways_with_ect1_read_back() {
        let (listener, caller) = call_pair(args(CallMode::L4s), args(CallMode::L4s));
        for recs in [&listener, &caller] {
            let (sent, received, rtt_p99, fallback, [not_ect, ect1, ect0, _ce]) = summary(recs);
            assert!(
                sent >= 10 && received >= 10,
                "sent {sent}, received {received}"
            );
            assert!(rtt_p99.is_some_and(|r| r < 1000.0));
            assert_eq!(fallback, None);
            // The sender set ECT(1); loopback keeps the TOS byte; the cmsg path read it.
            assert!(ect1 > 0);
            assert_eq!((not_ect, ect0), (0, 0));
            assert!(recs.iter().any(|r| matches!(r, Record::CallSecond { fps_received, ecn, .. } if *fps_received > 0 && ecn == "ect1")));
            assert!(recs.iter().any(|r| matches!(r, Record::CallRtt { .. })));
            assert!(!recs.iter().any(|r| matches!(r, Record::EcnFallback { .. })));
        }
    }

    #[test]
    fn a_classic_call_marks_ect0() {
        let (listener, _) = call_pair(args(CallMode::Classic), args(CallMode::Classic));
        let (_, _, _, _, [not_ect, ect1, ect0, _]) = summary(&listener);
        assert!(ect0 > 0);
        assert_eq!((not_ect, ect1), (0, 0));
    }

    #[test]
    fn a_peer_that_reports_no_ecn_counts_makes_the_caller_fall_back_and_carry_on() {
        let mut quiet = args(CallMode::L4s);
        quiet.no_ecn_feedback = true;
        let (listener, caller) = call_pair(quiet, args(CallMode::L4s));
        let fallback = caller
            .iter()
            .find_map(|r| match r {
                Record::EcnFallback { t_s, reason, .. } => Some((*t_s, reason.clone())),
                _ => None,
            })
            .expect("the caller falls back");
        assert_eq!(fallback.1, "not-reported");
        // The first feedback (10 ms in) already lacks the counts; allow a slow machine.
        assert!(fallback.0 < 1.5);
        // After the fallback the caller sends Not-ECT, and the listener sees it.
        let (_, received, _, _, [not_ect, ..]) = summary(&listener);
        assert!(not_ect > 0 && received >= 10);
        let (_, _, _, fallback_s, _) = summary(&caller);
        assert_eq!(fallback_s, Some(fallback.0));
    }

    #[test]
    fn contradictory_rates_are_a_usage_error_quoting_both() {
        let mut a = args(CallMode::L4s);
        a.min_rate = Rate::from_mbit(9);
        let err = a.check().unwrap_err();
        assert_eq!(err.0, "--min-rate '9mbit' is above --max-rate '4mbit'");
    }

    #[test]
    fn keyframes_default_to_webrtcs_interval_and_cap_for_the_frame_rate() {
        let mut a = args(CallMode::L4s);
        (a.keyframe_interval, a.keyframe_factor) = (None, None);
        assert_eq!(a.keyframe_interval(), Duration::from_secs(100));
        assert_eq!(a.keyframe_factor(), 9.0);
        a.fps = 5;
        assert_eq!(a.keyframe_factor(), 3.0);
        a.keyframe_factor = Some(0.5);
        assert_eq!(
            a.check().unwrap_err().0,
            "--keyframe-factor '0.5' must be between 1 and 100 (try 9)"
        );
    }

    #[test]
    fn ipv4_and_its_mapped_form_are_the_same_peer() {
        let a: SocketAddr = "127.0.0.1:5".parse().unwrap();
        let b: SocketAddr = "[::ffff:127.0.0.1]:5".parse().unwrap();
        assert!(same_peer(a, b));
        assert!(!same_peer(a, "127.0.0.1:6".parse().unwrap()));
    }
}
