//! The page-load client's connection manager: which request goes on which HTTP/1.1
//! persistent connection, and when to open a new one. A sans-IO state machine: it is told
//! when a request is needed ([`ConnManager::request`]), when a connection's handshake is done
//! ([`ConnManager::connected`]) and when a connection has finished its response
//! ([`ConnManager::finished`]), each with `now` (time since the load started); it answers with
//! [`Action`]s from [`ConnManager::poll`]: open a connection, or send a request on one. It owns
//! no socket and reads no clock; the client does both.
//!
//! Two designs (as Patrick McManus's 2011 post "Separating HTTP Connections from TCP
//! Connections" describes them):
//!
//! - [`Design::Bound`]: a request that finds no idle connection opens one (if the origin's
//!   limit allows) and waits for that connection's handshake, as Firefox 4 did.
//! - [`Design::Pool`]: the request is queued and a connection is opened for it, but the
//!   request goes to whichever of the origin's connections is free first; a new connection
//!   that finds the queue empty when its handshake completes joins the idle pool.
//!
//! Among idle connections it picks by [`IdleChoice`]: the one idle longest (`Oldest`, a FIFO,
//! Firefox 4's default) or the one that moved the most bytes in one burst (`LargestBurst`, a
//! proxy for the server's congestion window on that connection). A burst here is one response:
//! the client does not pipeline in this mode, so no two responses share a flight.
//!
//! Statistics: every connection opened because a request had none is a "need"; a need is
//! "served by another" when its request was sent on some other connection before the one
//! opened for it was ready, and the time saved is from that send to the handshake's end.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

pub type ReqId = u64;
pub type ConnId = u64;

#[derive(
    Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// A request waits for the handshake of the connection opened for it
    Bound,
    /// A request goes to whichever connection is free first, new or persistent
    Pool,
}

#[derive(
    Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum IdleChoice {
    /// The connection idle longest (FIFO)
    Oldest,
    /// The connection that moved the most bytes in one response
    LargestBurst,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub design: Design,
    pub idle_choice: IdleChoice,
    /// Connections per origin, open or opening.
    pub per_host: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open connection `conn` to `origin`.
    Open { conn: ConnId, origin: String },
    /// Send request `req` on connection `conn` (ready and idle).
    Dispatch { req: ReqId, conn: ConnId },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ConnState {
    Connecting,
    Idle { since: Duration },
    Busy,
}

#[derive(Clone, Debug)]
struct Conn {
    origin: String,
    state: ConnState,
    /// The most bytes one response moved on this connection.
    max_burst_bytes: u64,
}

/// A connection opened because a request found none free.
#[derive(Clone, Debug, PartialEq)]
struct Need {
    req: ReqId,
    conn: ConnId,
    /// When the request was sent on another connection, before `conn` was ready.
    served_elsewhere: Option<Duration>,
    ready: Option<Duration>,
}

/// What the manager did over one load.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    /// Connections opened because a request found no idle one.
    pub new_connections_needed: usize,
    /// Of those, how many requests were sent on another connection that freed up during the
    /// new one's handshake.
    pub served_by_other: usize,
    /// For each of those whose new connection became ready: its ready time minus the send.
    pub saved_ms: Vec<f64>,
}

pub struct ConnManager {
    params: Params,
    next_conn: ConnId,
    conns: BTreeMap<ConnId, Conn>,
    queues: HashMap<String, VecDeque<ReqId>>,
    /// Bound design: the request each opening connection was opened for.
    bound: HashMap<ConnId, ReqId>,
    needs: Vec<Need>,
    actions: VecDeque<Action>,
}

impl ConnManager {
    pub fn new(params: Params) -> ConnManager {
        ConnManager {
            params,
            next_conn: 1,
            conns: BTreeMap::new(),
            queues: HashMap::new(),
            bound: HashMap::new(),
            needs: Vec::new(),
            actions: VecDeque::new(),
        }
    }

    /// A request for `origin` is needed now.
    pub fn request(&mut self, now: Duration, req: ReqId, origin: &str) {
        if let Some(conn) = self.pick_idle(origin) {
            self.dispatch(now, req, conn);
            return;
        }
        let opening = self.count(origin, |s| *s == ConnState::Connecting);
        let room = self.count(origin, |_| true) < self.params.per_host;
        match self.params.design {
            Design::Bound if room => {
                let conn = self.open(origin, req);
                self.bound.insert(conn, req);
            }
            Design::Pool => {
                let q = self.queues.entry(origin.to_string()).or_default();
                q.push_back(req);
                // One opening connection per queued request, within the origin's limit.
                if room && q.len() > opening {
                    self.open(origin, req);
                }
            }
            Design::Bound => self
                .queues
                .entry(origin.to_string())
                .or_default()
                .push_back(req),
        }
    }

