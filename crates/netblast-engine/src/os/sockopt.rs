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
    mark(sock, tcp.dscp)
}

/// Marks what `sock` sends with `dscp` (nothing when `None`): `IP_TOS` on an IPv4 socket;
/// `IPV6_TCLASS` and `IP_TOS` on an IPv6 one (a dual-stack socket's IPv4 peers take the
/// second). Set before `connect` or `listen`, the handshake carries it too.
pub fn mark(sock: SockRef<'_>, dscp: Option<netblast_spec::mark::Dscp>) -> io::Result<()> {
    let Some(d) = dscp else { return Ok(()) };
    let fd = std::os::fd::AsRawFd::as_raw_fd(&*sock);
    let tos = libc::c_int::from(d.tos());
    let set = |level, name, what: &str| {
        crate::os::net::set_int_opt(fd, level, name, tos).map_err(|e| named(what, format!("DSCP {d}"), e))
    };
    if sock.domain()? == Domain::IPV6 {
        set(libc::IPPROTO_IPV6, libc::IPV6_TCLASS, "IPV6_TCLASS")?;
        // Only a dual-stack socket has IPv4 peers; an IPv6-only one may refuse it.
        let _ = set(libc::IPPROTO_IP, libc::IP_TOS, "IP_TOS");
        Ok(())
    } else {
        set(libc::IPPROTO_IP, libc::IP_TOS, "IP_TOS")
    }
}

/// Checks that this host takes the `[tcp]` options (a congestion control that is not loaded,
/// say) by applying them to a socket that is never connected: a bad option is bad input,
/// found before anything is sent. Returns what the kernel made of the buffer sizes asked for:
/// one line each, saying so when it clamped them.
pub fn check(tcp: &TcpSection, nodelay_default: bool) -> io::Result<Vec<Applied>> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    let r = SockRef::from(&s);
    apply(r, tcp, nodelay_default)?;
    applied(SockRef::from(&s), tcp)
}

/// The buffer sizes `tcp` asks for, and what the kernel applied to `r` (a socket they were
/// applied to): one each (the server's side of `-w` reads its own sockets with it).
pub fn applied(r: SockRef<'_>, tcp: &TcpSection) -> io::Result<Vec<Applied>> {
    let mut out = Vec::new();
    for (option, asked, got, sysctl) in [
        ("SO_SNDBUF", tcp.sndbuf(), r.send_buffer_size()?, "net.core.wmem_max"),
        ("SO_RCVBUF", tcp.rcvbuf(), r.recv_buffer_size()?, "net.core.rmem_max"),
    ] {
        if let Some(asked) = asked {
            out.push(Applied::new(option, asked, got as u64, sysctl));
        }
    }
    Ok(out)
}

/// A socket buffer size asked for, and what the kernel applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// `SO_SNDBUF` or `SO_RCVBUF`.
    pub option: &'static str,
    /// Bytes asked for.
    pub asked: u64,
    /// What `getsockopt` reports: Linux doubles the value it accepts (the other half is its
    /// bookkeeping), so the asked size was applied in full when this is twice it.
    pub reported: u64,
    /// The sysctl that caps it.
    pub sysctl: &'static str,
}

impl Applied {
    fn new(option: &'static str, asked: u64, reported: u64, sysctl: &'static str) -> Applied {
        Applied { option, asked, reported, sysctl }
    }

    /// The size in effect, in the units it was asked in (half what the kernel reports).
    pub fn applied(&self) -> u64 {
        self.reported / 2
    }

    /// Whether the kernel applied less than was asked.
    pub fn clamped(&self) -> bool {
        self.applied() < self.asked
    }

