//! Chromium's network log (`--log-net-log=FILE`, a JSON file: `constants` naming the event and
//! source types, then `events` in the order they happened), read for what its HTTP/1.1 socket
//! pool did with each request that had to open a connection: was the request served by that
//! connection, by another connection of its group that became free first (a response ended
//! and the socket was handed over), or by another new connection that was ready first. This
//! is the late binding that `demo conn-reuse`'s `pool` manager models, measured on a real
//! client.
//!
//! How a request is followed. Each socket request is an `HTTP_STREAM_JOB` source that logs
//! `TCP_CLIENT_SOCKET_POOL_REQUESTED_SOCKET` (its group, `http://HOST <...>`) and opens a
//! `SOCKET_POOL` event. When the pool has no idle socket and room for one more, it creates a
//! connect job right there, inside the same call: that job's `SOCKET_POOL_CONNECT_JOB_CREATED`
//! is the next thing logged by anyone but the job itself. A request that finds its group full
//! logs `SOCKET_POOL_STALLED_MAX_SOCKETS_PER_GROUP` and opens nothing. When the request gets a
//! socket it logs `SOCKET_POOL_REUSED_AN_EXISTING_SOCKET` (a socket that served a response
//! before), `SOCKET_POOL_BOUND_TO_CONNECT_JOB` (the socket of a connect job that just
//! finished: its own or another's) and `SOCKET_POOL_BOUND_TO_SOCKET`. Backup jobs (a second
//! attempt the pool starts when a group's first connect is slow) and preconnects
//! (`TCP_CLIENT_SOCKET_POOL_REQUESTED_SOCKETS`) are counted apart: no request opened them.
//!
//! Chromium's file is outside input: every field is looked up, never assumed, and a log that
//! does not read is a [`NetLogError`]. Pure: text in, counts out.
//!
//! Not here: running Chromium (the `demo` crate), the page load time (the DOM's title,
//! [`crate::page`]).

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde_json::Value;

/// A log that does not read as Chromium's net log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetLogError(pub String);

impl fmt::Display for NetLogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NetLogError {}

/// What the socket pool did for the requests of the groups asked about.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolStats {
    /// Socket requests that got a socket.
    pub requests: usize,
    /// Requests that found no idle socket and opened a connection (created a connect job).
    pub new_connections_needed: usize,
    /// Of those, served by a socket that had served a response before and became free first.
    pub served_by_freed: usize,
    /// Of those, served by another new connection that was ready before their own.
    pub served_by_other_new: usize,
    /// Connect jobs the pool started: for requests and preconnects, then backups.
    pub connect_jobs: usize,
    pub backup_jobs: usize,
    /// For each request served by another connection whose own connection finished: how much
    /// sooner it got its socket, ms.
    pub saved_ms: Vec<f64>,
}

impl PoolStats {
    /// The share of new connections whose request a socket that became free first served, %:
    /// the late binding `pool` counts (a request that takes a sibling new connection ready
    /// before its own is not counted there, nothing having freed up).
    pub fn served_by_freed_pct(&self) -> f64 {
        100.0 * self.served_by_freed as f64 / self.new_connections_needed.max(1) as f64
    }
}

/// One socket request as the log tells it.
#[derive(Clone, Debug, Default)]
struct Request {
    host: String,
    /// The connect job created inside this request's call.
    created_job: Option<u64>,
    reused: bool,
    bound_job: Option<u64>,
    bound_at_ms: Option<f64>,
    failed: bool,
}

/// The host of a socket group's id, `[FLAGS/]http://HOST[:PORT] <...>` (FLAGS such as `pm`,
/// privacy mode, which Chromium uses for third-party requests without cookies); `None` for
/// other schemes.
pub fn group_host(group_id: &str) -> Option<&str> {
    let start = group_id.find("http://")?;
    let flags = &group_id[..start];
    if !(flags.is_empty() || (flags.ends_with('/') && !flags.contains(' '))) {
        return None;
    }
    let rest = &group_id[start + "http://".len()..];
    let end = rest.find([':', '/', ' ']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Reads the log's text. A log whose writer was stopped before it closed the JSON (Chromium
/// ends each event with a comma and closes the list on exit) is read up to its last event.
pub fn parse(text: &str) -> Result<Value, NetLogError> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(first) => {
            let cut = text.trim_end().trim_end_matches(',');
            serde_json::from_str(&format!("{cut}]}}"))
                .map_err(|_| NetLogError(format!("not a net log: {first}")))
        }
    }
}

