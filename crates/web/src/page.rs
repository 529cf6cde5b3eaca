//! The page description: what a web page is made of, as the server serves it and the client
//! loads it. One HTML document and the resources it references, each with a host name, a path,
//! a size in bytes and a server think time. Parsed once from TOML (checked: a bad file is an
//! error naming the resource and the field), expanded (`count` copies of a resource), and
//! rendered to the HTML the server sends. No I/O here but reading the file in [`Page::load`].
//!
//! The file:
//!
//! ```toml
//! name = "portal"
//! [html]
//! host = "server"
//! bytes = 40000
//! think_ms = 0          # optional: the server waits this long before answering
//!
//! [[resource]]
//! kind = "image"        # image, script or stylesheet
//! host = "img1"
//! path = "/i/{i}.jpg"   # {i} counts 1..count
//! count = 20            # optional, 1 by default
//! bytes = 6000
//! linked = true         # optional: not loaded with the page but linked from it (<a href>),
//!                       # fetched only when the user follows the link
//! found_in = "/js/{i}.js" # optional: referenced by this earlier stylesheet or script of the
//!                       # page, not by the HTML ({i} as in path), so found only once that loads
//! ```
//!
//! A stylesheet or script that other resources are `found_in` starts with their references
//! (CSS `url("...")` and `@import`, script `src="..."`/`href="..."` assignments), then the
//! padding: a client finds them only once it has that file, as a browser finds a stylesheet's
//! background images or the scripts an ad tag writes in.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use serde::Deserialize;

/// When the managed load looks for the HTML's references.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HtmlScan {
    /// After each read of the body: what has arrived so far
    Stream,
    /// Once the whole body has arrived
    Whole,
}

/// Upper bounds that keep a mistyped number from asking the server for gigabytes.
pub const MAX_BYTES: u64 = 64 << 20;
pub const MAX_THINK_MS: u64 = 60_000;
pub const MAX_RESOURCES: usize = 5_000;

/// A bad page file: the message names the resource and the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageError(pub String);

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PageError {}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Html,
    Image,
    Script,
    Stylesheet,
}

impl Kind {
    pub fn content_type(self) -> &'static str {
        match self {
            Kind::Html => "text/html",
            Kind::Image => "image/gif",
            Kind::Script => "text/javascript",
            Kind::Stylesheet => "text/css",
        }
    }
}