    /// The autotuning maximum of this buffer on this host (the third field of
    /// `net.ipv4.tcp_wmem` or `tcp_rmem`): what the kernel grows an unset buffer to.
    fn autotune_max(&self) -> Option<u64> {
        let name = if self.option == "SO_SNDBUF" { "tcp_wmem" } else { "tcp_rmem" };
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).ok()?.split_whitespace().nth(2)?.parse().ok()
    }

    /// One line for the report: the size in effect; when the kernel clamped it, the sysctl to
    /// raise and to what; when the size in effect is below what autotuning would reach here,
    /// that the fixed buffer is the smaller one (a fixed size turns autotuning off).
    pub fn describe(&self) -> String {
        let b = netblast_spec::units::fmt_bytes;
        let mut out = if self.clamped() {
            let cap = std::fs::read_to_string(format!("/proc/sys/{}", self.sysctl.replace('.', "/")))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            format!(
                "{} asked {}, the kernel applied {} ({} = {cap}; as root, sysctl -w {}={} for the size asked)",
                self.option,
                b(self.asked),
                b(self.applied()),
                self.sysctl,
                self.sysctl,
                self.asked
            )
        } else {
            format!("{} {} applied (the kernel reports {})", self.option, b(self.asked), b(self.reported))
        };
        if let Some(auto) = self.autotune_max().filter(|&m| self.applied() < m) {
            let name = if self.option == "SO_SNDBUF" { "tcp_wmem" } else { "tcp_rmem" };
            out.push_str(&format!(
                "; below the {} autotuning reaches on this host without it (net.ipv4.{name} max): a fixed \
                 buffer turns autotuning off, so a long path may be slower with it than without",
                b(auto)
            ));
        }
        out
    }
}

/// Where a test's sockets leave from (`run -B ADDR`, `--bind-dev IFACE`): the plan's, passed to
/// every socket call that opens one.
pub use netblast_spec::result::Binding;

/// Checks that the interface exists and every address is one of this host's (by binding a
/// socket to them); the error names the one that is not.
pub fn check_binding(bind: &Binding) -> io::Result<()> {
    let each = if bind.addrs.is_empty() { 1 } else { bind.addrs.len() };
    for n in 0..each {
        let v6 = bind.addr(n).is_some_and(|a| a.is_ipv6());
        let probe = Socket::new(if v6 { Domain::IPV6 } else { Domain::IPV4 }, Type::STREAM, None)?;
        let only = Binding { addrs: bind.addr(n).into_iter().collect(), ports: None, device: bind.device.clone() };
        bind_nth(&probe, &only, 0)?;
    }
    Ok(())
}

/// Binds `sock` to the binding's device and first address, port 0 (the control connection,
/// and a server's sockets).
pub fn bind_local(sock: &Socket, local: &Binding) -> io::Result<()> {
    let first = Binding { addrs: local.addr(0).into_iter().collect(), ports: None, device: local.device.clone() };
    bind_nth(sock, &first, 0)
}

/// Binds `sock` as the n-th data socket of the binding: its device, its n-th address and port
/// ([`Binding::addr`], [`Binding::port`]); a port that is taken gives way to the next of the
/// range, in turn, until every one was tried (`SO_REUSEADDR` is set, so a port waiting in
/// `TIME_WAIT` from an earlier connection binds; `connect` then refuses it only for the same
/// peer).
pub fn bind_nth(sock: &Socket, local: &Binding, n: usize) -> io::Result<()> {
    if let Some(dev) = &local.device {
        sock.bind_device(Some(dev.as_bytes())).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::ENODEV) { " (no such interface)" } else { "" };
            io::Error::new(e.kind(), format!("--bind-dev {dev}: {e}{hint}"))
        })?;
    }
    let addr = local.addr(n);
    let Some((lo, hi)) = local.ports else {
        let Some(a) = addr else { return Ok(()) };
        return sock.bind(&SocketAddr::new(a, 0).into()).map_err(|e| not_local(e, a));
    };
    sock.set_reuse_address(true)?;
    let any = |v6: bool| if v6 { std::net::IpAddr::from([0u16; 8]) } else { std::net::IpAddr::from([0u8; 4]) };
    let ip = addr.unwrap_or_else(|| any(sock.domain().is_ok_and(|d| d == Domain::IPV6)));
    let count = local.port_count();
    let first = usize::from(local.port(n) - lo);
    for k in 0..count {
        let port = lo + ((first + k) % count) as u16;
        match sock.bind(&SocketAddr::new(ip, port).into()) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
            r => return r.map_err(|e| not_local(e, ip)),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("--cport {lo}-{hi}: every port is taken on {ip} (by this test's other sockets or another program)"),
    ))
}

