//! netblast-wire: how the two ends of a test, and a fleet's coordinator and agents, talk.
//!
//! Beside the plain data of `netblast-spec` (what a test and its result are), this crate holds
//! what crosses a connection and who may send it: the data-port protocol and the token's
//! proofs (HMAC-SHA256, random nonces), and the gathering of intervals streamed by several
//! reporters.
//!
//! # Layout
//! - [`wire`]: the data-port protocol under one name: [`header`] (the connection header,
//!   version negotiation, a stream's answer), [`handshake`] (nonces, hello, proofs, over the
//!   primitives of [`auth`]) and [`frame`] (length-prefixed JSON control frames); with the
//!   `tokio` feature, their async transport.
//! - [`auth`]: the token, and the HMAC proofs and stream tags made from it.
//! - [`gather`]: releases each interval once every reporter has reported it.

#![warn(missing_docs)]

pub mod auth;
pub mod frame;
pub mod gather;
pub mod handshake;
pub mod header;
pub mod wire;
