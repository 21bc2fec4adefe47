//! Compiles the eBPF programs in `ebpf/` with clang, for embedding into the probe.
//!
//! Without clang (or with `NETBLAST_NO_BPF=1`) the build still succeeds: it warns and writes an
//! empty object, and at run time the probe reports that it was built without eBPF and uses
//! `TCP_INFO`.
use std::{env, fs, path::PathBuf, process::Command};

/// The kernel programs and the headers they include.
const SOURCES: &[&str] = &["netblast.bpf.c"];
const HEADERS: &[&str] = &["netblast.h"];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let ebpf = manifest.join("../../ebpf");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for f in SOURCES.iter().chain(HEADERS) {
        println!("cargo:rerun-if-changed={}", ebpf.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=NETBLAST_NO_BPF");
    println!("cargo:rerun-if-env-changed=CLANG");
    let object = out.join("netblast.bpf.o");
    let outcome = if env::var("NETBLAST_NO_BPF").is_ok_and(|v| v == "1") {
        Err("NETBLAST_NO_BPF=1".to_string())
    } else {
        compile(&ebpf, &object)
    };
    match outcome {
        Ok(()) => println!("cargo:rustc-env=NETBLAST_BPF_BUILD=clang"),
        Err(why) => {
            println!("cargo:warning=netblast-probe: eBPF programs not built ({why}); the probe will use TCP_INFO");
            fs::write(&object, b"").expect("write empty eBPF object");
            println!("cargo:rustc-env=NETBLAST_BPF_BUILD=not built: {why}");
            // Build again once clang is installed: a tool added to a directory on PATH changes
            // that directory, which cargo watches (only existing directories: a missing path
            // would rerun this script on every build).
            println!("cargo:rerun-if-env-changed=PATH");
            for dir in env::split_paths(&env::var_os("PATH").unwrap_or_default()) {
                if dir.is_dir() {
                    println!("cargo:rerun-if-changed={}", dir.display());
                }
            }
        }
    }
}

fn compile(ebpf: &std::path::Path, object: &std::path::Path) -> Result<(), String> {
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let (target_arch, multiarch) = match arch.as_str() {
        "x86_64" => ("x86", "x86_64-linux-gnu"),
        "aarch64" => ("arm64", "aarch64-linux-gnu"),
        "riscv64" => ("riscv", "riscv64-linux-gnu"),
        "powerpc64" => ("powerpc", "powerpc64le-linux-gnu"),
        "s390x" => ("s390", "s390x-linux-gnu"),
        other => return Err(format!("no eBPF build for target architecture {other}")),
    };
    let endian = if env::var("CARGO_CFG_TARGET_ENDIAN").as_deref() == Ok("big") { "bpfeb" } else { "bpfel" };
    let status = Command::new(&clang)
        .args(["-g", "-O2", "-target", endian, &format!("-D__TARGET_ARCH_{target_arch}")])
        .arg(format!("-I/usr/include/{multiarch}"))
        .arg(format!("-I{}", ebpf.display()))
        .args(["-c", &ebpf.join(SOURCES[0]).display().to_string(), "-o", &object.display().to_string()])
        .status()
        .map_err(|e| format!("cannot run {clang}: {e}"))?;
    if !status.success() {
        return Err(format!("{clang} failed ({status}); are libbpf-dev and the kernel headers installed?"));
    }
    Ok(())
}
