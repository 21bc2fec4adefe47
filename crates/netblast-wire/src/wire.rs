//! The data-port protocol (version 2) between `netblast run`, `netblast serve` and a fleet
//! coordinator.
//!
//! Every TCP connection to the data port opens with a fixed 32-byte [`Header`]:
//!
//! ```text
//! 0      4         6      7       8                24          28          30         32
//! | NBLT | max ver | role | flags | test id (16 B) | stream id | min ver   | reserved |
//! ```
//!
//! (big-endian integers; a version 1 peer leaves `min ver` zero, meaning "only max ver").
//!
//! - *Stream* connections follow the header with a 16-byte tag (see [`crate::auth`]): only the
//!   connection that set the test up knows the key. For UDP flows the tag is followed by the
//!   client's UDP port (u16) and the server's one-byte [`StreamAck`] by the server's UDP port;
//!   both UDP sockets are connected to each other, so the server exchanges datagrams with that
//!   one address and port only, for the test's duration. Then traffic only.
//! - *Control*, *fleet* and *register* connections follow the header with the dialing side's
//!   32-byte nonce; the listening side answers with a [`ServerHello`] (the version it chose, its
//!   nonce, its proof when it has a token); when it asks for authentication the dialing side
//!   sends its 32-byte proof. Then length-prefixed JSON frames (`u32` big-endian length): a
//!   [`ClientMsg`]/[`ServerMsg`] exchange for a test, [`netblast_spec::fleet`] messages for a fleet.
//!
//! Version negotiation: each side speaks a range; the highest common version wins, and a peer
//! with no common version gets a refusal naming both ranges (a version 1 peer in the form it
//! understands: a `refused` frame on a control connection, an ack byte on a stream).
//!
//! Frames tolerate unknown fields (a newer peer may add optional information); a profile inside
//! a set-up stays strict, since ignoring a setting would run another test than the one asked.
//!
//! This module gathers the protocol's parts under one name: [`crate::header`],
//! [`crate::handshake`] and [`crate::frame`].

pub use crate::frame::*;
pub use crate::handshake::*;
pub use crate::header::*;

/// Blocking helpers over `std::io` streams (used by the client).
pub mod blocking {
    pub use crate::frame::blocking::*;
    pub use crate::handshake::blocking::*;
}

/// The same helpers over tokio streams (feature `tokio`): for `serve` and the coordinator.
#[cfg(feature = "tokio")]
pub mod nonblocking {
    pub use crate::frame::nonblocking::*;
    pub use crate::handshake::nonblocking::*;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{NONCE_LEN, Token};
    use std::io::{Read, Write};

