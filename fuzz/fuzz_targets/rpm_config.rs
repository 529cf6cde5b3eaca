#![no_main]
//! Any bytes as the responsiveness test's configuration document (what a server sends the
//! client): an error saying why, or a configuration that prints back as itself.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        match rpm::config::NqConfig::parse(s) {
            Ok(c) => assert_eq!(rpm::config::NqConfig::parse(&c.to_json()), Ok(c)),
            Err(e) => assert!(!e.0.is_empty()),
        }
    }
});
