#![no_main]
//! Any text through the page-description parser, and any bytes through the scan of an HTML
//! document's URLs: an error or a page whose rendered HTML, with the stylesheets and scripts
//! other resources are found in, references every resource loaded with the page once.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = web::page::referenced_urls(data);
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(page) = web::page::Page::parse(s) {
            let html = page.render_html("http", 80);
            let mut found = web::page::referenced_urls(&html).len();
            for r in page.loaded() {
                if page
                    .resources
                    .iter()
                    .any(|c| c.found_in.as_deref() == Some(r.path.as_str()))
                {
                    found += web::page::referenced_urls(&page.body_of(r, "http", 80)).len();
                }
            }
            assert_eq!(found, page.loaded().count());
        }
    }
});