/// One thing the page is made of, after expansion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    pub kind: Kind,
    pub host: String,
    pub path: String,
    pub bytes: u64,
    pub think_ms: u64,
    /// Reached by a link (`<a href>`) that a user follows, not loaded with the page.
    pub linked: bool,
    /// The path of the stylesheet or script that references it; `None`: the HTML does.
    pub found_in: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub name: String,
    /// The references are spread evenly through the document (a long article or front
    /// page), not all in its head: a browser finds them as the document arrives.
    pub spread: bool,
    /// Always at path `/`.
    pub html: Resource,
    /// In document order.
    pub resources: Vec<Resource>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPage {
    name: String,
    html: RawHtml,
    #[serde(default)]
    resource: Vec<RawResource>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHtml {
    host: String,
    bytes: u64,
    #[serde(default)]
    think_ms: u64,
    #[serde(default)]
    spread: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResource {
    kind: Kind,
    host: String,
    path: String,
    #[serde(default = "one")]
    count: u32,
    bytes: u64,
    #[serde(default)]
    think_ms: u64,
    #[serde(default)]
    linked: bool,
    #[serde(default)]
    found_in: Option<String>,
}

fn one() -> u32 {
    1
}

fn check_host(what: &str, h: &str) -> Result<(), PageError> {
    let plain = !h.is_empty()
        && h.len() <= 63
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if plain {
        Ok(())
    } else {
        Err(PageError(format!(
            "{what}: host '{h}' is not a plain host name (letters, digits, '-', '.')"
        )))
    }
}

fn check_sizes(what: &str, bytes: u64, think_ms: u64) -> Result<(), PageError> {
    if bytes > MAX_BYTES {
        return Err(PageError(format!(
            "{what}: bytes = {bytes} is more than the {MAX_BYTES} a page resource may have"
        )));
    }
    if think_ms > MAX_THINK_MS {
        return Err(PageError(format!(
            "{what}: think_ms = {think_ms} is more than {MAX_THINK_MS}"
        )));
    }
    Ok(())
}

/// `found_in` (with `{i}` replaced) must name an earlier stylesheet or script loaded with the
/// page: earlier, so that references form no cycle.
fn check_found_in(
    what: &str,
    r: &RawResource,
    found_in: &str,
    i: u32,
    earlier: &[Resource],
) -> Result<String, PageError> {
    if r.linked {
        return Err(PageError(format!(
            "{what}: a linked resource is in the HTML's <a href>; drop found_in or linked"
        )));
    }
    let f = found_in.replace("{i}", &i.to_string());
    let parent = earlier
        .iter()
        .find(|p| p.path == f && !p.linked && matches!(p.kind, Kind::Script | Kind::Stylesheet));
    match parent {
        Some(_) => Ok(f),
        None => Err(PageError(format!(
            "{what}: found_in = \"{found_in}\" names no earlier stylesheet or script of the page \
             (it gave {f})"
        ))),
    }
}

impl Page {
    pub fn load(path: &Path) -> Result<Page, PageError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| PageError(format!("{}: {e}", path.display())))?;
        Page::parse(&text).map_err(|e| PageError(format!("{}: {e}", path.display())))
    }

    pub fn parse(text: &str) -> Result<Page, PageError> {
        let raw: RawPage = toml::from_str(text).map_err(|e| {
            PageError(format!(
                "not a page description ({}); see docs/apps.md for the format",
                e.message()
            ))
        })?;
        let plain_name = raw.name.len() <= 100
            && raw
                .name
                .chars()
                .all(|c| c.is_alphanumeric() || " -_.,:()".contains(c));
        if !plain_name {
            return Err(PageError(format!(
                "name = {:?}: letters, digits, spaces and -_.,:() only, at most 100 characters",
                raw.name
            )));
        }
        check_host("[html]", &raw.html.host)?;
        check_sizes("[html]", raw.html.bytes, raw.html.think_ms)?;
        let html = Resource {
            kind: Kind::Html,
            host: raw.html.host,
            path: "/".into(),
            bytes: raw.html.bytes,
            think_ms: raw.html.think_ms,
            linked: false,
            found_in: None,
        };
        let mut resources = Vec::new();
        let mut seen = HashSet::from(["/".to_string()]);
        for (k, r) in raw.resource.iter().enumerate() {
            let what = format!("resource {} ({})", k + 1, r.path);
            check_host(&what, &r.host)?;
            check_sizes(&what, r.bytes, r.think_ms)?;
            let plain_path = r.path.starts_with('/')
                && r.path.len() <= 200
                && r.path
                    .chars()
                    .all(|c| c.is_ascii_graphic() && !"\"'<>\\#?%".contains(c));
            if !plain_path {
                return Err(PageError(format!(
                    "{what}: path must start with '/' and hold only plain characters (no quotes, '<', '>', '#', '?', '%')"
                )));
            }
            if r.kind == Kind::Html {
                return Err(PageError(format!(
                    "{what}: kind = \"html\" is the [html] table's; a resource is image, script or stylesheet"
                )));
            }
            if r.count == 0 || (r.count > 1 && !r.path.contains("{i}")) {
                return Err(PageError(format!(
                    "{what}: count = {} needs count >= 1, and a path with {{i}} when count > 1",
                    r.count
                )));
            }
            for i in 1..=r.count {
                if resources.len() >= MAX_RESOURCES {
                    return Err(PageError(format!(
                        "{what}: the page has more than {MAX_RESOURCES} resources"
                    )));
                }
                let path = r.path.replace("{i}", &i.to_string());
                if !seen.insert(path.clone()) {
                    return Err(PageError(format!("{what}: path {path} appears twice")));
                }
                let found_in = match &r.found_in {
                    None => None,
                    Some(f) => Some(check_found_in(&what, r, f, i, &resources)?),
                };
                resources.push(Resource {
                    kind: r.kind,
                    host: r.host.clone(),
                    path,
                    bytes: r.bytes,
                    think_ms: r.think_ms,
                    linked: r.linked,
                    found_in,
                });
            }
        }
        Ok(Page {
            name: raw.name,
            spread: raw.html.spread,
            html,
            resources,
        })
    }

    /// The resources loaded with the page (all but the linked ones), in document order.
    pub fn loaded(&self) -> impl Iterator<Item = &Resource> {
        self.resources.iter().filter(|r| !r.linked)
    }

    /// Every resource, the HTML first, linked ones too.
    pub fn all(&self) -> impl Iterator<Item = &Resource> {
        std::iter::once(&self.html).chain(self.resources.iter())
    }

    /// The host names the page uses, in first-use order.
    pub fn hosts(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.all() {
            if !out.contains(&r.host) {
                out.push(r.host.clone());
            }
        }
        out
    }

    pub fn total_bytes(&self) -> u64 {
        self.all().map(|r| r.bytes).sum()
    }

    /// The HTML document: a `<link>`, `<script>` or `<img>` per resource with an absolute URL
    /// (`scheme://host[:port]path`), padded with a comment to `html.bytes` when that is larger.
    /// Linked resources are `<a href>` links at the start of the body.
    /// Scripts are `async` so that a browser fetches them as it would a page's scripts but
    /// does not wait on their (empty) execution.
    pub fn render_html(&self, scheme: &str, port: u16) -> Vec<u8> {
        let origin = |h: &str| origin(scheme, port, h);
        let mut s = format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>\n",
            self.name
        );
        let links: String = self
            .resources
            .iter()
            .filter(|r| r.linked)
            .map(|r| format!("<a href=\"{}{}\">{}</a>\n", origin(&r.host), r.path, r.path))
            .collect();
        let tags: Vec<String> = self
            .loaded()
            .filter(|r| r.found_in.is_none())
            .map(|r| {
                let url = format!("{}{}", origin(&r.host), r.path);
                match r.kind {
                    Kind::Stylesheet => format!("<link rel=\"stylesheet\" href=\"{url}\">\n"),
                    Kind::Script => format!("<script async src=\"{url}\"></script>\n"),
                    Kind::Image | Kind::Html => {
                        format!("<img src=\"{url}\" width=\"1\" height=\"1\">\n")
                    }
                }
            })
            .collect();
        if self.spread {
            return self.render_spread(s, &tags, &links);
        }
        for t in &tags {
            s.push_str(t);
        }
        s.push_str("</head><body>\n");
        s.push_str(LOAD_TIME_SCRIPT);
        s.push_str(&links);
        let tail = "</body></html>\n";
        let want = self.html.bytes as usize;
        let have = s.len() + tail.len();
        if want > have + 9 {
            s.push_str("<!--");
            s.push_str(&"x".repeat(want - have - 8));
            s.push_str("-->\n");
        }
        s.push_str(tail);
        s.into_bytes()
    }
}

