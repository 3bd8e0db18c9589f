"""The compilers behind the backends: where builds are cached, finding a tool, its version
(what a result is recorded under, and part of cache file names: another compiler, other
machine code), running it, and writing build outputs atomically (workers share the cache).

The cache is sealed: every build output is written with a `.seal` beside it, an HMAC of its
bytes and name under a per-user key (`~/.config/kevolve/cache.key`, 0600, created on first
use), and is loaded only while its seal verifies. A library or module planted in the cache
by anyone who cannot read that key (another user of a shared cache folder, a copied cache)
is not loaded: it is rebuilt from source over the planted file."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
from functools import lru_cache
from pathlib import Path

from ..errors import CompileError  # noqa: F401  (raised by run_tool; defined once)


def cache_dir() -> Path:
    """Where builds are cached: $KEVOLVE_CACHE or ~/.cache/kevolve (read once, at the edge)."""
    root = os.environ.get("KEVOLVE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "kevolve")
    p = Path(root)
    p.mkdir(parents=True, exist_ok=True)
    return p


def _key_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "kevolve" / "cache.key"


@lru_cache(maxsize=1)
def cache_key() -> bytes:
    """This user's cache key: 32 random bytes in a file only they can read (created once;
    concurrent first uses agree through an atomic link)."""
    path = _key_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
        try:
            os.link(tmp, path)  # fails if another process made it first: theirs stands
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"kevolve's cache key {path} must belong to you and be "
                              "readable by you alone (chmod 600)")
    key = path.read_bytes()
    if len(key) < 32:
        raise PermissionError(f"kevolve's cache key {path} is truncated: delete it")
    return key


def _mac(path: Path) -> str:
    import hmac
    return hmac.new(cache_key(), path.name.encode() + b"\0" + path.read_bytes(),
                    hashlib.sha256).hexdigest()


def _seal_path(path: Path) -> Path:
    return path.with_name(path.name + ".seal")


def seal(tmp: Path, path: Path) -> None:
    """Move a finished build output `tmp` into place at `path`, sealed (its HMAC under the
    user's key written beside it first)."""
    import hmac
    mac = hmac.new(cache_key(), path.name.encode() + b"\0" + tmp.read_bytes(),
                   hashlib.sha256).hexdigest()
    atomic_write(_seal_path(path), mac)
    tmp.replace(path)


def sealed(path: Path) -> bool:
    """True when `path` exists and its seal verifies: it is this user's own build."""
    import hmac
    try:
        want = _seal_path(path).read_text().strip()
        return hmac.compare_digest(want, _mac(path))
    except OSError:
        return False


def find_tool(name: str, given: str | None = None) -> str | None:
    """The path of tool `name` on PATH, or of `given` (a path or name) where one is given."""
    if given:
        return given if shutil.which(given) else None
    return shutil.which(name)


def run_tool(cmd: list[str], env: dict | None = None, tail: int = 6000,
             name_command: bool = True) -> str:
    """Run a compiler: its stdout and stderr when it succeeds; CompileError with the last
    `tail` characters of its message (headed by the command when `name_command`) when not."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        if not name_command:
            raise CompileError(r.stderr[-tail:])
        raise CompileError(f"{' '.join(cmd[:2])} ... failed:\n" + (r.stderr or r.stdout)[-tail:])
    return r.stdout + r.stderr


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write `path` through a temporary file and a rename: readers see all of it or none."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    if isinstance(data, str):
        tmp.write_text(data)
    else:
        tmp.write_bytes(data)
    tmp.replace(path)


@lru_cache(maxsize=16)
def tool_version(path: str, hip_platform: str | None = None) -> str:
    """A compiler's version as `--version` prints it: `13.0.88` for nvcc (its `V...`), else
    the lines naming a version (hipcc: HIP's and clang's). `hip_platform` is hipcc's
    HIP_PLATFORM, which decides what it wraps. Part of the toolchain a result is recorded
    under, and of the build cache's file names: another compiler, other code."""
    env = dict(os.environ, HIP_PLATFORM=hip_platform) if hip_platform else None
    try:
        text = subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=60, env=env).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({type(e).__name__})"
    m = re.search(r"release \S+, V(\d+(?:\.\d+)+)", text)
    if m:
        return m.group(1)
    lines = [ln.strip() for ln in text.splitlines() if "version" in ln.lower()]
    return "; ".join(lines)[:200] or "unknown"


def version_tag(path: str, hip_platform: str | None = None) -> str:
    """Eight hex digits of `tool_version`, for cache file names."""
    return hashlib.sha256(tool_version(path, hip_platform).encode()).hexdigest()[:8]


@lru_cache(maxsize=1)
def cc_version() -> dict:
    """`{"cc": first line of cc --version}` (empty where `cc` does not run): the C compiler
    in the toolchain of the backends that build with the system compiler."""
    try:
        r = subprocess.run(["cc", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"cc": r.stdout.splitlines()[0] if r.stdout else ""}


def c_compile_log(cc: str, source) -> tuple[bool, str]:
    """Compile a C KernelSource again in a scratch folder (the build cache would skip a source
    it has seen) and return (ok, the command and the compiler's messages)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kevolve-replay-") as d:
        c = os.path.join(d, "kernel.c")
        with open(c, "w") as f:
            f.write(source.text)
        cmd = [cc, *source.flags, "-fdiagnostics-color=never", "-c", c, "-o",
               os.path.join(d, "kernel.o")]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            return False, f"could not run the compiler: {e}"
        text = (r.stdout + r.stderr).replace(d + os.sep, "")
        head = "$ " + " ".join(os.path.basename(x) if x.startswith(d) else x for x in cmd)
        return r.returncode == 0, head + "\n" + (text.strip() or "(no messages)")
