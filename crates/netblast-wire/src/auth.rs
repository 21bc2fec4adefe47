//! Authentication of the data port: a shared token, proven by HMAC-SHA256 over a nonce from each
//! side, so the token itself never crosses the wire.
//!
//! After the 32-byte connection header the dialing side sends a 32-byte nonce `Nc`; the
//! listening side answers with a server hello (the handshake module)
//! carrying its own nonce `Ns` and, when it has a token, its proof. The transcript is
//! `header ‖ Nc ‖ Ns`:
//!
//! ```text
//! server proof = HMAC(token, "netblast/2 server" ‖ transcript)
//! client proof = HMAC(token, "netblast/2 client" ‖ transcript)
//! stream key   = HMAC(token or "", "netblast/2 streams" ‖ transcript)
//! stream tag   = HMAC(stream key, test id ‖ stream id)[..16]
//! ```
//!
//! Both proofs bind the header (role, test id), so a proof cannot be replayed on another
//! connection or for another test. Stream connections of a test carry the tag instead of a
//! handshake: only the connection that set the test up knows its key. The traffic itself is
//! not encrypted (a performance tool measures the path, not a TLS stack): the token keeps
//! strangers from ordering tests, it does not hide what is sent.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;
use std::path::Path;

/// Length of each side's nonce.
pub const NONCE_LEN: usize = 32;
/// Length of a proof.
pub const PROOF_LEN: usize = 32;
/// Length of a stream tag.
pub const TAG_LEN: usize = 16;
/// Shortest token accepted: 16 bytes (128 bits if random).
pub const MIN_TOKEN_LEN: usize = 16;
/// Longest token file read.
pub const MAX_TOKEN_LEN: usize = 4096;

type HmacSha256 = Hmac<Sha256>;

/// A shared secret. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(Vec<u8>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({} bytes)", self.0.len())
    }
}

impl Token {
    /// A token from its text; surrounding whitespace (a trailing newline) is not part of it.
    pub fn new(text: &str) -> Result<Token, String> {
        let t = text.trim();
        if t.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "the token is {} bytes; at least {MIN_TOKEN_LEN} are needed (e.g. `head -c 32 /dev/urandom | base64`)",
                t.len()
            ));
        }
        if t.len() > MAX_TOKEN_LEN {
            return Err(format!("the token is longer than {MAX_TOKEN_LEN} bytes"));
        }
        Ok(Token(t.as_bytes().to_vec()))
    }

    /// Reads a token file (its first line matters; the file should be readable by its owner
    /// only). Errors name the file.
    pub fn from_file(path: &Path) -> Result<Token, String> {
        let meta = std::fs::metadata(path).map_err(|e| format!("cannot read token file {}: {e}", path.display()))?;
        if !meta.is_file() || meta.len() > MAX_TOKEN_LEN as u64 {
            return Err(format!("token file {} is not a small regular file", path.display()));
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read token file {}: {e}", path.display()))?;
        Token::new(&text).map_err(|e| format!("token file {}: {e}", path.display()))
    }

    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A fresh random nonce.
pub fn nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    // The kernel's random source does not fail after boot; if it ever did, a predictable nonce
    // would weaken replay protection, so this is a hard error (a panic here is a bug report).
    getrandom::getrandom(&mut n).expect("the kernel's random number source works");
    n
}

/// What both sides of a handshake saw: the header and the two nonces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transcript {
    /// The dialing side's 32-byte connection header.
    pub header: [u8; crate::header::HEADER_LEN],
    /// The dialing side's nonce.
    pub client_nonce: [u8; NONCE_LEN],
    /// The listening side's nonce.
    pub server_nonce: [u8; NONCE_LEN],
}

fn mac(key: &[u8], label: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    // HMAC takes keys of any length; this cannot fail.
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC accepts any key length");
    m.update(label);
    for p in parts {
        m.update(p);
    }
    m
}

