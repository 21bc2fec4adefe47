//! Socket options from `[tcp]`, applied the same way on both ends, with errors that name the
//! option and the value.

use netblast_spec::profile::TcpSection;
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

fn named(option: &str, value: impl std::fmt::Display, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cannot set {option} to {value}: {e}"))
}

/// Applies `[tcp]` options to a socket. `nodelay_default` is the kind's default for
/// TCP_NODELAY when the profile does not say.
pub fn apply(sock: SockRef<'_>, tcp: &TcpSection, nodelay_default: bool) -> io::Result<()> {
    if let Some(b) = tcp.sndbuf() {
        sock.set_send_buffer_size(b as usize).map_err(|e| named("SO_SNDBUF", b, e))?;
    }
    if let Some(b) = tcp.rcvbuf() {
        sock.set_recv_buffer_size(b as usize).map_err(|e| named("SO_RCVBUF", b, e))?;
    }
    if let Some(mss) = tcp.mss {
        sock.set_tcp_mss(mss).map_err(|e| named("TCP_MAXSEG", mss, e))?;
    }
    if let Some(cc) = &tcp.congestion {
        sock.set_tcp_congestion(cc.as_bytes()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot use TCP congestion control {cc:?}: {e} (see \
                     /proc/sys/net/ipv4/tcp_available_congestion_control; load the module or \
                     pick another)"
                ),
            )
        })?;
    }
    let nodelay = tcp.nodelay.unwrap_or(nodelay_default);
    sock.set_tcp_nodelay(nodelay).map_err(|e| named("TCP_NODELAY", nodelay, e))?;
    Ok(())
}

/// Checks that this host takes the `[tcp]` options (a congestion control that is not loaded,
/// say) by applying them to a socket that is never connected: a bad option is bad input,
/// found before anything is sent.
pub fn check(tcp: &TcpSection, nodelay_default: bool) -> io::Result<()> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    apply(SockRef::from(&s), tcp, nodelay_default)
}

/// Opens a TCP connection with the options applied before `connect` (so the SYN already
/// carries the window scale and MSS they imply).
pub fn connect(addr: SocketAddr, tcp: &TcpSection, nodelay_default: bool, timeout: Duration) -> io::Result<TcpStream> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    apply(SockRef::from(&sock), tcp, nodelay_default)?;
    sock.connect_timeout(&addr.into(), timeout)?;
    Ok(sock.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netblast_spec::units::ByteSize;

    #[test]
    fn applies_buffers_and_nodelay() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = TcpSection { window: Some(ByteSize(1 << 20)), nodelay: Some(true), ..Default::default() };
        let s = connect(l.local_addr().unwrap(), &tcp, false, Duration::from_secs(2)).unwrap();
        let r = SockRef::from(&s);
        assert!(r.send_buffer_size().unwrap() >= 1 << 20);
        assert!(r.tcp_nodelay().unwrap());
    }

    #[test]
    fn unknown_congestion_control_is_named() {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let tcp = TcpSection { congestion: Some("nosuchcc".into()), ..Default::default() };
        let e = apply(SockRef::from(&s), &tcp, false).unwrap_err().to_string();
        assert!(e.contains("nosuchcc"), "{e}");
    }
}
