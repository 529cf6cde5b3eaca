//! The test server's configuration document at `/.well-known/nq` (draft-ietf-ippm-
//! responsiveness-09 section 8.1): written by the server, read and checked by the client.
//! Pure: text in, typed value or error out.
//!
//! The server writes the draft's key names and, beside them, the older ones Apple's sample
//! server configuration and goresponsiveness read (`small_https_download_url`,
//! `large_https_download_url`, `https_upload_url`); the client accepts either.

use serde_json::{json, Map, Value};

/// The three test URLs and the optional endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NqConfig {
    pub large_download_url: String,
    pub small_download_url: String,
    pub upload_url: String,
    pub test_endpoint: Option<String>,
}

/// Why a configuration document was refused; the message says what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The paths the server answers.
pub const SMALL_PATH: &str = "/small";
pub const LARGE_PATH: &str = "/large";
pub const UPLOAD_PATH: &str = "/upload";
/// The upload sink's other name, as some servers call it.
pub const SLURP_PATH: &str = "/slurp";
pub const WELL_KNOWN_PATH: &str = "/.well-known/nq";

impl NqConfig {
    /// The document for a server reached as `scheme://authority`.
    pub fn for_origin(scheme: &str, authority: &str) -> NqConfig {
        let u = |p: &str| format!("{scheme}://{authority}{p}");
        NqConfig {
            large_download_url: u(LARGE_PATH),
            small_download_url: u(SMALL_PATH),
            upload_url: u(UPLOAD_PATH),
            test_endpoint: None,
        }
    }

    /// The JSON document, with both the draft's keys and the older ones.
    pub fn to_json(&self) -> String {
        let urls = json!({
            "large_download_url": self.large_download_url,
            "small_download_url": self.small_download_url,
            "upload_url": self.upload_url,
            "large_https_download_url": self.large_download_url,
            "small_https_download_url": self.small_download_url,
            "https_upload_url": self.upload_url,
        });
        let mut doc = json!({ "version": 1, "urls": urls });
        if let Some(e) = &self.test_endpoint {
            doc["test_endpoint"] = Value::String(e.clone());
        }
        serde_json::to_string_pretty(&doc).expect("a JSON value always serialises")
    }

    /// Reads and checks a document (section 8.1): version 1, the three URLs (draft or older
    /// names), all http(s) with the same host. Unknown names are ignored, as the draft asks.
    pub fn parse(text: &str) -> Result<NqConfig, ConfigError> {
        let bad = |why: String| Err(ConfigError(why));
        let doc: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return bad(format!("the configuration is not JSON ({e})")),
        };
        let Some(doc) = doc.as_object() else {
            return bad("the configuration is not a JSON object".into());
        };
        match doc.get("version").and_then(Value::as_i64) {
            Some(1) => {}
            Some(v) => return bad(format!("configuration version {v}; this client reads 1")),
            None => return bad("the configuration has no \"version\": 1".into()),
        }
        let Some(urls) = doc.get("urls").and_then(Value::as_object) else {
            return bad("the configuration has no \"urls\" object".into());
        };
        let pick = |urls: &Map<String, Value>, new: &str, old: &str| {
            urls.get(new)
                .or_else(|| urls.get(old))
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| ConfigError(format!("the configuration has no \"{new}\"")))
        };
        let c = NqConfig {
            large_download_url: pick(urls, "large_download_url", "large_https_download_url")?,
            small_download_url: pick(urls, "small_download_url", "small_https_download_url")?,
            upload_url: pick(urls, "upload_url", "https_upload_url")?,
            test_endpoint: doc
                .get("test_endpoint")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        let host = |u: &str| -> Result<String, ConfigError> {
            let rest = u
                .strip_prefix("https://")
                .or_else(|| u.strip_prefix("http://"))
                .ok_or_else(|| ConfigError(format!("'{u}' is not an http(s) URL")))?;
            Ok(rest.split('/').next().unwrap_or("").to_string())
        };
        let h = host(&c.large_download_url)?;
        if host(&c.small_download_url)? != h || host(&c.upload_url)? != h {
            return bad("the configuration's three URLs name different hosts".into());
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_reads_back_and_carries_both_key_sets() {
        let c = NqConfig::for_origin("https", "server:443");
        let text = c.to_json();
        assert!(text.contains("\"small_https_download_url\": \"https://server:443/small\""));
        assert!(text.contains("\"upload_url\": \"https://server:443/upload\""));
        assert_eq!(NqConfig::parse(&text).unwrap(), c);
    }

    #[test]
    fn an_apple_style_document_with_only_the_older_names_is_read() {
        let text = r#"{"version": 1, "urls": {
            "small_https_download_url": "https://a.example/s",
            "large_https_download_url": "https://a.example/l",
            "https_upload_url": "https://a.example/u"}, "extra": 5}"#;
        let c = NqConfig::parse(text).unwrap();
        assert_eq!(c.upload_url, "https://a.example/u");
    }

    /// Values a document's URLs may have, right and wrong.
    const URLS: &[&str] = &[
        "https://a/s",
        "https://a:4043/l",
        "http://a/u",
        "https://b/u",
        "ftp://a/u",
        "a/u",
        "",
    ];

    proptest::proptest! {
        #[test]
        fn any_document_parses_or_is_refused_and_a_parsed_one_prints_back(
            version in proptest::option::of(0i64..3),
            // Per URL: absent, under the draft's name or the older one, and its value.
            keys in proptest::collection::vec((0u8..3, proptest::sample::select(URLS)), 3),
            endpoint in proptest::option::of("[a-z.]{0,12}"),
            noise in ".{0,60}",
        ) {
            let names = [
                ("small_download_url", "small_https_download_url"),
                ("large_download_url", "large_https_download_url"),
                ("upload_url", "https_upload_url"),
            ];
            let mut urls = serde_json::Map::new();
            for ((new, old), (which, url)) in names.iter().zip(&keys) {
                match which {
                    1 => { urls.insert(new.to_string(), json!(url)); }
                    2 => { urls.insert(old.to_string(), json!(url)); }
                    _ => {}
                }
            }
            let mut doc = json!({ "urls": urls });
            if let Some(v) = version {
                doc["version"] = json!(v);
            }
            if let Some(e) = endpoint {
                doc["test_endpoint"] = json!(e);
            }
            for text in [doc.to_string(), noise] {
                match NqConfig::parse(&text) {
                    Ok(c) => proptest::prop_assert_eq!(NqConfig::parse(&c.to_json()), Ok(c)),
                    Err(e) => proptest::prop_assert!(!e.0.is_empty()),
                }
            }
        }
    }

    #[test]
    fn bad_documents_are_refused_saying_why() {
        let e = |t: &str| NqConfig::parse(t).unwrap_err().0;
        assert!(e("{").contains("not JSON"));
        assert!(e(r#"{"version": 2, "urls": {}}"#).contains("version 2"));
        assert!(
            e(r#"{"version": 1, "urls": {"small_download_url": "https://a/s"}}"#)
                .contains("large_download_url")
        );
        assert!(e(
            r#"{"version": 1, "urls": {"small_download_url": "https://a/s",
            "large_download_url": "https://b/l", "upload_url": "https://a/u"}}"#
        )
        .contains("different hosts"));
        assert!(e(
            r#"{"version": 1, "urls": {"small_download_url": "ftp://a/s",
            "large_download_url": "https://a/l", "upload_url": "https://a/u"}}"#
        )
        .contains("not an http(s) URL"));
    }
}
