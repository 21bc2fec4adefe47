//! `netblast doctor`: what this host supports for netblast, one line per fact: privilege, BTF,
//! cgroup v2, whether the eBPF probe was built in and loads, CPUs, the descriptor limit, the
//! kernel.

use netblast_probe::{Probe, ProbeMode};

/// What this host supports, one line per fact (`netblast doctor`).
pub fn doctor() -> String {
    use netblast_probe::ebpf;
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<22} {v}\n"));
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    line(
        "privilege",
        if euid == 0 { "root".into() } else { format!("uid {euid} (eBPF needs root: CAP_BPF, CAP_NET_ADMIN)") },
    );
    line(
        "BTF",
        if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            "/sys/kernel/btf/vmlinux".into()
        } else {
            "missing".into()
        },
    );
    line("cgroup v2", ebpf::cgroup2_root().map(|p| p.display().to_string()).unwrap_or_else(|| "not mounted".into()));
    line(
        "eBPF probe built in",
        if ebpf::built_in() { "yes (clang at build time)".into() } else { format!("no ({})", ebpf::BUILD) },
    );
    let probe = match Probe::open(ProbeMode::Ebpf) {
        Ok(p) => {
            format!("loads and attaches to {}", p.ebpf().map(|e| e.cgroup().display().to_string()).unwrap_or_default())
        }
        Err(e) => format!("unavailable: {e}; runs use TCP_INFO"),
    };
    line("eBPF probe", probe);
    let cpus = crate::os::sys::allowed_cpus().unwrap_or_default();
    line(
        "CPUs",
        format!(
            "{} online, {} usable ({})",
            crate::os::sys::cpus_online(),
            cpus.len(),
            netblast_spec::units::CpuList(cpus)
        ),
    );
    let (soft, hard) = crate::os::sys::nofile_limit();
    line("open files limit", format!("{soft} (hard {hard}): about {} bulk flows", soft.saturating_sub(64)));
    line("kernel", crate::os::sys::host_info().kernel);
    out
}
