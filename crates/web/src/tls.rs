//! TLS for the lab: a certificate authority made at run time (nothing to ship, nothing that
//! outlives the run), a server certificate for the page's host names signed by it, and the
//! rustls configurations of both ends with ALPN (`h2`, `http/1.1`, RFC 7301). The CA's
//! certificate is written as PEM so that a client, or a browser's trust store, can trust it.

use std::sync::Arc;

use anyhow::{Context, Result};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The ALPN protocol identifiers (RFC 7301 section 6, RFC 9113 section 3.2).
pub const ALPN_H2: &[u8] = b"h2";
pub const ALPN_HTTP11: &[u8] = b"http/1.1";

/// A server's certificate chain and key, and the CA's certificate in PEM.
pub struct ServerIdentity {
    pub ca_pem: String,
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// base64 of the SHA-256 of the server key's SubjectPublicKeyInfo (RFC 7469 section 2.4's
    /// pin, which Chromium's `--ignore-certificate-errors-spki-list` takes).
    pub spki_sha256_base64: String,
}

/// A fresh CA and a server certificate for `names` (host names or IP addresses).
pub fn make_identity(names: &[String]) -> Result<ServerIdentity> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).context("CA parameters")?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "latencylab lab-local CA");
    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let ca_cert = ca.self_signed(&ca_key).context("signing the CA")?;
    let mut leaf = CertificateParams::new(names.to_vec())
        .with_context(|| format!("certificate names {names:?}"))?;
    leaf.distinguished_name
        .push(DnType::CommonName, names.first().map_or("server", |s| s));
    let key = KeyPair::generate().context("generating the server key")?;
    let cert = leaf
        .signed_by(&key, &ca_cert, &ca_key)
        .context("signing the server certificate")?;
    let spki = ring::digest::digest(&ring::digest::SHA256, &key.public_key_der());
    Ok(ServerIdentity {
        spki_sha256_base64: base64(spki.as_ref()),
        ca_pem: ca_cert.pem(),
        chain: vec![cert.der().clone(), ca_cert.der().clone()],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    })
}

pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server's TLS configuration: both protocols offered, HTTP/2 preferred.
pub fn server_config(id: &ServerIdentity) -> Result<Arc<rustls::ServerConfig>> {
    let mut c = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(id.chain.clone(), id.key.clone_key())
        .context("the server certificate")?;
    c.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()];
    Ok(Arc::new(c))
}

/// A client configuration trusting only the CA in `ca_pem`, offering one protocol.
pub fn client_config(ca_pem: &[u8], alpn: &[u8]) -> Result<Arc<rustls::ClientConfig>> {
    client_config_versions(ca_pem, alpn, rustls::DEFAULT_VERSIONS).map(Arc::new)
}

/// [`client_config`] with the TLS versions given (QUIC takes TLS 1.3 only, RFC 9001 section
/// 4.2).
pub fn client_config_versions(
    ca_pem: &[u8],
    alpn: &[u8],
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let mut n = 0;
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(cert.context("reading a certificate of the CA file")?)
            .context("adding the CA certificate")?;
        n += 1;
    }
    if n == 0 {
        anyhow::bail!("the CA file holds no PEM certificate");
    }
    let mut c = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .context("TLS versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![alpn.to_vec()];
    Ok(c)
}

/// Standard base64 with padding (RFC 4648 section 4).
pub fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_test_vectors() {
        // RFC 4648 section 10.
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, coded) in cases {
            assert_eq!(base64(plain.as_bytes()), coded, "{plain:?}");
        }
    }

    #[test]
    fn the_pin_is_a_sha256_in_base64() {
        let id = make_identity(&["server".to_string()]).unwrap();
        assert_eq!(id.spki_sha256_base64.len(), 44);
        assert!(id.spki_sha256_base64.ends_with('='));
    }
}