/// `scheme://host[:port]`, the port left out when it is the scheme's default.
fn origin(scheme: &str, port: u16, host: &str) -> String {
    let default_port = if scheme == "https" { 443 } else { 80 };
    if port == default_port {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}:{port}")
    }
}

impl Page {
    /// What the server sends for `r`: for a stylesheet or script that other resources are
    /// found in, their references first, then [`body`]'s padding up to `r.bytes` (the body is
    /// longer when the references alone are); for anything else, [`body`].
    pub fn body_of(&self, r: &Resource, scheme: &str, port: u16) -> Vec<u8> {
        // CSS wants its @imports before any rule.
        let (mut imports, mut refs) = (String::new(), String::new());
        let children = self
            .resources
            .iter()
            .filter(|c| c.found_in.as_deref() == Some(r.path.as_str()));
        for (n, c) in children.enumerate() {
            let url = format!("{}{}", origin(scheme, port, &c.host), c.path);
            match (r.kind, c.kind) {
                (Kind::Stylesheet, Kind::Stylesheet) => {
                    imports.push_str(&format!("@import url(\"{url}\");\n"))
                }
                (Kind::Stylesheet, _) => {
                    refs.push_str(&format!(".ll-{n}{{background-image:url(\"{url}\")}}\n"))
                }
                (_, Kind::Script) => refs.push_str(&format!(
                    "(function(){{var e=document.createElement(\"script\");e.async=true;e.src=\"{url}\";document.head.appendChild(e)}})();\n"
                )),
                (_, Kind::Stylesheet) => refs.push_str(&format!(
                    "(function(){{var e=document.createElement(\"link\");e.rel=\"stylesheet\";e.href=\"{url}\";document.head.appendChild(e)}})();\n"
                )),
                _ => refs.push_str(&format!("(new Image()).src=\"{url}\";\n")),
            }
        }
        imports.push_str(&refs);
        let refs = imports;
        if refs.is_empty() {
            return body(r.kind, r.bytes);
        }
        let rest = (r.bytes as usize).saturating_sub(refs.len());
        let mut v = refs.into_bytes();
        v.extend_from_slice(&body(r.kind, rest as u64));
        v
    }