/// What the kernel holds for a connected TCP socket's options (see
/// [`netblast_spec::result::SocketSetup`]); a getter that fails leaves its field at 0.
pub fn read_back(sock: SockRef<'_>) -> netblast_spec::result::SocketSetup {
    let v6 = sock.domain().is_ok_and(|d| d == Domain::IPV6);
    let v4_peer = sock.peer_addr().ok().and_then(|a| a.as_socket()).is_some_and(|a| match a.ip() {
        std::net::IpAddr::V4(_) => true,
        std::net::IpAddr::V6(a) => a.to_ipv4_mapped().is_some(),
    });
    let tos = if v6 && !v4_peer { sock.tclass_v6() } else { sock.tos_v4() };
    let device = sock.local_addr().ok().and_then(|a| a.as_socket()).and_then(|a| crate::os::sys::device_of(a.ip()));
    netblast_spec::result::SocketSetup {
        sndbuf: sock.send_buffer_size().unwrap_or(0) as u64,
        rcvbuf: sock.recv_buffer_size().unwrap_or(0) as u64,
        congestion: sock
            .tcp_congestion()
            .map(|c| String::from_utf8_lossy(&c).trim_end_matches('\0').to_string())
            .unwrap_or_default(),
        mss: sock.tcp_mss().unwrap_or(0),
        nodelay: sock.tcp_nodelay().unwrap_or(false),
        tos: tos.unwrap_or(0) as u8,
        offloads: device.as_deref().and_then(crate::os::net::offloads),
        device: device.unwrap_or_default(),
    }
}

/// The next data socket number of this process, for sockets opened one by one as a test goes
/// (cps connections, HTTP connections): they spread over the binding's addresses and ports in
/// turn.
pub fn next_socket() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn not_local(e: io::Error, a: std::net::IpAddr) -> io::Error {
    let hint = if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) { " (not an address of this host)" } else { "" };
    io::Error::new(e.kind(), format!("-B {a}: {e}{hint}"))
}

/// A listening TCP socket on `addr` (`SO_REUSEADDR`; `::` takes IPv4 too), on interface
/// `device` if given, non-blocking (for an event loop), with a backlog of 1024.
pub fn listener(addr: SocketAddr, device: Option<&str>) -> io::Result<std::net::TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    if let Some(dev) = device {
        s.bind_device(Some(dev.as_bytes()))?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(false)?;
    }
    s.bind(&addr.into())?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// The address this host's connections to `to` leave from: the binding's, or the one the
/// kernel's route picks (a datagram socket connected to `to` reads it; nothing is sent).
pub fn source_address(to: SocketAddr, bind: &Binding) -> io::Result<std::net::IpAddr> {
    let sock = Socket::new(Domain::for_address(to), Type::DGRAM, None)?;
    bind_local(&sock, bind)?;
    sock.connect(&to.into())?;
    sock.local_addr()?.as_socket().map(|a| a.ip()).ok_or_else(|| io::Error::other("not an IP socket"))
}

/// How a test's TCP connections are opened: the `[tcp]` options, whether `TCP_NODELAY` is the
/// kind's default, the connect timeout, and where they leave from.
#[derive(Debug, Clone, Copy)]
pub struct Dial<'a> {
    /// The profile's socket options.
    pub tcp: &'a TcpSection,
    /// `TCP_NODELAY` unless the profile says otherwise.
    pub nodelay_default: bool,
    /// A connection not made within this long fails.
    pub timeout: Duration,
    /// Where it leaves from.
    pub bind: &'a Binding,
    /// Which data socket of the binding it is ([`bind_nth`]).
    pub n: usize,
}

