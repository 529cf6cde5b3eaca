#![no_main]
//! Any bytes as Chromium's network log (whole, or cut off where its writer stopped): an error
//! saying why, or the socket pool's counts for a host, which add up.
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        match web::netlog::parse(s) {
            Ok(log) => {
                let hosts: HashSet<String> = ["img1".to_string()].into();
                match web::netlog::socket_pool(&log, &hosts) {
                    Ok(p) => {
                        assert!(p.new_connections_needed <= p.requests);
                        assert!(
                            p.served_by_freed + p.served_by_other_new <= p.new_connections_needed
                        );
                        assert!(p.saved_ms.len() <= p.served_by_freed + p.served_by_other_new);
                        assert!(p.saved_ms.iter().all(|ms| *ms >= 0.0));
                    }
                    Err(e) => assert!(!e.0.is_empty()),
                }
            }
            Err(e) => assert!(!e.0.is_empty()),
        }
    }
});