    /// The body holds the tags, each after an equal share of the padding, so that the
    /// references arrive spread over the whole document.
    fn render_spread(&self, mut s: String, tags: &[String], links: &str) -> Vec<u8> {
        s.push_str("</head><body>\n");
        s.push_str(LOAD_TIME_SCRIPT);
        s.push_str(links);
        let tail = "</body></html>\n";
        let want = self.html.bytes as usize;
        let have = s.len() + tail.len() + tags.iter().map(String::len).sum::<usize>();
        let gaps = tags.len() + 1;
        // Each gap is a comment: "<!--" + x.. + "-->\n", 8 bytes around the padding.
        let pad = want.saturating_sub(have) / gaps;
        let gap = |s: &mut String| {
            if pad > 8 {
                s.push_str("<!--");
                s.push_str(&"x".repeat(pad - 8));
                s.push_str("-->\n");
            }
        };
        for t in tags {
            gap(&mut s);
            s.push_str(t);
        }
        gap(&mut s);
        s.push_str(tail);
        s.into_bytes()
    }
}

/// Puts two times (ms since the navigation started) in the document's title when the load
/// event fires, so that a browser run headless with `--dump-dom` reports them:
/// `loadEventStart=T responseEnd=R`.
///
/// - `responseEnd`: the latest `responseEnd` of the HTML (Navigation Timing) and of every
///   resource (Resource Timing), that is when the last byte of the last response arrived: the
///   time a page-load client that only fetches measures. Resource Timing exposes it for
///   cross-origin resources too (the image shards), where it zeroes the connection and
///   request times unless `Timing-Allow-Origin` allows them. The entry buffer is raised first
///   from its default 250 entries, so that a large page loses none.
/// - `loadEventStart`: when the load event began, which adds the browser's own work (parsing,
///   decoding images, layout). `loadEventEnd` is not yet set inside a load handler; the two
///   differ by the load handlers' run time, and this is the page's only handler.
pub const LOAD_TIME_SCRIPT: &str = "<script>performance.setResourceTimingBufferSize(10000);addEventListener(\"load\",function(){var p=performance,n=p.getEntriesByType(\"navigation\")[0],e=n.responseEnd;p.getEntriesByType(\"resource\").forEach(function(r){if(r.responseEnd>e)e=r.responseEnd});document.title=\"loadEventStart=\"+n.loadEventStart.toFixed(1)+\" responseEnd=\"+e.toFixed(1)})</script>\n";

/// One `KEY=ms` field of the title [`LOAD_TIME_SCRIPT`] wrote, from the DOM a headless
/// browser dumped.
fn title_time(dom: &str, key: &str) -> Option<f64> {
    let start = dom.find("<title>")? + "<title>".len();
    let title = &dom[start..start + dom[start..].find('<')?];
    title.split_whitespace().find_map(|field| {
        let (k, v) = field.split_once('=')?;
        (k == key).then(|| v.parse().ok())?
    })
}

/// The `loadEventStart` a page rendered by [`Page::render_html`] put in its title.
pub fn load_time_from_dom(dom: &str) -> Option<f64> {
    title_time(dom, "loadEventStart")
}

