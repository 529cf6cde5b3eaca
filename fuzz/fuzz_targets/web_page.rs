#![no_main]
//! Any text through the page-description parser, and any bytes through the scan of an HTML
//! document's URLs: an error or a page whose rendered HTML references every resource.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = web::page::referenced_urls(data);
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(page) = web::page::Page::parse(s) {
            let html = page.render_html("http", 80);
            assert_eq!(web::page::referenced_urls(&html).len(), page.resources.len());
        }
    }
});
