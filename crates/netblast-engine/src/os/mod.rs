//! The host: socket calls, socket options, CPUs, descriptors, host facts.

pub mod doctor;
pub mod host;
pub mod net;
pub mod sockopt;
pub mod sys;