    /// Connection `conn`'s handshake is done.
    pub fn connected(&mut self, now: Duration, conn: ConnId) {
        for n in self.needs.iter_mut().filter(|n| n.conn == conn) {
            n.ready = Some(now);
        }
        match self.bound.remove(&conn) {
            Some(req) => self.dispatch(now, req, conn),
            None => {
                self.swap_needs_for_head(conn);
                self.free(now, conn);
            }
        }
    }

    /// Several connections of an origin open at once for as many queued requests, and their
    /// handshakes end in any order: the first ready takes the queue's head, whose own
    /// connection is still opening. That is no request served by a connection that freed up,
    /// only the order of twin handshakes, so the two needs trade requests: `conn` stands for
    /// the head, the head's connection for the request `conn` was opened for.
    ///
    /// When `conn`'s own request already left on a connection that freed up, `conn` is spare,
    /// and the trade passes that win on: `conn` stands for the head, and the head's
    /// connection, still opening, becomes the spare one, served elsewhere since that earlier
    /// send. Counting the head too would count one connection saved twice, once per
    /// connection of a burst whose handshakes end together (their SYN-ACKs arrive in one
    /// flight, and which of them the client reads first decides nothing); the time saved,
    /// from that send to the end of the spare connection's handshake, is the same sum.
    fn swap_needs_for_head(&mut self, conn: ConnId) {
        let Some(origin) = self.conns.get(&conn).map(|c| c.origin.clone()) else {
            return;
        };
        let Some(&head) = self.queues.get(&origin).and_then(VecDeque::front) else {
            return;
        };
        let own = self.needs.iter().position(|n| n.conn == conn);
        let heads = self
            .needs
            .iter()
            .position(|n| n.req == head && n.conn != conn && n.ready.is_none());
        if let (Some(a), Some(b)) = (own, heads) {
            let (req, served) = (self.needs[a].req, self.needs[a].served_elsewhere);
            self.needs[a].req = head;
            self.needs[a].served_elsewhere = None;
            self.needs[b].req = req;
            self.needs[b].served_elsewhere = served;
        }
    }

