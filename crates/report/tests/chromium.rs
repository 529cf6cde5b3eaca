//! The analyzer's HTML page in a real browser: headless Chromium loads it from a file (no
//! network), takes a screenshot and dumps the DOM after scripts ran. Checks that the page
//! paints something, that the time-sequence SVG is in the DOM, that the zoom script attached
//! itself, and that a wheel event over the graph changes its viewBox.
//!
//! Needs `/usr/bin/chromium` (Debian package `chromium`); fails with that advice without it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> PathBuf {
    let candidates = ["/usr/bin/chromium", "/usr/bin/chromium-browser"];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "chromium not found at {candidates:?}: install the `chromium` Debian package \
                 (apt-get install chromium) to run this test"
            )
        })
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("report-{name}-{}", std::process::id()));
    cleanup(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Removes the scratch directory unless REPORT_TEST_KEEP is set (to look at the screenshot).
fn cleanup(dir: &Path) {
    if std::env::var_os("REPORT_TEST_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Runs chromium headless on `page` with `extra` arguments; returns stdout.
fn run_chromium(page: &Path, profile: &Path, extra: &[String]) -> String {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium starts");
    assert!(
        out.status.success(),
        "chromium failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn analyzer_page_renders_in_headless_chromium_with_the_time_sequence_graph() {
    let dir = scratch_dir("chromium");
    let html = report::analysis::html_page(&common::bulk_download(), Default::default()).unwrap();
    let page = dir.join("page.html");
    std::fs::write(&page, &html).unwrap();

    let shot = dir.join("shot.png");
    run_chromium(
        &page,
        &dir.join("profile1"),
        &[format!("--screenshot={}", shot.display())],
    );
    let decoder = png::Decoder::new(std::fs::File::open(&shot).expect("screenshot written"));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1400, 1000));
    let px = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let total = pixels.len() / px;
    let non_white = pixels
        .chunks(px)
        .filter(|p| p[0] < 200 || p[1] < 200 || p[2] < 200)
        .count();
    let mut colours: Vec<[u8; 3]> = pixels.chunks(px).map(|p| [p[0], p[1], p[2]]).collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(
        non_white * 100 > total,
        "screenshot is nearly blank: {non_white} of {total} pixels"
    );
    assert!(
        colours.len() > 50,
        "screenshot has only {} colours",
        colours.len()
    );

    let dom = run_chromium(&page, &dir.join("profile2"), &["--dump-dom".to_string()]);
    assert!(
        dom.contains("<figure id=\"conn1-b2a-tsg\" class=\"chart zoomable\""),
        "no time-sequence figure in the DOM"
    );
    let tsg = &dom[dom.find("id=\"conn1-b2a-tsg\"").unwrap()..];
    let tsg = &tsg[..tsg.find("</figure>").unwrap()];
    assert!(
        tsg.contains("<svg class=\"plot\""),
        "time-sequence figure has no inline svg"
    );
    assert!(
        tsg.contains("data-zoom-ready=\"1\""),
        "zoom script did not run on the figure"
    );
    assert!(tsg.contains("relative sequence number (bytes)"));
    cleanup(&dir);
}

#[test]
fn wheel_over_the_time_sequence_graph_zooms_by_changing_the_viewbox() {
    let dir = scratch_dir("chromium-zoom");
    let html = report::analysis::html_page(&common::bulk_download(), Default::default()).unwrap();
    // After the page's own script, send one wheel-up over the graph's middle and record the
    // viewBox before and after as attributes that --dump-dom shows.
    let probe = r#"<script>
      (function () {
        var svg = document.querySelector('#conn1-b2a-tsg svg.plot');
        var before = svg.getAttribute('viewBox');
        var r = svg.getBoundingClientRect();
        svg.dispatchEvent(new WheelEvent('wheel', { deltaY: -100, clientX: r.left + r.width / 2,
          clientY: r.top + r.height / 2, bubbles: true, cancelable: true }));
        document.body.setAttribute('data-before', before);
        document.body.setAttribute('data-after', svg.getAttribute('viewBox'));
      })();
    </script></body>"#;
    let page = dir.join("page.html");
    std::fs::write(&page, html.replace("</body>", probe)).unwrap();
    let dom = run_chromium(&page, &dir.join("profile"), &["--dump-dom".to_string()]);
    let attr = |name: &str| -> Vec<f64> {
        let key = format!("{name}=\"");
        let s = &dom[dom.find(&key).unwrap_or_else(|| panic!("no {name} in DOM")) + key.len()..];
        s[..s.find('"').unwrap()]
            .split(' ')
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let (before, after) = (attr("data-before"), attr("data-after"));
    assert_eq!(before.len(), 4);
    assert_eq!(after.len(), 4);
    assert!(
        after[2] < before[2] && after[3] < before[3],
        "wheel-up did not zoom in: {before:?} -> {after:?}"
    );
    cleanup(&dir);
}