/// The socket pool's story for the requests to `hosts` (HTTP/1.1 over plain TCP).
pub fn socket_pool(log: &Value, hosts: &HashSet<String>) -> Result<PoolStats, NetLogError> {
    let constants = log
        .get("constants")
        .ok_or_else(|| NetLogError("no constants".into()))?;
    let names = |key: &str| -> Result<HashMap<u64, String>, NetLogError> {
        let map = constants
            .get(key)
            .and_then(Value::as_object)
            .ok_or_else(|| NetLogError(format!("no constants.{key}")))?;
        Ok(map
            .iter()
            .filter_map(|(k, v)| Some((v.as_u64()?, k.clone())))
            .collect())
    };
    let event_names = names("logEventTypes")?;
    let source_names = names("logSourceType")?;
    let begin = constants
        .get("logEventPhase")
        .and_then(|p| p.get("PHASE_BEGIN"))
        .and_then(Value::as_u64)
        .unwrap_or(1);
    let end = constants
        .get("logEventPhase")
        .and_then(|p| p.get("PHASE_END"))
        .and_then(Value::as_u64)
        .unwrap_or(2);
    let events = log
        .get("events")
        .and_then(Value::as_array)
        .ok_or_else(|| NetLogError("no events".into()))?;

    let mut requests: HashMap<u64, Request> = HashMap::new();
    let mut order: Vec<u64> = Vec::new();
    let mut job_end_ms: HashMap<u64, f64> = HashMap::new();
    let mut stats = PoolStats::default();
    // The request whose SOCKET_POOL began last, until anyone but a connect job logs again.
    let mut last_begun: Option<u64> = None;
    for e in events {
        let (Some(kind), Some(source)) = (
            e.get("type").and_then(Value::as_u64),
            e.get("source")
                .and_then(|s| s.get("type"))
                .and_then(Value::as_u64),
        ) else {
            continue;
        };
        let id = e
            .get("source")
            .and_then(|s| s.get("id"))
            .and_then(Value::as_u64)
            .unwrap_or(u64::MAX);
        let phase = e.get("phase").and_then(Value::as_u64).unwrap_or(0);
        let time_ms = e.get("time").and_then(|t| {
            t.as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .or(t.as_f64())
        });
        let params = e.get("params");
        let event = event_names.get(&kind).map_or("", String::as_str);
        let source = source_names.get(&source).map_or("", String::as_str);
        let dependency = || {
            params
                .and_then(|p| p.get("source_dependency"))
                .and_then(|d| d.get("id"))
                .and_then(Value::as_u64)
        };
        if source.ends_with("CONNECT_JOB") {
            match event {
                "SOCKET_POOL_CONNECT_JOB_CREATED" => {
                    let host = params
                        .and_then(|p| p.get("group_id"))
                        .and_then(Value::as_str)
                        .and_then(group_host);
                    if !host.is_some_and(|h| hosts.contains(h)) {
                        continue;
                    }
                    let backup = params
                        .and_then(|p| p.get("backup_job"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    if backup {
                        stats.backup_jobs += 1;
                        continue;
                    }
                    stats.connect_jobs += 1;
                    if let Some(r) = last_begun.take().and_then(|r| requests.get_mut(&r)) {
                        if host == Some(r.host.as_str()) && r.created_job.is_none() {
                            r.created_job = Some(id);
                        }
                    }
                }
                "CONNECT_JOB" if phase == end => {
                    if let Some(t) = time_ms {
                        job_end_ms.insert(id, t);
                    }
                }
                _ => {}
            }
            continue;
        }
        if source != "HTTP_STREAM_JOB" {
            last_begun = None;
            continue;
        }
        match event {
            "TCP_CLIENT_SOCKET_POOL_REQUESTED_SOCKET" => {
                let host = params
                    .and_then(|p| p.get("group_id"))
                    .and_then(Value::as_str)
                    .and_then(group_host);
                if let Some(h) = host.filter(|h| hosts.contains(*h)) {
                    requests.insert(
                        id,
                        Request {
                            host: h.to_string(),
                            ..Request::default()
                        },
                    );
                    order.push(id);
                }
                last_begun = None;
            }
            "SOCKET_POOL" if phase == begin => {
                last_begun = requests.contains_key(&id).then_some(id);
            }
            "SOCKET_POOL" if phase == end => {
                last_begun = None;
                let failed = params.and_then(|p| p.get("net_error")).is_some();
                if let Some(r) = requests.get_mut(&id) {
                    r.failed |= failed;
                }
            }
            "SOCKET_POOL_REUSED_AN_EXISTING_SOCKET" => {
                if let Some(r) = requests.get_mut(&id) {
                    r.reused = true;
                }
            }
            "SOCKET_POOL_BOUND_TO_CONNECT_JOB" => {
                if let Some(r) = requests.get_mut(&id) {
                    r.bound_job = dependency();
                    r.bound_at_ms = r.bound_at_ms.or(time_ms);
                }
            }
            "SOCKET_POOL_BOUND_TO_SOCKET" => {
                if let Some(r) = requests.get_mut(&id) {
                    r.bound_at_ms = r.bound_at_ms.or(time_ms);
                }
            }
            // A stall or another event of the request that just began: it may still open.
            _ if last_begun == Some(id) => {}
            _ => last_begun = None,
        }
    }
    for id in order {
        let r = &requests[&id];
        if r.failed || r.bound_at_ms.is_none() {
            continue;
        }
        stats.requests += 1;
        let Some(own) = r.created_job else { continue };
        stats.new_connections_needed += 1;
        if r.bound_job == Some(own) {
            continue;
        }
        if r.reused {
            stats.served_by_freed += 1;
        } else {
            stats.served_by_other_new += 1;
        }
        if let (Some(ready), Some(bound)) = (job_end_ms.get(&own), r.bound_at_ms) {
            stats.saved_ms.push((ready - bound).max(0.0));
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log in Chromium's layout: event types 1.., source types, and the events.
    fn log(events: &[Event]) -> Value {
        let kinds = [
            "TCP_CLIENT_SOCKET_POOL_REQUESTED_SOCKET",
            "SOCKET_POOL",
            "SOCKET_POOL_STALLED_MAX_SOCKETS_PER_GROUP",
            "SOCKET_POOL_REUSED_AN_EXISTING_SOCKET",
            "SOCKET_POOL_BOUND_TO_CONNECT_JOB",
            "SOCKET_POOL_BOUND_TO_SOCKET",
            "CONNECT_JOB",
            "SOCKET_POOL_CONNECT_JOB_CREATED",
            "TCP_CONNECT",
        ];
        let sources = ["HTTP_STREAM_JOB", "TCP_CONNECT_JOB", "SOCKET"];
        let num = |list: &[&str], name: &str| list.iter().position(|k| *k == name).unwrap() + 1;
        let evs: Vec<Value> = events
            .iter()
            .map(|(t, s, id, e, phase, params)| {
                serde_json::json!({
                    "time": t.to_string(),
                    "type": num(&kinds, e),
                    "source": {"id": id, "type": num(&sources, s)},
                    "phase": phase,
                    "params": params,
                })
            })
            .collect();
        let map = |list: &[&str]| -> serde_json::Map<String, Value> {
            list.iter()
                .enumerate()
                .map(|(i, k)| (k.to_string(), Value::from(i + 1)))
                .collect()
        };
        serde_json::json!({
            "constants": {
                "logEventTypes": map(&kinds),
                "logSourceType": map(&sources),
                "logEventPhase": {"PHASE_NONE": 0, "PHASE_BEGIN": 1, "PHASE_END": 2},
            },
            "events": evs,
        })
    }

    /// One event of [`log`]: (time, source type, source id, event, phase, params).
    type Event = (u64, &'static str, u64, &'static str, u64, Value);

    fn group_id(host: &str) -> String {
        format!("http://{host} <http://{host} same_site>")
    }

    /// Request `id` asks the pool for a socket to `host` at `t_ms`.
    fn requested(t_ms: u64, id: u64, host: &str) -> Event {
        let params = serde_json::json!({"group_id": group_id(host)});
        let e = "TCP_CLIENT_SOCKET_POOL_REQUESTED_SOCKET";
        (t_ms, "HTTP_STREAM_JOB", id, e, 0, params)
    }

    /// The pool creates connect job `id` for `host` at `t_ms` (a backup job or not).
    fn job_created(t_ms: u64, id: u64, host: &str, backup: bool) -> Event {
        let params = serde_json::json!({"group_id": group_id(host), "backup_job": backup});
        let e = "SOCKET_POOL_CONNECT_JOB_CREATED";
        (t_ms, "TCP_CONNECT_JOB", id, e, 0, params)
    }

    /// Request `id` finds its group full at `t_ms`.
    fn stalled(t_ms: u64, id: u64) -> Event {
        let e = "SOCKET_POOL_STALLED_MAX_SOCKETS_PER_GROUP";
        (t_ms, "HTTP_STREAM_JOB", id, e, 0, Value::Null)
    }

    fn dep(id: u64) -> Value {
        serde_json::json!({"source_dependency": {"id": id, "type": 3}})
    }

    const N: Value = Value::Null;

    #[test]
    fn a_request_that_opened_a_connection_and_got_a_freed_socket_counts_with_the_time_saved() {
        let hs = "HTTP_STREAM_JOB";
        let cj = "TCP_CONNECT_JOB";
        let l = log(&[
            // Request 10 opens job 11, which it is served by.
            requested(100, 10, "img1"),
            (100, hs, 10, "SOCKET_POOL", 1, N),
            (100, cj, 11, "CONNECT_JOB", 1, N),
            job_created(100, 11, "img1", false),
            // Request 20 opens job 21 ...
            requested(120, 20, "img1"),
            (120, hs, 20, "SOCKET_POOL", 1, N),
            (120, cj, 21, "CONNECT_JOB", 1, N),
            job_created(120, 21, "img1", false),
            (350, cj, 11, "CONNECT_JOB", 2, N),
            (350, hs, 10, "SOCKET_POOL_BOUND_TO_CONNECT_JOB", 0, dep(11)),
            (350, hs, 10, "SOCKET_POOL_BOUND_TO_SOCKET", 0, dep(12)),
            (350, hs, 10, "SOCKET_POOL", 2, N),
            // A backup job for the group: no request opened it.
            job_created(360, 31, "img1", true),
            // ... but request 10's response ends at 400 ms and 20 gets its socket, 70 ms
            // before job 21 is ready.
            (400, hs, 20, "SOCKET_POOL_REUSED_AN_EXISTING_SOCKET", 0, N),
            (400, hs, 20, "SOCKET_POOL_BOUND_TO_SOCKET", 0, dep(12)),
            (400, hs, 20, "SOCKET_POOL", 2, N),
            (470, cj, 21, "CONNECT_JOB", 2, N),
            // Request 40 finds the group full: it stalls and opens nothing.
            requested(480, 40, "img1"),
            (480, hs, 40, "SOCKET_POOL", 1, N),
            stalled(480, 40),
            (490, "SOCKET", 12, "TCP_CONNECT", 0, N),
            (500, hs, 40, "SOCKET_POOL_REUSED_AN_EXISTING_SOCKET", 0, N),
            (500, hs, 40, "SOCKET_POOL_BOUND_TO_SOCKET", 0, dep(22)),
            (500, hs, 40, "SOCKET_POOL", 2, N),
            // Another name, not asked about.
            requested(510, 50, "other"),
            (510, hs, 50, "SOCKET_POOL", 1, N),
            job_created(510, 51, "other", false),
        ]);
        let hosts: HashSet<String> = ["img1".to_string()].into();
        let s = socket_pool(&l, &hosts).unwrap();
        assert_eq!(
            s,
            PoolStats {
                requests: 3,
                new_connections_needed: 2,
                served_by_freed: 1,
                served_by_other_new: 0,
                connect_jobs: 2,
                backup_jobs: 1,
                saved_ms: vec![70.0],
            }
        );
        assert_eq!(s.served_by_freed_pct(), 50.0);
    }

    #[test]
    fn a_connect_job_not_created_inside_a_requests_call_is_nobodys() {
        let hs = "HTTP_STREAM_JOB";
        let cj = "TCP_CONNECT_JOB";
        let l = log(&[
            requested(100, 10, "www"),
            (100, hs, 10, "SOCKET_POOL", 1, N),
            stalled(100, 10),
            // A slot frees up later and the pool opens a job for the waiting request: not
            // inside the request's call (something else logged between).
            (200, "SOCKET", 5, "TCP_CONNECT", 0, N),
            job_created(200, 11, "www", false),
            (450, cj, 11, "CONNECT_JOB", 2, N),
            (450, hs, 10, "SOCKET_POOL_BOUND_TO_CONNECT_JOB", 0, dep(11)),
            (450, hs, 10, "SOCKET_POOL_BOUND_TO_SOCKET", 0, dep(12)),
            (450, hs, 10, "SOCKET_POOL", 2, N),
        ]);
        let s = socket_pool(&l, &["www".to_string()].into()).unwrap();
        assert_eq!(
            (s.requests, s.new_connections_needed, s.connect_jobs),
            (1, 0, 1)
        );
    }

    #[test]
    fn group_ids_name_their_host_and_a_cut_log_still_reads() {
        assert_eq!(
            group_host("http://img1 <http://img1 same_site>"),
            Some("img1")
        );
        assert_eq!(group_host("http://127.0.0.1:8123 <x>"), Some("127.0.0.1"));
        assert_eq!(
            group_host("pmpsa/http://img2 <http://www cross_site>"),
            Some("img2")
        );
        assert_eq!(group_host("x <http://img2>"), None);
        assert_eq!(group_host("https://www <x>"), None);
        let cut = "{\"constants\": {}, \"events\": [\n{\"type\": 1},\n{\"type\": 2},\n";
        let v = parse(cut).unwrap();
        assert_eq!(v["events"].as_array().unwrap().len(), 2);
        assert!(parse("not json").is_err());
        assert_eq!(
            socket_pool(&serde_json::json!({}), &HashSet::new()).unwrap_err(),
            NetLogError("no constants".into())
        );
    }

    /// Every event type [`log`] knows, and its source types.
    const KINDS: &[&str] = &[
        "TCP_CLIENT_SOCKET_POOL_REQUESTED_SOCKET",
        "SOCKET_POOL",
        "SOCKET_POOL_STALLED_MAX_SOCKETS_PER_GROUP",
        "SOCKET_POOL_REUSED_AN_EXISTING_SOCKET",
        "SOCKET_POOL_BOUND_TO_CONNECT_JOB",
        "SOCKET_POOL_BOUND_TO_SOCKET",
        "CONNECT_JOB",
        "SOCKET_POOL_CONNECT_JOB_CREATED",
        "TCP_CONNECT",
    ];
    const SOURCES: &[&str] = &["HTTP_STREAM_JOB", "TCP_CONNECT_JOB", "SOCKET"];

    /// One step of a pool's story at `t_ms`, as the events Chromium logs for it: request `id`
    /// opening connect job `job` (0), stalling (1), job `job` ready (2), request `id` bound to
    /// job `job`'s socket (3), or to a reused socket, failing when `job` is 1 (4); or one
    /// event of any kind from any source (5..).
    fn step(
        t_ms: u64,
        op: u8,
        id: u64,
        job: u64,
        host: &'static str,
        kind: &'static str,
    ) -> Vec<Event> {
        let (hs, cj) = ("HTTP_STREAM_JOB", "TCP_CONNECT_JOB");
        let job_id = 100 + job;
        match op {
            0 => vec![
                requested(t_ms, id, host),
                (t_ms, hs, id, "SOCKET_POOL", 1, N),
                (t_ms, cj, job_id, "CONNECT_JOB", 1, N),
                job_created(t_ms, job_id, host, job.is_multiple_of(4)),
            ],
            1 => vec![
                requested(t_ms, id, host),
                (t_ms, hs, id, "SOCKET_POOL", 1, N),
                stalled(t_ms, id),
            ],
            2 => vec![(t_ms, cj, job_id, "CONNECT_JOB", 2, N)],
            3 => vec![
                (
                    t_ms,
                    hs,
                    id,
                    "SOCKET_POOL_BOUND_TO_CONNECT_JOB",
                    0,
                    dep(job_id),
                ),
                (
                    t_ms,
                    hs,
                    id,
                    "SOCKET_POOL_BOUND_TO_SOCKET",
                    0,
                    dep(job_id + 50),
                ),
                (t_ms, hs, id, "SOCKET_POOL", 2, N),
            ],
            4 => vec![
                (t_ms, hs, id, "SOCKET_POOL_REUSED_AN_EXISTING_SOCKET", 0, N),
                (
                    t_ms,
                    hs,
                    id,
                    "SOCKET_POOL_BOUND_TO_SOCKET",
                    0,
                    dep(job_id + 50),
                ),
                if job == 1 {
                    let failed = serde_json::json!({"net_error": -3});
                    (t_ms, hs, id, "SOCKET_POOL", 2, failed)
                } else {
                    (t_ms, hs, id, "SOCKET_POOL", 2, N)
                },
            ],
            _ => {
                let source = SOURCES[usize::from(op) % SOURCES.len()];
                vec![(t_ms, source, id, kind, job % 3, dep(job_id))]
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_sequence_of_pool_events_gives_counts_that_add_up_and_a_cut_log_reads_or_is_refused(
            steps in proptest::collection::vec(
                (
                    0u64..1000,
                    0u8..8,
                    1u64..6,
                    1u64..6,
                    proptest::sample::select(&["img1", "other"][..]),
                    proptest::sample::select(KINDS),
                ),
                0..40,
            ),
            cut in proptest::num::usize::ANY,
        ) {
            let events: Vec<Event> = steps
                .into_iter()
                .flat_map(|(t, op, id, job, host, kind)| step(t, op, id, job, host, kind))
                .collect();
            let text = serde_json::to_string_pretty(&log(&events)).unwrap();
            let hosts: HashSet<String> = ["img1".to_string()].into();
            let whole = socket_pool(&parse(&text).unwrap(), &hosts).unwrap();
            let mut cut_at = cut % (text.len() + 1);
            while !text.is_char_boundary(cut_at) {
                cut_at -= 1;
            }
            let cut_stats = match parse(&text[..cut_at]) {
                Ok(v) => socket_pool(&v, &hosts).ok(),
                Err(e) => {
                    proptest::prop_assert!(!e.0.is_empty());
                    None
                }
            };
            for s in std::iter::once(&whole).chain(cut_stats.as_ref()) {
                proptest::prop_assert!(s.new_connections_needed <= s.requests, "{s:?}");
                proptest::prop_assert!(
                    s.served_by_freed + s.served_by_other_new <= s.new_connections_needed,
                    "{s:?}"
                );
                proptest::prop_assert!(
                    s.saved_ms.len() <= s.served_by_freed + s.served_by_other_new,
                    "{s:?}"
                );
                proptest::prop_assert!(s.saved_ms.iter().all(|ms| *ms >= 0.0), "{s:?}");
                proptest::prop_assert!((0.0..=100.0).contains(&s.served_by_freed_pct()));
            }
        }

        #[test]
        fn any_text_is_a_log_or_an_error_saying_why(text in ".{0,80}") {
            match parse(&text) {
                Ok(v) => {
                    let _ = socket_pool(&v, &HashSet::new());
                }
                Err(e) => proptest::prop_assert!(e.0.starts_with("not a net log")),
            }
        }
    }
}