/// The last response byte of the page (the latest `responseEnd` of the HTML and of every
/// resource) a page rendered by [`Page::render_html`] put in its title.
pub fn response_end_from_dom(dom: &str) -> Option<f64> {
    title_time(dom, "responseEnd")
}

/// A resource's body: `bytes` bytes that are valid for its type (a comment for scripts and
/// stylesheets, so a browser parses them without error).
pub fn body(kind: Kind, bytes: u64) -> Vec<u8> {
    let n = bytes as usize;
    let (open, close) = match kind {
        Kind::Script | Kind::Stylesheet => ("/*", "*/"),
        Kind::Image | Kind::Html => ("", ""),
    };
    if n < open.len() + close.len() {
        return vec![b' '; n];
    }
    let mut v = Vec::with_capacity(n);
    v.extend_from_slice(open.as_bytes());
    v.resize(n - close.len(), b'x');
    v.extend_from_slice(close.as_bytes());
    v
}

/// The absolute URLs in an HTML document's `src="..."` and `href="..."` attributes (and a
/// stylesheet's `url("...")`, a script's `src="..."`), in document order: what a browser loads
/// with the page, so not the `href` of an `<a>` link, which waits for a click. This reads the
/// documents [`Page::render_html`] and [`Page::body_of`] write (double-quoted values); it is
/// not an HTML, CSS or JavaScript parser and does not pretend to be one.
pub fn referenced_urls(html: &[u8]) -> Vec<String> {
    RefScanner::default().scan(html)
}

/// The attribute openings a reference follows.
const REF_KEYS: [&[u8]; 3] = [b"src=\"", b"href=\"", b"url(\""];

/// [`referenced_urls`] for a document that arrives in pieces: each [`RefScanner::scan`] is
/// given the whole document so far and returns the references completed since the last call.
/// It resumes where it stopped and remembers where each attribute opening was last searched
/// for, so scanning after every read of a body looks at each byte a bounded number of times
/// over the whole body, rather than once per read (a 120 kB page read in 80 pieces would
/// otherwise be searched some 80 times over, blocking the loop that places requests).
#[derive(Clone, Debug, Default)]
pub struct RefScanner {
    /// Where the next reference may start: just past the last one's value.
    at: usize,
    /// The next position of each of [`REF_KEYS`] at or after `at`, if found.
    next: [Option<usize>; 3],
    /// How far each key has been searched for without finding it.
    searched: [usize; 3],
    /// Bytes looked at by searches, over all calls.
    pub bytes_searched: usize,
}