    /// Connection `conn` has read the whole response to its request, `bytes` long.
    pub fn finished(&mut self, now: Duration, conn: ConnId, bytes: u64) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.max_burst_bytes = c.max_burst_bytes.max(bytes);
        }
        self.free(now, conn);
    }

    pub fn poll(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Requests waiting for a connection, over all origins.
    pub fn queued(&self) -> usize {
        self.queues.values().map(VecDeque::len).sum::<usize>() + self.bound.len()
    }

    pub fn stats(&self) -> Stats {
        let served: Vec<&Need> = self
            .needs
            .iter()
            .filter(|n| n.served_elsewhere.is_some())
            .collect();
        Stats {
            new_connections_needed: self.needs.len(),
            served_by_other: served.len(),
            saved_ms: served
                .iter()
                .filter_map(|n| Some((n.ready? - n.served_elsewhere?).as_secs_f64() * 1e3))
                .collect(),
        }
    }

    fn count(&self, origin: &str, f: impl Fn(&ConnState) -> bool) -> usize {
        self.conns
            .values()
            .filter(|c| c.origin == origin && f(&c.state))
            .count()
    }

    fn open(&mut self, origin: &str, req: ReqId) -> ConnId {
        let conn = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            conn,
            Conn {
                origin: origin.to_string(),
                state: ConnState::Connecting,
                max_burst_bytes: 0,
            },
        );
        self.needs.push(Need {
            req,
            conn,
            served_elsewhere: None,
            ready: None,
        });
        self.actions.push_back(Action::Open {
            conn,
            origin: origin.to_string(),
        });
        conn
    }

    /// `conn` can take a request: the origin's next queued one, or it waits idle.
    fn free(&mut self, now: Duration, conn: ConnId) {
        let Some(origin) = self.conns.get(&conn).map(|c| c.origin.clone()) else {
            return;
        };
        match self.queues.get_mut(&origin).and_then(VecDeque::pop_front) {
            Some(req) => self.dispatch(now, req, conn),
            None => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.state = ConnState::Idle { since: now };
                }
            }
        }
    }

    fn dispatch(&mut self, now: Duration, req: ReqId, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.state = ConnState::Busy;
        }
        for n in self.needs.iter_mut() {
            if n.req == req && n.conn != conn && n.ready.is_none() {
                n.served_elsewhere = Some(now);
            }
        }
        self.actions.push_back(Action::Dispatch { req, conn });
    }

    fn pick_idle(&self, origin: &str) -> Option<ConnId> {
        let idle = self.conns.iter().filter_map(|(id, c)| match c.state {
            ConnState::Idle { since } if c.origin == origin => {
                Some((*id, since, c.max_burst_bytes))
            }
            _ => None,
        });
        match self.params.idle_choice {
            // Earliest idle first; the lower id breaks a tie.
            IdleChoice::Oldest => idle.min_by_key(|&(id, since, _)| (since, id)),
            // Largest burst first; then the oldest.
            IdleChoice::LargestBurst => {
                idle.min_by_key(|&(id, since, burst)| (std::cmp::Reverse(burst), since, id))
            }
        }
        .map(|(id, _, _)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn mgr(design: Design, choice: IdleChoice, per_host: usize) -> ConnManager {
        ConnManager::new(Params {
            design,
            idle_choice: choice,
            per_host,
        })
    }

    fn drain(m: &mut ConnManager) -> Vec<Action> {
        std::iter::from_fn(|| m.poll()).collect()
    }

    fn open(conn: ConnId) -> Action {
        Action::Open {
            conn,
            origin: "www".into(),
        }
    }

    fn send(req: ReqId, conn: ConnId) -> Action {
        Action::Dispatch { req, conn }
    }

    /// The post's case: the HTML's connection frees up 100 ms into a 250 ms handshake.
    fn html_then_image(design: Design) -> (ConnManager, Vec<Action>) {
        let mut m = mgr(design, IdleChoice::Oldest, 6);
        m.request(ms(0), 0, "www");
        m.connected(ms(250), 1);
        assert_eq!(drain(&mut m), vec![open(1), send(0, 1)]);
        // The image is needed while the HTML still arrives.
        m.request(ms(400), 1, "www");
        assert_eq!(drain(&mut m), vec![open(2)]);
        m.finished(ms(500), 1, 30_000);
        let mut seen = drain(&mut m);
        m.connected(ms(650), 2);
        seen.extend(drain(&mut m));
        (m, seen)
    }

    #[test]
    fn bound_requests_wait_for_their_own_handshake() {
        let (m, seen) = html_then_image(Design::Bound);
        assert_eq!(seen, vec![send(1, 2)]);
        let s = m.stats();
        assert_eq!((s.new_connections_needed, s.served_by_other), (2, 0));
        assert!(s.saved_ms.is_empty());
    }

    #[test]
    fn pool_requests_take_the_connection_that_frees_up_during_the_handshake() {
        let (m, seen) = html_then_image(Design::Pool);
        // Sent on the HTML's connection at 500 ms; the new one is idle in the pool at 650.
        assert_eq!(seen, vec![send(1, 1)]);
        let s = m.stats();
        assert_eq!((s.new_connections_needed, s.served_by_other), (2, 1));
        assert_eq!(s.saved_ms, vec![150.0]);
        // The pooled connection serves the next request at once.
        let mut m = m;
        m.request(ms(700), 2, "www");
        assert_eq!(drain(&mut m), vec![send(2, 2)]);
    }

    #[test]
    fn a_handshake_that_wins_the_race_serves_its_request() {
        let mut m = mgr(Design::Pool, IdleChoice::Oldest, 6);
        m.request(ms(0), 0, "www");
        m.connected(ms(250), 1);
        m.request(ms(300), 1, "www");
        m.connected(ms(550), 2);
        m.finished(ms(600), 1, 1000);
        assert_eq!(
            drain(&mut m),
            vec![open(1), send(0, 1), open(2), send(1, 2)]
        );
        assert_eq!(m.stats().served_by_other, 0);
    }

    #[test]
    fn twin_handshakes_that_end_out_of_order_serve_no_request_by_another() {
        let mut m = mgr(Design::Pool, IdleChoice::Oldest, 6);
        m.request(ms(0), 0, "www");
        m.request(ms(0), 1, "www");
        // Connection 2, opened for request 1, is ready first and takes request 0.
        m.connected(ms(250), 2);
        m.connected(ms(251), 1);
        assert_eq!(
            drain(&mut m),
            vec![open(1), open(2), send(0, 2), send(1, 1)]
        );
        let s = m.stats();
        assert_eq!((s.new_connections_needed, s.served_by_other), (2, 0));
        // A connection that freed up still counts: request 2 opens connection 3, request 3
        // connection 4; connection 1 frees up and takes request 2; connection 4 is ready
        // next and takes request 3 (trading needs with 3); connection 3 finds nothing queued.
        m.request(ms(300), 2, "www");
        m.request(ms(300), 3, "www");
        m.finished(ms(400), 1, 10);
        m.connected(ms(550), 4);
        m.connected(ms(551), 3);
        assert_eq!(
            drain(&mut m),
            vec![open(3), open(4), send(2, 1), send(3, 4)]
        );
        let s = m.stats();
        assert_eq!((s.new_connections_needed, s.served_by_other), (4, 1));
        assert_eq!(s.saved_ms, vec![151.0]);
    }

    #[test]
    fn a_spare_connection_passes_its_win_on_rather_than_counting_it_twice() {
        let mut m = mgr(Design::Pool, IdleChoice::Oldest, 6);
        m.request(ms(0), 0, "www");
        m.connected(ms(250), 1);
        // Two requests while the HTML arrives open connections 2 and 3.
        m.request(ms(300), 1, "www");
        m.request(ms(300), 2, "www");
        // The HTML's connection frees up and takes request 1.
        m.finished(ms(400), 1, 30_000);
        // 2 and 3's SYN-ACKs arrive together: 2, spare, takes request 2 a moment before 3
        // is read.
        m.connected(ms(550), 2);
        m.connected(ms(550) + Duration::from_micros(100), 3);
        assert_eq!(
            drain(&mut m),
            vec![
                open(1),
                send(0, 1),
                open(2),
                open(3),
                send(1, 1),
                send(2, 2)
            ]
        );
        let s = m.stats();
        // One connection was saved (3 sits idle), by 150.1 ms.
        assert_eq!((s.new_connections_needed, s.served_by_other), (3, 1));
        assert_eq!(s.saved_ms.len(), 1);
        assert!((s.saved_ms[0] - 150.1).abs() < 1e-6, "{:?}", s.saved_ms);
    }

    #[test]
    fn the_per_host_limit_queues_requests_in_both_designs() {
        for design in [Design::Bound, Design::Pool] {
            let mut m = mgr(design, IdleChoice::Oldest, 2);
            for r in 0..5 {
                m.request(ms(0), r, "www");
            }
            assert_eq!(drain(&mut m), vec![open(1), open(2)], "{design:?}");
            assert_eq!(m.queued(), 5, "{design:?}");
            m.connected(ms(250), 1);
            m.connected(ms(250), 2);
            assert_eq!(drain(&mut m), vec![send(0, 1), send(1, 2)], "{design:?}");
            m.finished(ms(500), 2, 10);
            assert_eq!(drain(&mut m), vec![send(2, 2)], "{design:?}");
            // Other origins have limits of their own.
            m.request(ms(500), 9, "img1");
            assert_eq!(
                drain(&mut m),
                vec![Action::Open {
                    conn: 3,
                    origin: "img1".into()
                }]
            );
        }
    }

    #[test]
    fn pool_opens_no_more_connections_than_requests_wait() {
        let mut m = mgr(Design::Pool, IdleChoice::Oldest, 6);
        m.request(ms(0), 0, "www");
        m.request(ms(0), 1, "www");
        assert_eq!(drain(&mut m), vec![open(1), open(2)]);
        m.connected(ms(250), 1);
        m.connected(ms(250), 2);
        m.finished(ms(300), 1, 10);
        m.finished(ms(310), 2, 10);
        drain(&mut m);
        // Two idle connections: a new request opens nothing.
        m.request(ms(400), 2, "www");
        assert_eq!(drain(&mut m), vec![send(2, 1)]);
    }

    #[test]
    fn idle_choice_picks_the_oldest_or_the_largest_burst() {
        for (choice, want) in [(IdleChoice::Oldest, 1), (IdleChoice::LargestBurst, 2)] {
            let mut m = mgr(Design::Pool, choice, 6);
            m.request(ms(0), 0, "www");
            m.request(ms(0), 1, "www");
            m.connected(ms(250), 1);
            m.connected(ms(250), 2);
            // The small response ends first (idle longest), the 2 MB one later.
            m.finished(ms(500), 1, 2_000);
            m.finished(ms(3_000), 2, 2_000_000);
            drain(&mut m);
            m.request(ms(5_000), 2, "www");
            assert_eq!(drain(&mut m), vec![send(2, want)], "{choice:?}");
        }
    }
}