    #[test]
    fn header_roundtrip() {
        let h = Header::new(Role::Stream, TestId([7; 16]), 42);
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
        let h = Header::new(Role::Register, TestId([1; 16]), 0);
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn header_rejects_garbage_and_roles() {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(b"GET ");
        assert!(matches!(Header::decode(&b), Err(HeaderError::BadMagic(_))));
        let h = Header::new(Role::Control, TestId([1; 16]), 0);
        let mut b = h.encode();
        b[6] = 77;
        assert_eq!(Header::decode(&b), Err(HeaderError::BadRole(77)));
    }

    #[test]
    fn versions_negotiate_and_a_v1_peer_is_named() {
        assert_eq!(negotiate((2, 2)), Ok(2));
        assert_eq!(negotiate((2, 9)), Ok(4), "a newer peer that still speaks 4");
        let e = negotiate((1, 1)).unwrap_err();
        assert_eq!(e.to_string(), "the peer speaks netblast protocol version 1, this build speaks version 2 to 4");
        assert!(negotiate((5, 6)).is_err());
        // Fleet connections need 4 (their frames carry netblast.run/4 results): a version 3
        // coordinator or agent is refused, naming both.
        let mut fleet = Header::new(Role::Fleet, TestId([1; 16]), 0);
        assert_eq!((fleet.range(), fleet.negotiate()), ((4, 4), Ok(4)));
        fleet.version = 3;
        fleet.min_version = 2;
        let e = fleet.negotiate().unwrap_err();
        assert_eq!(e.to_string(), "the peer speaks netblast protocol version 2 to 3, this build speaks version 4");
        let control = Header { role: Role::Control, version: 2, ..fleet };
        assert_eq!(control.negotiate(), Ok(2), "a version 2 client still runs tests");
        // A version 1 header: min field zero means "only version 1".
        let mut b = Header::new(Role::Control, TestId([1; 16]), 0).encode();
        b[4..6].copy_from_slice(&1u16.to_be_bytes());
        b[28..30].copy_from_slice(&[0, 0]);
        let h = Header::decode(&b).unwrap();
        assert_eq!(h.range(), (1, 1));
        // What a version 1 client reads back: a refused frame naming both versions.
        let reply = version_refusal(&h, &negotiate(h.range()).unwrap_err());
        let msg: ServerMsg = blocking::read_frame(&mut reply.as_slice()).unwrap().unwrap();
        assert!(
            matches!(msg, ServerMsg::Refused { ref message, .. } if message.contains("version 1") && message.contains("version 2"))
        );
    }

    #[test]
    fn frames_roundtrip_and_reject_garbage() {
        let msg = ServerMsg::Refused { message: "no".into(), reason: Some(Refusal::Limit) };
        let f = encode_frame(&msg);
        let back: Option<ServerMsg> = blocking::read_frame(&mut f.as_slice()).unwrap();
        assert_eq!(back, Some(msg));
        assert!(frame_len([0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(decode_body::<ClientMsg>(b"{\"type\":\"launch_missiles\"}").is_err());
        let empty: Option<ClientMsg> = blocking::read_frame(&mut &b""[..]).unwrap();
        assert!(empty.is_none());
        // Unknown fields from a newer peer are ignored; a version 1 refusal has no reason.
        let m: ServerMsg = decode_body(b"{\"type\":\"refused\",\"message\":\"x\",\"future\":1}").unwrap();
        assert_eq!(m, ServerMsg::Refused { message: "x".into(), reason: None });
    }

    /// One end of an in-memory duplex: reads come from `input`, writes go to `output`.
    struct Pipe {
        input: std::io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Pipe {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.output.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Runs both sides: the server decides on the client's hello; the client reads the answer.
    fn both(
        client_token: Option<&str>,
        server_token: Option<&str>,
        require: bool,
    ) -> (Result<Session, String>, Result<Session, String>) {
        let ct = client_token.map(|t| Token::new(t).unwrap());
        let st = server_token.map(|t| Token::new(t).unwrap());
        let header = Header::new(Role::Control, TestId([5; 16]), 0);
        let hs = ClientHandshake::new(header, ct, require);
        let hello = hs.hello();
        let hb: [u8; HEADER_LEN] = hello[..HEADER_LEN].try_into().unwrap();
        let nonce: [u8; NONCE_LEN] = hello[HEADER_LEN..].try_into().unwrap();
        let Admit::Proceed { hello: sh, auth } = admit(&Header::decode(&hb).unwrap(), &hb, &nonce, st.as_ref()) else {
            panic!("refused")
        };
        let mut pipe = Pipe { input: std::io::Cursor::new(sh.to_vec()), output: Vec::new() };
        let client = blocking::handshake(&mut pipe, &hs).map_err(|e| e.to_string());
        let proof = &pipe.output[hello.len()..];
        let needs = auth.needs_proof();
        let server =
            auth.check(if needs && !proof.is_empty() { Some(proof) } else { None }).map_err(|_| "refused".to_string());
        (client, server)
    }

    #[test]
    fn handshakes_authenticate_both_ways() {
        let tok = "a-shared-token-of-some-length";
        let (c, s) = both(Some(tok), Some(tok), true);
        let (c, s) = (c.unwrap(), s.unwrap());
        assert!(c.authenticated && s.authenticated);
        assert_eq!(c.stream_key, s.stream_key, "both sides derive the same stream key");
        let (c, s) = both(Some("the-wrong-token-entirely"), Some(tok), false);
        assert!(c.unwrap_err().contains("did not prove"), "the server's proof fails with another token");
        assert!(s.is_err());
        let (c, _) = both(None, Some(tok), false);
        assert!(c.unwrap_err().contains("authentication required"));
        let (c, s) = both(None, None, false);
        assert!(!c.unwrap().authenticated && s.is_ok());
        let (c, _) = both(Some(tok), None, true);
        assert!(c.unwrap_err().contains("does not authenticate"));
    }

    #[test]
    fn a_v1_server_refusal_reads_as_such() {
        let v1 = encode_frame(
            &serde_json::json!({"type": "refused", "message": "peer speaks netblast protocol version 2, this build speaks version 1"}),
        );
        let mut pipe = Pipe { input: std::io::Cursor::new(v1), output: Vec::new() };
        let hs = ClientHandshake::new(Header::new(Role::Control, TestId([5; 16]), 0), None, false);
        let e = blocking::handshake(&mut pipe, &hs).unwrap_err().to_string();
        assert!(e.contains("version 1"), "{e}");
    }
}