impl Transcript {
    fn parts(&self) -> [&[u8]; 3] {
        [&self.header, &self.client_nonce, &self.server_nonce]
    }

    /// The listening side's proof.
    pub fn server_proof(&self, token: &Token) -> [u8; PROOF_LEN] {
        mac(token.bytes(), b"netblast/2 server", &self.parts()).finalize().into_bytes().into()
    }

    /// The dialing side's proof.
    pub fn client_proof(&self, token: &Token) -> [u8; PROOF_LEN] {
        mac(token.bytes(), b"netblast/2 client", &self.parts()).finalize().into_bytes().into()
    }

    /// Checks the listening side's proof (constant time).
    pub fn verify_server(&self, token: &Token, proof: &[u8]) -> bool {
        mac(token.bytes(), b"netblast/2 server", &self.parts()).verify_slice(proof).is_ok()
    }

    /// Checks the dialing side's proof (constant time).
    pub fn verify_client(&self, token: &Token, proof: &[u8]) -> bool {
        mac(token.bytes(), b"netblast/2 client", &self.parts()).verify_slice(proof).is_ok()
    }

    /// The key that tags this test's stream connections.
    pub fn stream_key(&self, token: Option<&Token>) -> StreamKey {
        let key = token.map(Token::bytes).unwrap_or(&[]);
        StreamKey(mac(key, b"netblast/2 streams", &self.parts()).finalize().into_bytes().into())
    }
}

/// The key of one test's stream tags. Its `Debug` never shows it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct StreamKey([u8; 32]);

impl fmt::Debug for StreamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StreamKey(..)")
    }
}

impl StreamKey {
    /// The tag a stream connection of `test_id` with id `stream_id` carries.
    pub fn tag(&self, test_id: &[u8; 16], stream_id: u32) -> [u8; TAG_LEN] {
        let full = mac(&self.0, b"", &[test_id, &stream_id.to_be_bytes()]).finalize().into_bytes();
        let mut t = [0u8; TAG_LEN];
        t.copy_from_slice(&full[..TAG_LEN]);
        t
    }

    /// Checks a stream connection's tag (constant time).
    pub fn verify(&self, test_id: &[u8; 16], stream_id: u32, tag: &[u8]) -> bool {
        let expect = self.tag(test_id, stream_id);
        tag.len() == TAG_LEN && expect.iter().zip(tag).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript() -> Transcript {
        Transcript { header: [1; 32], client_nonce: nonce(), server_nonce: nonce() }
    }

    #[test]
    fn proofs_verify_only_with_the_same_token_and_transcript() {
        let t = transcript();
        let good = Token::new("0123456789abcdef-secret").unwrap();
        let bad = Token::new("0123456789abcdef-other").unwrap();
        assert!(t.verify_client(&good, &t.client_proof(&good)));
        assert!(!t.verify_client(&bad, &t.client_proof(&good)));
        assert!(!t.verify_server(&good, &t.client_proof(&good)), "the two directions differ");
        let mut other = t;
        other.header[8] ^= 1;
        assert!(!other.verify_client(&good, &t.client_proof(&good)), "bound to the header");
        assert!(!t.verify_client(&good, &[0u8; 5]));
    }

    #[test]
    fn stream_tags_bind_test_and_stream() {
        let t = transcript();
        let tok = Token::new("0123456789abcdef").unwrap();
        let k = t.stream_key(Some(&tok));
        let tag = k.tag(&[7; 16], 3);
        assert!(k.verify(&[7; 16], 3, &tag));
        assert!(!k.verify(&[7; 16], 4, &tag));
        assert!(!k.verify(&[8; 16], 3, &tag));
        assert!(!t.stream_key(None).verify(&[7; 16], 3, &tag));
    }

    #[test]
    fn short_tokens_are_refused_and_never_printed() {
        assert!(Token::new(" short\n").unwrap_err().contains("16"));
        let t = Token::new("a-long-enough-secret\n").unwrap();
        assert!(!format!("{t:?}").contains("secret"));
    }
}