impl RefScanner {
    pub fn scan(&mut self, doc: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            for (k, key) in REF_KEYS.iter().enumerate() {
                if self.next[k].is_some_and(|p| p >= self.at) {
                    continue;
                }
                // A key cut off at the end of the last piece is found once the rest arrives.
                let from = self
                    .at
                    .max((self.searched[k] + 1).saturating_sub(key.len()));
                let hay = doc.get(from..).unwrap_or(&[]);
                let found = hay.windows(key.len()).position(|w| w == *key);
                self.bytes_searched += found.map_or(hay.len(), |i| i + key.len());
                self.next[k] = found.map(|i| i + from);
                self.searched[k] = doc.len();
            }
            let Some((i, k)) = (0..REF_KEYS.len())
                .filter_map(|k| self.next[k].map(|p| (p, k)))
                .min()
            else {
                break;
            };
            let start = i + REF_KEYS[k].len();
            // An unterminated value: wait for the rest of it.
            let Some(len) = doc[start..].iter().position(|&b| b == b'"') else {
                break;
            };
            let tag = doc[..i]
                .iter()
                .rposition(|&b| b == b'<')
                .map(|t| &doc[t..i]);
            let anchor = tag.is_some_and(|t| t.starts_with(b"<a ") || t.starts_with(b"<A "));
            let url = &doc[start..start + len];
            if !anchor && (url.starts_with(b"http://") || url.starts_with(b"https://")) {
                out.push(String::from_utf8_lossy(url).into_owned());
            }
            self.at = start + len;
            self.next[k] = None;
            self.searched[k] = self.at;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_page_puts_its_references_through_the_whole_document() {
        let text = PAGE.replace("bytes = 2000", "bytes = 20000\nspread = true");
        let p = Page::parse(&text).unwrap();
        assert!(p.spread);
        let html = p.render_html("http", 80);
        assert!((19_900..=20_000).contains(&html.len()), "{}", html.len());
        assert_eq!(referenced_urls(&html).len(), 4);
        // The first half of the document holds about half of the references.
        assert_eq!(referenced_urls(&html[..10_000]).len(), 2);
        assert_eq!(referenced_urls(&html[..1_000]).len(), 0);
    }

    const PAGE: &str = r#"
name = "t"
[html]
host = "server"
bytes = 2000
[[resource]]
kind = "stylesheet"
host = "server"
path = "/s.css"
bytes = 100
[[resource]]
kind = "image"
host = "img1"
path = "/i/{i}.gif"
count = 3
bytes = 500
think_ms = 20
"#;

    #[test]
    fn count_expands_a_resource_into_numbered_copies_in_document_order() {
        let p = Page::parse(PAGE).unwrap();
        let paths: Vec<&str> = p.resources.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["/s.css", "/i/1.gif", "/i/2.gif", "/i/3.gif"]);
        assert_eq!(p.resources[3].think_ms, 20);
        assert_eq!(p.total_bytes(), 2000 + 100 + 3 * 500);
        assert_eq!(p.hosts(), ["server", "img1"]);
    }

    #[test]
    fn the_rendered_html_has_the_described_size_and_references_every_resource() {
        let p = Page::parse(PAGE).unwrap();
        let html = p.render_html("http", 8080);
        assert_eq!(html.len(), 2000);
        let urls = referenced_urls(&html);
        assert_eq!(urls.len(), 4);
        assert_eq!(urls[0], "http://server:8080/s.css");
        assert_eq!(urls[3], "http://img1:8080/i/3.gif");
        let tls = p.render_html("https", 443);
        assert_eq!(referenced_urls(&tls)[1], "https://img1/i/1.gif");
    }

    #[test]
    fn bodies_have_the_exact_size_and_scripts_are_one_comment() {
        assert_eq!(body(Kind::Image, 0).len(), 0);
        let s = body(Kind::Script, 10);
        assert_eq!(s, b"/*xxxxxx*/");
        assert_eq!(body(Kind::Stylesheet, 3).len(), 3);
    }

    #[test]
    fn bad_page_files_name_the_resource_and_the_field() {
        let e = Page::parse("name = 1").unwrap_err();
        assert!(e.0.contains("not a page description"), "{e}");
        let bad_host = PAGE.replace("host = \"img1\"", "host = \"img 1\"");
        let e = Page::parse(&bad_host).unwrap_err();
        assert!(
            e.0.contains("resource 2 (/i/{i}.gif)") && e.0.contains("'img 1'"),
            "{e}"
        );
        let no_i = PAGE.replace("/i/{i}.gif", "/i/x.gif");
        assert!(Page::parse(&no_i).unwrap_err().0.contains("{i}"));
        let huge = PAGE.replace("bytes = 500", "bytes = 99999999999");
        assert!(Page::parse(&huge)
            .unwrap_err()
            .0
            .contains("bytes = 99999999999"));
        let twice = format!(
            "{PAGE}[[resource]]\nkind = \"image\"\nhost = \"a\"\npath = \"/s.css\"\nbytes = 1\n"
        );
        assert!(Page::parse(&twice).unwrap_err().0.contains("appears twice"));
        let quote = PAGE.replace("/s.css", "/s\\\".css");
        assert!(Page::parse(&quote)
            .unwrap_err()
            .0
            .contains("plain characters"));
    }

