#![no_main]
//! Any bytes as a DNS64 query, over UDP and TCP: never a panic; an answer keeps the query id.
use std::net::Ipv4Addr;

use libfuzzer_sys::fuzz_target;
use nat64::dns64::{serve_once, serve_tcp_once, Dns64, Dns64Params, Zone};

fuzz_target!(|data: &[u8]| {
    let mut z = Zone::new();
    z.add_a("server", Ipv4Addr::new(10, 0, 0, 2), 60).unwrap();
    z.add_cname("www", "server", 60).unwrap();
    let d = Dns64::new(Dns64Params::default(), z);
    for r in [serve_once(&d, data), serve_tcp_once(&d, data)]
        .into_iter()
        .flatten()
    {
        assert_eq!(&r[..2], &data[..2]);
    }
});
