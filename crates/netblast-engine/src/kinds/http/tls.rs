//! The HTTPS client's TLS settings (rustls): trusted roots, `--insecure`, `--cacert`, ALPN.

use netblast_spec::profile::{HttpSection, HttpVersion};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;

/// Which server certificates a client trusts.
#[derive(Debug, Clone, Copy)]
pub struct Trust<'a> {
    /// Any (`--insecure`); the handshake's signatures are still checked.
    pub insecure: bool,
    /// A PEM file of CA certificates to trust beside the system's.
    pub cacert: Option<&'a str>,
}

/// Builds the client TLS configuration of an `[http]` section. Errors name the file or setting.
pub fn client_config(h: &HttpSection) -> Result<Arc<ClientConfig>, String> {
    let trust = Trust { insecure: h.insecure, cacert: h.cacert.as_deref() };
    let mut config = build(trust, rustls::DEFAULT_VERSIONS)?;
    config.alpn_protocols = match h.version {
        HttpVersion::Http1 => vec![b"http/1.1".to_vec()],
        HttpVersion::Http2 => vec![b"h2".to_vec()],
    };
    // Measure full handshakes: no session resumption across connections.
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

/// A client TLS configuration (ring) with `trust` and the protocol `versions`; no ALPN, the
/// default session resumption.
pub fn build(trust: Trust<'_>, versions: &[&'static rustls::SupportedProtocolVersion]) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| format!("TLS setup: {e}"))?;
    if trust.insecure {
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth());
    }
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = trust.cacert {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("cannot read --cacert {path}: {e}"))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("--cacert {path} is not a PEM certificate file: {e}"))?;
        if certs.is_empty() {
            return Err(format!("--cacert {path} holds no certificate"));
        }
        for c in certs {
            roots.add(c).map_err(|e| format!("--cacert {path}: {e}"))?;
        }
    }
    if roots.is_empty() {
        return Err("no trusted CA certificates: install ca-certificates, pass --cacert, or --insecure".into());
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

/// `--insecure`: accepts any certificate, still checks the handshake signatures.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