    #[test]
    fn the_load_time_is_read_back_from_the_title_of_a_dumped_dom() {
        let dom =
            "<html><head><title>loadEventStart=1234.5 responseEnd=1100.25</title></head></html>";
        assert_eq!(load_time_from_dom(dom), Some(1234.5));
        assert_eq!(response_end_from_dom(dom), Some(1100.25));
        let old = "<title>loadEventStart=1234.5</title>";
        assert_eq!(load_time_from_dom(old), Some(1234.5));
        assert_eq!(response_end_from_dom(old), None);
        assert_eq!(load_time_from_dom("<title>t</title>"), None);
        assert_eq!(response_end_from_dom("<title>responseEnd=x</title>"), None);
        let p = Page::parse(PAGE).unwrap();
        let html = String::from_utf8(p.render_html("http", 80)).unwrap();
        assert!(html.contains(LOAD_TIME_SCRIPT));
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_a_page_error_or_a_page_whose_html_references_every_resource(
            text in "(name = \"[a-z<\"]{0,6}\"\n)?(\\[html\\]\nhost = \"[a-z1 ]{1,4}\"\nbytes = [0-9]{1,4}\n)?(\\[\\[resource\\]\\]\nkind = \"(image|script|html)\"\nhost = \"s\"\npath = \"/[a-z{}i\"]{0,5}\"\ncount = [0-3]\nbytes = [0-9]{1,3}\n){0,3}"
        ) {
            if let Ok(page) = Page::parse(&text) {
                let html = page.render_html("http", 80);
                proptest::prop_assert_eq!(referenced_urls(&html).len(), page.loaded().count());
            }
        }

        #[test]
        fn any_bytes_scan_for_urls_without_panicking(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = referenced_urls(&bytes);
        }
    }

    #[test]
    fn resources_found_in_a_stylesheet_or_script_are_referenced_there_not_in_the_html() {
        let text = format!(
            "{PAGE}[[resource]]\nkind = \"script\"\nhost = \"ads\"\npath = \"/tag/{{i}}.js\"\n\
             count = 2\nbytes = 3000\n\
             [[resource]]\nkind = \"image\"\nhost = \"ads\"\npath = \"/ad/{{i}}.gif\"\n\
             count = 2\nbytes = 40\nfound_in = \"/tag/{{i}}.js\"\n\
             [[resource]]\nkind = \"image\"\nhost = \"cdn\"\npath = \"/bg.png\"\n\
             bytes = 40\nfound_in = \"/s.css\"\n\
             [[resource]]\nkind = \"stylesheet\"\nhost = \"cdn\"\npath = \"/more.css\"\n\
             bytes = 40\nfound_in = \"/s.css\"\n"
        );
        let p = Page::parse(&text).unwrap();
        assert_eq!(p.resources[7].found_in.as_deref(), Some("/tag/2.js"));
        assert_eq!(p.loaded().count(), 10);
        // The HTML references the stylesheet, the three images and the two tags.
        let html = p.render_html("http", 80);
        let urls = referenced_urls(&html);
        assert_eq!(urls.len(), 6, "{urls:?}");
        assert!(!urls.iter().any(|u| u.contains("/ad/")), "{urls:?}");
        // Each tag references its own ad, and keeps its size.
        let tag = p.body_of(&p.resources[5], "http", 80);
        assert_eq!(tag.len(), 3000);
        assert_eq!(referenced_urls(&tag), ["http://ads/ad/2.gif"]);
        assert!(tag.ends_with(b"*/"));
        // The stylesheet imports first, then its image, though both are longer than its size.
        let css = p.body_of(&p.resources[0], "http", 8080);
        assert!(css.starts_with(b"@import url(\"http://cdn:8080/more.css\");"));
        assert_eq!(
            referenced_urls(&css),
            ["http://cdn:8080/more.css", "http://cdn:8080/bg.png"]
        );
        // A resource nothing is found in is plain padding.
        assert_eq!(
            p.body_of(&p.resources[1], "http", 80),
            body(Kind::Image, 500)
        );
        // The HTML and the files with references name every loaded resource once.
        let in_files: usize = p
            .loaded()
            .map(|r| referenced_urls(&p.body_of(r, "http", 80)).len())
            .sum();
        assert_eq!(urls.len() + in_files, p.loaded().count());
    }