/// Opens a TCP connection with the options applied before `connect` (so the SYN already
/// carries the window scale and MSS they imply), from the binding.
///
/// With a `--cport` range, the kernel refuses a port whose four-tuple to `addr` is held by
/// another connection (one of this test's, another program's that the kernel gave the port to,
/// or one waiting in `TIME_WAIT` after an earlier run: `connect` says EADDRNOTAVAIL). The
/// socket then gives way to the range's other ports in turn, and when every one is held, tries
/// again every 100 ms (a `TIME_WAIT` to a loopback peer may be reused a second after it began)
/// until the connect timeout, then says which port is held and by what.
pub fn connect(addr: SocketAddr, d: Dial<'_>) -> io::Result<TcpStream> {
    let deadline = std::time::Instant::now() + d.timeout;
    let open = |n: usize| -> io::Result<Socket> {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        apply(SockRef::from(&sock), d.tcp, d.nodelay_default)?;
        bind_nth(&sock, d.bind, n)?;
        Ok(sock)
    };
    let Some((lo, hi)) = d.bind.ports else {
        let sock = open(d.n)?;
        sock.connect_timeout(&addr.into(), d.timeout)?;
        return Ok(sock.into());
    };
    // The same address, the range's next port: socket numbers one address count apart.
    let stride = d.bind.addrs.len().max(1);
    loop {
        for k in 0..d.bind.port_count() {
            let sock = open(d.n + k * stride)?;
            let left = deadline.saturating_duration_since(std::time::Instant::now()).max(Duration::from_millis(1));
            match sock.connect_timeout(&addr.into(), left) {
                Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => continue,
                r => return r.map(|()| sock.into()),
            }
        }
        if std::time::Instant::now() >= deadline {
            let from = d.bind.addr(d.n).map_or_else(|| "this host".to_string(), |a| a.to_string());
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!(
                    "--cport {lo}-{hi}: from {from}, every port's connection to {addr} is held by another \
                     connection (this test's own, or one in TIME_WAIT for up to a minute after an earlier run \
                     to the same peer; `ss -tan` shows them): wait, or give a wider range"
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A plain TCP connection (the control connection) from the binding, marked with the test's
/// DSCP if it has one. Its port is the kernel's, never one of the binding's `--cport` range:
/// a data connection bound to the same port would find the same four-tuple taken
/// (`connect`: EADDRNOTAVAIL; the kernel picked one of `--cport 40000-40063` once in a few
/// hundred runs). One that lands in the range is closed and dialed again.
pub fn connect_plain(
    addr: SocketAddr,
    timeout: Duration,
    bind: &Binding,
    dscp: Option<netblast_spec::mark::Dscp>,
) -> io::Result<TcpStream> {
    let mut tries = 0;
    loop {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        mark(SockRef::from(&sock), dscp)?;
        bind_local(&sock, bind)?;
        sock.connect_timeout(&addr.into(), timeout)?;
        let port = sock.local_addr()?.as_socket().map_or(0, |a| a.port());
        let in_range = bind.ports.is_some_and(|(lo, hi)| (lo..=hi).contains(&port));
        tries += 1;
        if !in_range || tries == 16 {
            return Ok(sock.into());
        }
    }
}

/// A UDP socket on `ip` (port 0), bound to interface `device` if given.
pub fn udp_on(ip: std::net::IpAddr, device: Option<&str>) -> io::Result<std::net::UdpSocket> {
    udp_on_in(SocketAddr::new(ip, 0), device, None)
}

/// The ports a server's per-flow sockets may take (`serve --flow-ports LO-HI`: a cps flow's
/// listener, a UDP flow's socket), so a Service, a load balancer or a firewall rule can name
/// them; `None`: any the kernel picks.
pub type FlowPorts = Option<(u16, u16)>;

/// `bind(port)` on the first port of `ports` that is free (taken: the next one); `None`: port 0.
pub fn bind_in<T>(ports: FlowPorts, mut bind: impl FnMut(u16) -> io::Result<T>) -> io::Result<T> {
    let Some((lo, hi)) = ports else { return bind(0) };
    for port in lo..=hi {
        match bind(port) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
            r => return r,
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("every port of {lo}-{hi} is taken (serve --flow-ports: give more)"),
    ))
}

/// [`udp_on`], its port one of `ports`.
pub fn udp_on_in(at: SocketAddr, device: Option<&str>, ports: FlowPorts) -> io::Result<std::net::UdpSocket> {
    bind_in(ports, |port| {
        let sock = Socket::new(Domain::for_address(at), Type::DGRAM, Some(Protocol::UDP))?;
        if let Some(dev) = device {
            sock.bind_device(Some(dev.as_bytes()))?;
        }
        sock.bind(&with_port(at, port).into())?;
        Ok(sock.into())
    })
}

/// `at` on `port`, its IPv6 scope kept: a link-local address (`fe80::1%eth0`) binds only with
/// the interface it names.
pub fn with_port(mut at: SocketAddr, port: u16) -> SocketAddr {
    at.set_port(port);
    at
}

/// A UDP socket on `ip`, in an `SO_REUSEPORT` group on `port`: the group's first socket
/// (`port` `None`) takes a port nobody uses, the others join it. Unconnected: the receiver
/// filters what it takes by source.
pub fn udp_group_on(
    at: SocketAddr,
    port: Option<u16>,
    device: Option<&str>,
    ports: FlowPorts,
) -> io::Result<std::net::UdpSocket> {
    let port = match port {
        Some(p) => p,
        // A port free of any socket: binding port 0 with SO_REUSEPORT set could land on another
        // group of this user's and join it, so the port comes from a plain socket first.
        None => udp_on_in(at, device, ports)?.local_addr()?.port(),
    };
    let sock = Socket::new(Domain::for_address(at), Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_reuse_port(true)?;
    if let Some(dev) = device {
        sock.bind_device(Some(dev.as_bytes()))?;
    }
    sock.bind(&with_port(at, port).into())?;
    Ok(sock.into())
}

/// Makes a UDP flow's socket ready when it is opened, before the peer may send: the
/// socket-buffer options of `[tcp]` (`-w`) and its DSCP mark apply to it too, and without them its receive queue
/// grows to [`UDP_RCVBUF`]. Done at open, not by the worker after the start, because the
/// first datagrams can arrive before the receiving end's workers exist.
pub fn ready_udp(sock: &std::net::UdpSocket, tcp: &TcpSection) -> io::Result<()> {
    let s = SockRef::from(sock);
    mark(SockRef::from(sock), tcp.dscp)?;
    if let Some(b) = tcp.sndbuf() {
        s.set_send_buffer_size(b as usize).map_err(|e| named("SO_SNDBUF", b, e))?;
    }
    match tcp.rcvbuf() {
        Some(b) => s.set_recv_buffer_size(b as usize).map_err(|e| named("SO_RCVBUF", b, e)),
        None => grow_rcvbuf(std::os::fd::AsRawFd::as_raw_fd(sock), UDP_RCVBUF).map(|_| ()),
    }
}

/// Ties a per-CPU receiver's socket to `cpu` (`SO_INCOMING_CPU`): its `SO_REUSEPORT` group
/// gives it the datagrams that CPU's network stack processes. Done when the socket is opened:
/// a datagram that arrives while a socket of the group is untied goes to a socket chosen by
/// hash.
pub fn tie_to_cpu(sock: &std::net::UdpSocket, cpu: usize) -> io::Result<()> {
    SockRef::from(sock).set_cpu_affinity(cpu).map_err(|e| named("SO_INCOMING_CPU", cpu, e))
}

/// Receive queue a UDP receiver asks for when `-w` does not set one: at a million small
/// datagrams a second it holds a scheduler slice's worth (the default, ~208 KiB, holds a few
/// hundred, so a receiver sharing its CPU overflows while it waits to run).
pub const UDP_RCVBUF: u64 = 8 << 20;

/// Holds a TCP socket's sending rate at `bits_per_s` (payload) by the kernel's pacing
/// (`SO_MAX_PACING_RATE`, bytes per second; TCP paces internally without the fq qdisc since
/// Linux 4.13). Returns the rate the kernel reports back, bits per second.
pub fn set_max_pacing_rate(fd: std::os::fd::RawFd, bits_per_s: f64) -> io::Result<f64> {
    let bytes: u64 = (bits_per_s / 8.0).round() as u64;
    // SAFETY: `bytes` is a u64 that outlives the call; its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&bytes as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(named("SO_MAX_PACING_RATE", format!("{bits_per_s} bit/s"), io::Error::last_os_error()));
    }
    let mut back: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: `back` is a u64 that outlives the call; `len` is its size and is updated.
    let rc = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, (&mut back as *mut u64).cast(), &mut len)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // A kernel that keeps the option in 32 bits writes 4 bytes: the rest of `back` stays 0.
    Ok(back as f64 * 8.0)
}

/// How much of a paced sender's data may wait in its socket unsent: 20 ms at its rate, within
/// 4 KiB..8 MiB. Without a bound, the send buffer (autotuned to megabytes) takes seconds of
/// a low rate at once: the bytes counted as sent were only queued, and the queue drained long
/// after the test's end (`-b 1M -t 3s` counted 10.9 Mbit/s sent and received for 30 s).
pub fn paced_notsent_lowat(bits_per_s: f64) -> u32 {
    ((bits_per_s / 8.0 * 0.020) as u64).clamp(4 << 10, 8 << 20) as u32
}

/// Sets `TCP_NOTSENT_LOWAT`: the socket takes more data only while less than `bytes` of what it
/// holds is unsent.
pub fn set_notsent_lowat(fd: std::os::fd::RawFd, bytes: u32) -> io::Result<()> {
    let v = bytes.min(i32::MAX as u32) as libc::c_int;
    crate::os::net::set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, v)
        .map_err(|e| named("TCP_NOTSENT_LOWAT", format!("{bytes} bytes"), e))
}

/// Grows a socket's receive queue to `bytes` (`SO_RCVBUFFORCE` where allowed, as root, else
/// `SO_RCVBUF` up to `net.core.rmem_max`); returns what applies, in bytes of data.
pub fn grow_rcvbuf(fd: std::os::fd::RawFd, bytes: u64) -> io::Result<u64> {
    let v = bytes.min(i32::MAX as u64 / 2) as libc::c_int;
    if crate::os::net::set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v).is_err() {
        crate::os::net::set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, v)?;
    }
    rcvbuf_of(fd)
}

