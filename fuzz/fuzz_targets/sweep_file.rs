#![no_main]
//! Any text as a sweep file: an error value (one line, naming the culprit) or a sweep whose
//! plan can be listed, never a panic. Relative file names point into a directory that does not
//! exist, so no input reads the machine's files.
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match sweep::SweepFile::parse(text, Path::new("/nonexistent/latencylab-fuzz")) {
        Ok(f) => {
            let runs = sweep::plan::expand(&f);
            if let Some(run) = runs.first() {
                let _ = run.params_json();
                let _ = sweep::plan::args(&f, run, Path::new("/nonexistent/latencylab-fuzz/out"));
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "a one-line error: {e}"),
    }
});