    #[test]
    fn found_in_must_name_an_earlier_stylesheet_or_script() {
        let with = |found_in: &str, extra: &str| {
            Page::parse(&format!(
                "{PAGE}[[resource]]\nkind = \"image\"\nhost = \"a\"\npath = \"/x.gif\"\n\
                 bytes = 1\nfound_in = \"{found_in}\"\n{extra}"
            ))
        };
        assert!(with("/s.css", "").is_ok());
        // An image references nothing.
        let e = with("/i/1.gif", "").unwrap_err();
        assert!(e.0.contains("found_in = \"/i/1.gif\""), "{e}");
        // Not a later one, so that references form no cycle.
        let later =
            "[[resource]]\nkind = \"script\"\nhost = \"a\"\npath = \"/late.js\"\nbytes = 1\n";
        assert!(with("/late.js", later).is_err());
        assert!(with("/s.css", "linked = true\n")
            .unwrap_err()
            .0
            .contains("linked"));
    }

    #[test]
    fn a_page_name_that_would_break_the_html_is_refused() {
        let e = Page::parse(&PAGE.replace("name = \"t\"", "name = \"x src=\\\"http://a/\\\"\""))
            .unwrap_err();
        assert!(e.0.starts_with("name = "), "{e}");
    }

    #[test]
    fn a_document_scanned_piece_by_piece_yields_each_reference_once_in_linear_work() {
        let p =
            Page::parse(&PAGE.replace("bytes = 2000", "bytes = 120000\nspread = true")).unwrap();
        let html = p.render_html("http", 80);
        let whole = referenced_urls(&html);
        assert_eq!(whole.len(), 4);
        // A TCP segment at a time, and a byte at a time (keys and values cut anywhere).
        for piece in [1448, 1] {
            let mut s = RefScanner::default();
            let mut found = Vec::new();
            let mut end = 0;
            while end < html.len() {
                end = (end + piece).min(html.len());
                found.extend(s.scan(&html[..end]));
            }
            assert_eq!(found, whole, "{piece}");
            // Each key's search covers the document about once (plus a few bytes per
            // piece where a key might be cut), not once per piece.
            let bound = 3 * (html.len() + 6 * html.len().div_ceil(piece));
            assert!(s.bytes_searched <= bound, "{piece}: {}", s.bytes_searched);
        }
        let mut s = RefScanner::default();
        assert!(s.scan(b"<img sr").is_empty());
        assert!(s.scan(b"<img src=\"http://a/").is_empty());
        assert_eq!(
            s.scan(b"<img src=\"http://a/x\"><a href=\"http://b/"),
            ["http://a/x"]
        );
        assert!(s
            .scan(b"<img src=\"http://a/x\"><a href=\"http://b/\">")
            .is_empty());
    }

    #[test]
    fn referenced_urls_ignores_relative_and_unterminated_attributes() {
        let u = referenced_urls(b"<img src=\"/rel\"><link href=\"http://a/b\"><img src=\"http://x");
        assert_eq!(u, ["http://a/b"]);
    }

    #[test]
    fn a_linked_resource_is_an_anchor_that_loading_the_page_does_not_fetch() {
        let text = format!(
            "{PAGE}[[resource]]\nkind = \"image\"\nhost = \"server\"\npath = \"/big.gif\"\n\
             bytes = 25000\nlinked = true\n"
        );
        for spread in [false, true] {
            let t = if spread {
                text.replace("bytes = 2000", "bytes = 2000\nspread = true")
            } else {
                text.clone()
            };
            let p = Page::parse(&t).unwrap();
            assert!(p.resources[4].linked);
            assert_eq!(p.loaded().count(), 4);
            let html = p.render_html("http", 80);
            let doc = String::from_utf8_lossy(&html);
            assert!(doc.contains("<a href=\"http://server/big.gif\">"), "{doc}");
            let urls = referenced_urls(&html);
            assert_eq!(urls.len(), 4, "{spread}");
            assert!(!urls.iter().any(|u| u.ends_with("/big.gif")), "{urls:?}");
        }
        let u = referenced_urls(b"<a href=\"http://a/x\">x</a><img src=\"http://a/y\">");
        assert_eq!(u, ["http://a/y"]);
    }
}