/// A socket's receive queue in bytes of data (the kernel reports twice that, bookkeeping
/// included).
pub fn rcvbuf_of(fd: std::os::fd::RawFd) -> io::Result<u64> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for getsockopt's int result.
    let rc = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, (&mut v as *mut libc::c_int).cast(), &mut len)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v.max(0) as u64 / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netblast_spec::units::ByteSize;

    #[test]
    fn a_pacing_rate_is_set_and_read_back() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let got = set_max_pacing_rate(std::os::fd::AsRawFd::as_raw_fd(&c), 500e6).unwrap();
        assert_eq!(got, 500e6);
    }

    #[test]
    fn applies_buffers_and_nodelay() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = TcpSection { window: Some(ByteSize(1 << 20)), nodelay: Some(true), ..Default::default() };
        let dial = Dial {
            tcp: &tcp,
            nodelay_default: false,
            timeout: Duration::from_secs(2),
            bind: &Binding::default(),
            n: 0,
        };
        let s = connect(l.local_addr().unwrap(), dial).unwrap();
        let r = SockRef::from(&s);
        assert!(r.send_buffer_size().unwrap() >= 1 << 20);
        assert!(r.tcp_nodelay().unwrap());
    }

    #[test]
    fn a_reuseport_group_shares_one_port_and_its_first_port_is_free() {
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let a = udp_group_on(SocketAddr::new(ip, 0), None, None, None).unwrap();
        let port = a.local_addr().unwrap().port();
        let b = udp_group_on(SocketAddr::new(ip, 0), Some(port), None, None).unwrap();
        assert_eq!(b.local_addr().unwrap().port(), port);
        // A socket outside the group cannot take the port.
        assert!(std::net::UdpSocket::bind((ip, port)).is_err());
        let grown = grow_rcvbuf(std::os::fd::AsRawFd::as_raw_fd(&a), 1 << 20).unwrap();
        assert!(grown > 0 && grown <= 1 << 20, "{grown}");
    }

    #[test]
    fn a_buffer_over_the_sysctl_cap_is_reported_clamped() {
        let cap: u64 = std::fs::read_to_string("/proc/sys/net/core/wmem_max").unwrap().trim().parse().unwrap();
        let tcp = TcpSection { window: Some(ByteSize(cap * 4)), ..Default::default() };
        let a = check(&tcp, false).unwrap();
        assert_eq!(a.len(), 2);
        let snd = &a[0];
        assert!(snd.clamped() && snd.applied() == cap, "{snd:?}");
        assert!(snd.describe().contains("net.core.wmem_max"), "{}", snd.describe());
        let small = TcpSection { window: Some(ByteSize(64 * 1024)), ..Default::default() };
        assert!(check(&small, false).unwrap().iter().all(|a| !a.clamped() && a.applied() == 64 * 1024));
    }

    #[test]
    fn unknown_congestion_control_is_named() {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let tcp = TcpSection { congestion: Some("nosuchcc".into()), ..Default::default() };
        let e = apply(SockRef::from(&s), &tcp, false).unwrap_err().to_string();
        assert!(e.contains("nosuchcc"), "{e}");
    }
}
