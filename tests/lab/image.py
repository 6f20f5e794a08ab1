"""Builds and caches what the Soft-RoCE lab boots: a Debian root file system per release, and the
pure-Python site directory that the guests share over 9p.

    python -m tests.lab.image [--release bookworm --release trixie] [--site] [--force]

Layout under the cache dir (``$RDMADOCTOR_LAB_CACHE``, else ``$XDG_CACHE_HOME/rdmadoctor/lab``, else
``~/.cache/rdmadoctor/lab``)::

    images/<release>-<key>/{vmlinuz,initrd.img,rootfs.img,manifest.json,packages.txt,build.log}
    site/<key>/{lib/...,manifest.json}
    locks/<name>.lock

``<key>`` is a hash of every input of the build (release, package list, init script, user setup,
recipe version), so changing any of them builds a new entry; an entry is only ever created by
renaming a finished temporary directory (atomic), under an ``flock`` so that concurrent builders
(two pytest sessions, a recorder and a test run) wait for each other instead of colliding.

The root file system is made with ``debootstrap --variant=minbase`` and turned into an ext4 image with
``mkfs.ext4 -d`` (no loop mounts, no root-only mount tricks beyond debootstrap's own chroot).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# Bump when the build steps below change in a way that the other inputs do not capture.
RECIPE_VERSION = "2"

RELEASES = {
    # release: (kernel, perftest) as shipped by Debian, for the docs; the build takes what the archive has.
    "bookworm": ("6.1", "4.5"),
    "trixie": ("6.12", "25.01"),
}

PACKAGES = [
    "linux-image-amd64",
    "rdma-core", "ibverbs-utils", "ibverbs-providers", "perftest", "rdmacm-utils", "infiniband-diags",
    "python3", "python3-pyverbs", "python3-psutil", "python3-markupsafe", "python3-jsonschema",
    "iproute2", "kmod", "udev", "procps", "iputils-ping", "nftables", "iptables", "util-linux",
    "ethtool", "pciutils",
    # the other RDMA programs the lab records (tests/lab/producers.py): UCX's ucx_perftest, libfabric's
    # fi_pingpong (Debian ships no fabtests, so no fi_rdm_pingpong), Open MPI (pml ucx) with mpi4py for a
    # ping-pong program, and ssh between the guests for mpirun
    "ucx-utils", "libfabric-bin", "openmpi-bin", "python3-mpi4py", "openssh-server", "openssh-client",
]

# Pure-Python dependencies of rdmadoctor, installed on the host into one site dir that both guest
# Pythons (bookworm 3.11, trixie 3.13) import from. Compiled ones (psutil, markupsafe, pyverbs) come
# from the guest's Debian packages (jsonschema too: from 4.18 on it needs the compiled rpds-py).
# typer is held below 0.29, which started to require pydantic
# (compiled pydantic-core); 0.28 carries its own click, the separate click is for code that imports it.
SITE_REQUIREMENTS = [
    "typer==0.28.0",
    "annotated-doc==0.0.7",
    "click==8.5.1",
    "rich==15.0.0",
    "markdown-it-py==4.3.0",
    "mdurl==0.1.2",
    "pygments==2.21.0",
    "shellingham==1.5.4",
    "typing-extensions==4.16.0",
    "pyroute2==0.9.7",
    "jinja2==3.1.6",
]

LAB_USER = "lab"
LAB_USER_UID = 1000
IMAGE_SIZE = "2G"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEBOOTSTRAP_TIMEOUT = 1800
PIP_TIMEOUT = 600


class BuildError(RuntimeError):
    pass


def cache_dir() -> Path:
    if os.environ.get("RDMADOCTOR_LAB_CACHE"):
        return Path(os.environ["RDMADOCTOR_LAB_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rdmadoctor" / "lab"


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def init_script() -> str:
    return (HERE / "guest_init.sh").read_text()


def image_inputs(release: str) -> Dict:
    return {"recipe": RECIPE_VERSION, "release": release, "packages": sorted(PACKAGES),
            "init": init_script(), "user": [LAB_USER, LAB_USER_UID], "size": IMAGE_SIZE,
            "variant": "minbase"}


def image_key(release: str) -> str:
    return _hash(image_inputs(release))


def site_key() -> str:
    return _hash({"recipe": RECIPE_VERSION, "requirements": SITE_REQUIREMENTS})


@dataclass
class Image:
    release: str
    path: Path

    @property
    def kernel(self) -> Path:
        return self.path / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.path / "initrd.img"

    @property
    def rootfs(self) -> Path:
        return self.path / "rootfs.img"

    @property
    def manifest(self) -> Dict:
        return json.loads((self.path / "manifest.json").read_text())


@contextlib.contextmanager
def _locked(name: str):
    locks = cache_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / (name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _log(message: str) -> None:
    print("[lab-image] " + message, file=sys.stderr, flush=True)


def require_tools(names: Iterable[str]) -> None:
    missing = [n for n in names if not shutil.which(n)]
    if missing:
        raise BuildError(
            "the Soft-RoCE lab needs %s on the host; install with: apt-get install -y qemu-system-x86 "
            "debootstrap e2fsprogs" % ", ".join(missing))


def _mounted_under(path: Path) -> List[str]:
    prefix = str(path.resolve()) + "/"
    with open("/proc/mounts") as f:
        return [line.split()[1] for line in f if (line.split()[1] + "/").startswith(prefix)]


def _remove_tree(path: Path) -> None:
    if not path.exists():
        return
    mounts = _mounted_under(path)
    for mount in sorted(mounts, reverse=True):  # left behind by an interrupted debootstrap
        subprocess.run(["umount", "-l", mount], check=False)
    if _mounted_under(path):
        raise BuildError("refusing to delete %s: still has mounts" % path)
    shutil.rmtree(path)


def _run(argv: List[str], log, timeout: int, **kwargs) -> None:
    log.write(("$ " + " ".join(argv) + "\n").encode())
    log.flush()
    try:
        proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        raise BuildError("%s timed out after %d s" % (argv[0], timeout))
    if proc.returncode:
        raise BuildError("%s failed with exit %d (log: %s)" % (" ".join(argv[:3]), proc.returncode, log.name))


def _build_image(release: str, dest: Path) -> None:
    mirror = os.environ.get("RDMADOCTOR_LAB_MIRROR", DEFAULT_MIRROR)
    work = Path(tempfile.mkdtemp(prefix="tmp-%s-" % release, dir=dest.parent))
    root = work / "root"
    started = time.monotonic()
    try:
        with open(work / "build.log", "wb") as log:
            _run(["debootstrap", "--variant=minbase", "--components=main",
                  "--include=" + ",".join(PACKAGES), release, str(root), mirror],
                 log, DEBOOTSTRAP_TIMEOUT)
            bootstrap_seconds = time.monotonic() - started
            (root / "lab-init").write_text(init_script())
            os.chmod(root / "lab-init", 0o755)
            (root / "etc/hostname").write_text("lab\n")
            (root / "etc/hosts").write_text("127.0.0.1 localhost\n192.0.2.1 h1\n192.0.2.2 h2\n")
            (root / "etc/fstab").write_text("# the lab's init mounts what it needs\n")
            _run(["chroot", str(root), "useradd", "--create-home", "--shell", "/bin/bash",
                  "--uid", str(LAB_USER_UID), "--user-group", LAB_USER], log, 120)
            query = subprocess.run(["chroot", str(root), "dpkg-query", "-W", "-f", "${Package}\t${Version}\n"],
                                   capture_output=True, text=True, timeout=120, check=True).stdout
            (work / "packages.txt").write_text(query)
            versions = dict(line.split("\t", 1) for line in query.splitlines() if "\t" in line)
            for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for entry in (root / junk).glob("*"):
                    if entry.is_file():
                        entry.unlink()
            boot = root / "boot"
            kernels = sorted(boot.glob("vmlinuz-*"))
            initrds = sorted(boot.glob("initrd.img-*"))
            if not kernels or not initrds:
                raise BuildError("no kernel/initrd in %s" % boot)
            shutil.copyfile(kernels[-1], work / "vmlinuz")
            shutil.copyfile(initrds[-1], work / "initrd.img")
            _run(["mkfs.ext4", "-q", "-F", "-L", "labroot", "-d", str(root), str(work / "rootfs.img"), IMAGE_SIZE],
                 log, 900)
        manifest = {
            "release": release, "key": dest.name.split("-", 1)[1], "inputs": image_inputs(release),
            "kernel": kernels[-1].name[len("vmlinuz-"):],
            "versions": {name: versions.get(name) for name in
                         ("perftest", "rdma-core", "ibverbs-providers", "python3", "python3-pyverbs",
                          "linux-image-amd64", "iproute2", "nftables", "ucx-utils", "libfabric-bin",
                          "openmpi-bin", "python3-mpi4py", "openssh-server")},
            "mirror": mirror, "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "seconds": {"debootstrap": round(bootstrap_seconds, 1),
                        "total": round(time.monotonic() - started, 1)},
        }
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        _remove_tree(root)
        os.rename(work, dest)
    except BaseException:
        try:
            log_copy = dest.parent / ("failed-%s-build.log" % release)
            if (work / "build.log").exists():
                shutil.copyfile(work / "build.log", log_copy)
        finally:
            _remove_tree(work)
        raise


def ensure_image(release: str, force: bool = False) -> Image:
    """The cached image for ``release``, building it first if needed (blocks while another process builds)."""
    if release not in RELEASES:
        raise BuildError("unknown release %r (known: %s)" % (release, ", ".join(RELEASES)))
    images = cache_dir() / "images"
    images.mkdir(parents=True, exist_ok=True)
    dest = images / ("%s-%s" % (release, image_key(release)))
    with _locked("image-" + release):
        if force and dest.exists():
            _remove_tree(dest)
        if not (dest / "manifest.json").exists():
            require_tools(["debootstrap", "mkfs.ext4", "chroot"])
            if os.geteuid() != 0:
                raise BuildError("building the lab image needs root (debootstrap)")
            _log("building %s root file system into %s (debootstrap, takes a few minutes)" % (release, dest))
            started = time.monotonic()
            _build_image(release, dest)
            _log("built %s in %.0f s" % (release, time.monotonic() - started))
            _prune(images, release, keep=dest.name)
    return Image(release, dest)


def _prune(images: Path, release: str, keep: str) -> None:
    """Old entries of the same release (other keys) are useless once a new one exists."""
    for entry in images.glob(release + "-*"):
        if entry.name != keep and entry.is_dir() and not entry.name.startswith("tmp-"):
            _remove_tree(entry)


def ensure_images(releases: Iterable[str], force: bool = False) -> Dict[str, Image]:
    """Builds the missing images concurrently (debootstrap is mostly network and dpkg, so two overlap well)."""
    releases = list(dict.fromkeys(releases))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(releases))) as pool:
        futures = {r: pool.submit(ensure_image, r, force) for r in releases}
        return {r: f.result() for r, f in futures.items()}


def ensure_site(force: bool = False) -> Path:
    """The host-built site dir of pure-Python packages shared into every guest as /lab/site."""
    root = cache_dir() / "site"
    root.mkdir(parents=True, exist_ok=True)
    dest = root / site_key()
    with _locked("site"):
        if force and dest.exists():
            shutil.rmtree(dest)
        if not (dest / "manifest.json").exists():
            work = Path(tempfile.mkdtemp(prefix="tmp-", dir=root))
            try:
                _log("installing the guests' pure-Python packages into %s" % dest)
                proc = subprocess.run(
                    [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                     "--no-deps", "--only-binary=:all:", "--no-compile", "--target", str(work / "lib")]
                    + SITE_REQUIREMENTS, capture_output=True, text=True, timeout=PIP_TIMEOUT)
                if proc.returncode:
                    raise BuildError("pip install for the lab site failed:\n" + proc.stdout + proc.stderr)
                compiled = [str(p) for p in (work / "lib").rglob("*.so")]
                if compiled:
                    raise BuildError("the lab site must be pure Python, found %s" % compiled)
                (work / "manifest.json").write_text(json.dumps(
                    {"requirements": SITE_REQUIREMENTS, "built": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
                    indent=2) + "\n")
                os.rename(work, dest)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
            for entry in root.iterdir():
                if entry.is_dir() and entry != dest and not entry.name.startswith("tmp-"):
                    shutil.rmtree(entry, ignore_errors=True)
    return dest / "lib"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lab.image", description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", action="append", choices=sorted(RELEASES),
                        help="release to build (repeatable; default: all)")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = parser.parse_args(argv)
    started = time.monotonic()
    site = ensure_site(force=args.force)
    print("site   %s" % site)
    for release, image in ensure_images(args.release or sorted(RELEASES), force=args.force).items():
        m = image.manifest
        print("%-8s %s  kernel %s  perftest %s  rdma-core %s" % (release, image.path, m["kernel"],
              m["versions"]["perftest"], m["versions"]["rdma-core"]))
    print("done in %.0f s" % (time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
