#!/usr/bin/env python3
"""Builds netblast's container image with no registry and no Docker: the release binary, the
shared libraries `ldd` names for it, /etc/passwd with the `nonroot` user (65532) the manifests run
as, and /tmp, in one layer, written as a docker archive (the format of `docker save`) that
`ctr images import`, `podman load` and `docker load` all accept. The same tool builds the pod
sandbox image a kubelet needs (`pause`: a static program that waits), which these machines cannot
pull either.

    scripts/image.py netblast [--binary target/release/netblast] [--out target/image/netblast.tar]
    scripts/image.py pause --out target/image/pause.tar

The netblast image is tagged `netblast:VERSION-REV` (the workspace version and the source
revision, both also in its OCI labels); the tag is printed on stdout. Every file's time is the
source revision's commit time, so the same binary gives the same archive byte for byte.
deploy/Dockerfile builds the same layout from a Debian base for users with Docker and a registry.
"""

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAUSE_TAG = "netblast.local/pause:3.10"

PAUSE_C = r"""
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
    signal(SIGINT, quit);
    signal(SIGTERM, quit);
    signal(SIGCHLD, reap);
    for (;;) pause();
}
"""


def die(msg):
    print(f"image.py: {msg}", file=sys.stderr)
    sys.exit(1)


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout.strip()


def workspace_version():
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m:
        die("no version in Cargo.toml")
    return m.group(1)


def libraries(binary):
    """The files the dynamic loader maps for `binary`, as (path in the image, path here)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if out.returncode != 0:
        if "not a dynamic executable" in out.stdout + out.stderr:
            return []
        die(f"ldd {binary}: {out.stderr.strip()}")
    libs = []
    for line in out.stdout.splitlines():
        line = line.strip()
        if "=> not found" in line:
            die(f"ldd {binary}: {line}")
        m = re.match(r"(\S+) => (/\S+)", line) or re.match(r"(/\S+)", line)
        if not m:
            continue  # linux-vdso.so.1: the kernel's
        path = m.group(m.lastindex)
        # Where the loader looks (the path ldd printed, e.g. /lib64/ld-linux-x86-64.so.2), with the
        # content of the file it names (usr-merged: /lib is a link here, not in the image).
        libs.append((path, os.path.realpath(path)))
    return libs


class Layer:
    """One uncompressed layer tar, with every entry owned by root at one fixed time."""

    def __init__(self, mtime):
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT)
        self.mtime = mtime
        self.dirs = set()

    def _info(self, name, kind, mode):
        ti = tarfile.TarInfo(name.lstrip("/"))
        ti.type, ti.mode, ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = kind, mode, self.mtime, 0, 0, "", ""
        return ti

    def dir(self, path, mode=0o755):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d and d not in self.dirs:
                self.dirs.add(d)
                self.tar.addfile(self._info(d, tarfile.DIRTYPE, mode if i == len(parts) else 0o755))

    def file(self, path, data, mode=0o644):
        self.dir(os.path.dirname(path))
        ti = self._info(path, tarfile.REGTYPE, mode)
        ti.size = len(data)
        self.tar.addfile(ti, io.BytesIO(data))

    def close(self):
        self.tar.close()
        return self.buf.getvalue()


def archive(out, tag, layer, entrypoint, labels, user):
    """Writes a docker archive of one image: manifest.json, the config, the layer (uncompressed:
    every loader takes it, and its digest is its diff id)."""
    diff = hashlib.sha256(layer).hexdigest()
    created = labels.get("org.opencontainers.image.created", "1970-01-01T00:00:00Z")
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "Entrypoint": entrypoint,
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
            "Labels": labels,
            "User": user,
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff}"]},
        "history": [{"created": created, "created_by": "scripts/image.py"}],
    }
    cfg = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
    manifest = [{"Config": cfg_name, "RepoTags": [tag], "Layers": [f"{diff}/layer.tar"]}]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".part"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as t:
        for name, data in [
            (f"{diff}/layer.tar", layer),
            (cfg_name, cfg),
            ("manifest.json", json.dumps(manifest, separators=(",", ":")).encode()),
            ("repositories", json.dumps({tag.rsplit(":", 1)[0]: {tag.rsplit(":", 1)[1]: diff}}).encode()),
        ]:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.mode = len(data), 0, 0o644
            t.addfile(ti, io.BytesIO(data))
    os.replace(tmp, out)
    return f"sha256:{hashlib.sha256(cfg).hexdigest()}"


def build_netblast(args):
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        die(f"{binary} is not a built binary (cargo build --release -p netblast)")
    rev = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no") != ""
    version = workspace_version()
    tag = args.tag or f"netblast:{version}-{rev[:7]}{'-dirty' if dirty else ''}"
    when = int(git("log", "-1", "--format=%ct"))
    layer = Layer(when)
    with tempfile.TemporaryDirectory() as tmp:
        stripped = os.path.join(tmp, "netblast")
        shutil.copy(binary, stripped)
        if shutil.which("strip"):
            subprocess.run(["strip", "--strip-debug", stripped], check=True)
        with open(stripped, "rb") as f:
            layer.file("/usr/local/bin/netblast", f.read(), 0o755)
    for want, have in libraries(binary):
        with open(have, "rb") as f:
            layer.file(want, f.read(), 0o755)
    layer.file("/etc/passwd", b"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
    layer.file("/etc/group", b"root:x:0:\nnonroot:x:65532:\n")
    layer.file("/etc/nsswitch.conf", b"hosts: files dns\n")
    layer.dir("/tmp", 0o1777)
    layer.dir("/home/nonroot", 0o755)
    layer.dir("/var/lib/netblast", 0o755)
    labels = {
        "org.opencontainers.image.title": "netblast",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.revision": rev + ("-dirty" if dirty else ""),
        "org.opencontainers.image.source": "https://github.com/netblast/netblast",
        "org.opencontainers.image.created": git("log", "-1", "--format=%cI"),
    }
    ident = archive(args.out, tag, layer.close(), ["/usr/local/bin/netblast"], labels, "")
    print(tag)
    print(f"image.py: {args.out}: {tag} ({ident})", file=sys.stderr)


def build_pause(args):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        die("no C compiler to build the pause program (apt-get install gcc)")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "pause.c"), os.path.join(tmp, "pause")
        with open(src, "w") as f:
            f.write(PAUSE_C)
        out = subprocess.run([cc, "-static", "-Os", "-s", "-o", exe, src], capture_output=True, text=True)
        if out.returncode != 0:
            die(f"{cc} -static pause.c (static libc: libc6-dev): {out.stderr.strip()}")
        layer = Layer(0)
        with open(exe, "rb") as f:
            layer.file("/pause", f.read(), 0o755)
    tag = args.tag or PAUSE_TAG
    archive(args.out, tag, layer.close(), ["/pause"], {"org.opencontainers.image.title": "pause"}, "65535:65535")
    print(tag)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("image", choices=["netblast", "pause"])
    p.add_argument("--binary", default=os.path.join(ROOT, "target/release/netblast"))
    p.add_argument("--out", help="the archive to write (default target/image/IMAGE.tar)")
    p.add_argument("--tag", help="the image's name and tag (default netblast:VERSION-REV, or " + PAUSE_TAG + ")")
    args = p.parse_args()
    args.out = args.out or os.path.join(ROOT, "target/image", args.image + ".tar")
    (build_netblast if args.image == "netblast" else build_pause)(args)


if __name__ == "__main__":
    main()
