//! Embeds every `configs/*.toml` profile of the workspace into the library, so that
//! `netblast profiles` lists them and `--profile NAME` finds them without any file on disk.
use std::{env, fs, path::PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let configs = manifest.join("../../configs");
    println!("cargo:rerun-if-changed={}", configs.display());
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    if let Ok(dir) = fs::read_dir(&configs) {
        for entry in dir.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("toml") {
                continue;
            }
            println!("cargo:rerun-if-changed={}", path.display());
            let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
            let abs = fs::canonicalize(&path).unwrap_or(path);
            entries.push((name, abs));
        }
    }
    entries.sort();
    let mut out = String::from(
        "/// Profiles embedded from `configs/*.toml` at build time: (name, TOML text).\npub static EMBEDDED: &[(&str, &str)] = &[\n",
    );
    for (name, path) in entries {
        out.push_str(&format!("    ({name:?}, include_str!({:?})),\n", path.display().to_string()));
    }
    out.push_str("];\n");
    let dest = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("embedded_profiles.rs");
    fs::write(dest, out).expect("write embedded_profiles.rs");
}
