//! Property tests of every parser of bytes from the network: the connection header, the
//! server's hello, the handshake as the dialing side reads it, control frames, stream acks and
//! tags. Each runs 100 000 cases in the normal suite; `cargo test -p netblast-wire --test fuzz
//! -- --ignored` runs 10 million each. None may panic, allocate without bound, or accept what
//! it should not.

use netblast_wire::auth::{Token, Transcript};
use netblast_wire::wire::{
    self, ClientHandshake, ClientMsg, HEADER_LEN, Header, Role, SERVER_HELLO_LEN, ServerHello, ServerMsg, StreamAck,
    TestId, blocking,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const CASES: u32 = 100_000;
const LONG: u32 = 10_000_000;

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

fn header_prop(cases: u32) {
    runner(cases)
        .run(&proptest::array::uniform32(any::<u8>()), |b| {
            if let Ok(h) = Header::decode(&b) {
                prop_assert!(h.min_version <= h.version);
                // What decodes re-encodes to the same meaning.
                prop_assert_eq!(Header::decode(&h.encode()).unwrap(), h);
                let _ = h.negotiate();
            } else {
                prop_assert!(b[0..4] != wire::MAGIC || b[6] == 0 || b[6] > 4);
            }
            Ok(())
        })
        .unwrap();
}

fn hello_prop(cases: u32) {
    runner(cases)
        .run(&proptest::collection::vec(any::<u8>(), SERVER_HELLO_LEN), |v| {
            let b: [u8; SERVER_HELLO_LEN] = v.try_into().unwrap();
            if let Some(h) = ServerHello::decode(&b) {
                prop_assert_eq!(ServerHello::decode(&h.encode()), Some(h));
            }
            Ok(())
        })
        .unwrap();
}

/// What a dialing side reads back, whatever the listener sends: an error or a session, and a
/// session only with a hello that proves the token when it has one.
fn handshake_prop(cases: u32) {
    let token = Token::new("fuzzing-token-0123456789").unwrap();
    let hs = ClientHandshake::new(Header::new(Role::Control, TestId([1; 16]), 0), Some(token), true);
    let bytes = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        // Hellos with the magic, so the decoder and the proof check are reached.
        (proptest::collection::vec(any::<u8>(), SERVER_HELLO_LEN - 4..300)).prop_map(|mut v| {
            let mut b = wire::MAGIC.to_vec();
            b.append(&mut v);
            b
        }),
    ];
    runner(cases)
        .run(&bytes, |input| {
            let mut io = Duplex { input: std::io::Cursor::new(input), output: Vec::new() };
            let r = blocking::handshake(&mut io, &hs);
            prop_assert!(r.is_err(), "random bytes never prove the token");
            Ok(())
        })
        .unwrap();
}

struct Duplex {
    input: std::io::Cursor<Vec<u8>>,
    output: Vec<u8>,
}

impl std::io::Read for Duplex {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

impl std::io::Write for Duplex {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Valid frames of every kind, then mutated: truncated, bytes flipped, spliced.
fn frames() -> impl Strategy<Value = Vec<u8>> {
    let valid: Vec<Vec<u8>> = vec![
        wire::encode_frame(&ClientMsg::Start),
        wire::encode_frame(&ClientMsg::Stop),
        wire::encode_frame(&ServerMsg::Refused { message: "no".into(), reason: Some(wire::Refusal::Limit) }),
        wire::encode_frame(&ServerMsg::Interval {
            index: 3,
            start_s: 1.0,
            end_s: 2.0,
            streams: vec![wire::ServerSample { id: 1, bytes: 9, msgs: 2, tcp: None, udp: None }],
            ways: vec![],
        }),
        br#"{"type":"setup","client_version":"x","profile":{"description":"d","run":{"kind":"bulk","duration":"1s"},"bulk":{"flows":2}},"time_bound":"1s","streams":[{"id":0,"way":"up"}]}"#.to_vec(),
    ];
    (0..valid.len(), proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6), any::<usize>(), any::<bool>())
        .prop_map(move |(i, flips, cut, framed)| {
            let mut v = valid[i].clone();
            for (at, b) in flips {
                if !v.is_empty() {
                    let k = at % v.len();
                    v[k] = b;
                }
            }
            v.truncate(cut % (v.len() + 1));
            if framed {
                let mut f = (v.len() as u32).to_be_bytes().to_vec();
                f.extend(v);
                f
            } else {
                v
            }
        })
}

fn frame_prop(cases: u32) {
    let any_bytes = proptest::collection::vec(any::<u8>(), 0..256);
    runner(cases)
        .run(&prop_oneof![frames(), any_bytes], |b| {
            let _ = wire::decode_body::<ClientMsg>(&b);
            let _ = wire::decode_body::<ServerMsg>(&b);
            let _ = blocking::read_frame::<_, ClientMsg>(&mut b.as_slice());
            let _ = blocking::read_frame::<_, ServerMsg>(&mut b.as_slice());
            if b.len() >= 4 {
                let n = wire::frame_len([b[0], b[1], b[2], b[3]]);
                prop_assert!(n.map_or(true, |n| n <= wire::MAX_FRAME));
            }
            Ok(())
        })
        .unwrap();
}

fn stream_prop(cases: u32) {
    let t = Transcript { header: [3; HEADER_LEN], client_nonce: [4; 32], server_nonce: [5; 32] };
    let key = t.stream_key(None);
    runner(cases)
        .run(
            &(any::<u8>(), any::<[u8; 16]>(), any::<u32>(), proptest::collection::vec(any::<u8>(), 0..40)),
            |(ack, id, sid, tag)| {
                if let Some(a) = StreamAck::from_byte(ack) {
                    prop_assert_eq!(a as u8, ack);
                }
                // A tag verifies only if it is the one the key makes.
                prop_assert_eq!(key.verify(&id, sid, &tag), tag.as_slice() == key.tag(&id, sid).as_slice());
                Ok(())
            },
        )
        .unwrap();
}

macro_rules! both {
    ($prop:ident, $normal:ident, $long:ident) => {
        #[test]
        fn $normal() {
            $prop(CASES);
        }

        #[test]
        #[ignore = "long fuzzing run: cargo test -p netblast-wire --test fuzz -- --ignored"]
        fn $long() {
            $prop(LONG);
        }
    };
}

both!(header_prop, headers, headers_long);
both!(hello_prop, hellos, hellos_long);
both!(handshake_prop, handshakes, handshakes_long);
both!(frame_prop, frames_and_messages, frames_and_messages_long);
both!(stream_prop, stream_acks_and_tags, stream_acks_and_tags_long);
