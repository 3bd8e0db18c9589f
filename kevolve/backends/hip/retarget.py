"""Rewriting an AMD code object for a processor with the same instruction set: LLVM 15
(Debian's hipcc 5.2) compiles for gfx940 but does not know gfx942 (MI300X)."""

from __future__ import annotations

import struct

_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_EF_AMDGPU_MACH = 0xFF
_MACH = {"gfx90a": 0x3F, "gfx940": 0x40, "gfx941": 0x4B, "gfx942": 0x4C}


def retarget_code_object(data: bytes, src: str, dst: str) -> bytes:
    """Rewrite a clang offload bundle (or a bare AMDGPU ELF) compiled for `src` so that it
    declares `dst`: the ELF header's EF_AMDGPU_MACH field and every target-id string
    (`amdgcn-amd-amdhsa--gfx940`, same length) change; the machine code does not. Sound only
    between processors with the same instruction set (gfx940 and gfx942: LLVM later folds
    both into its gfx9-4-generic target). Raises ValueError when the input is not what it
    expects, rather than writing a half-patched object."""
    if len(src) != len(dst):
        raise ValueError("target names must have the same length")
    if data.startswith(_BUNDLE_MAGIC):
        return _retarget_bundle(data, src, dst)
    return _retarget_elf(data, src, dst)


def _retarget_elf(elf: bytes, src: str, dst: str) -> bytes:
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[18] != 224:  # ELF64, EM_AMDGPU
        raise ValueError("not an AMDGPU ELF64 code object")
    flags = struct.unpack_from("<I", elf, 48)[0]
    if flags & _EF_AMDGPU_MACH != _MACH[src]:
        raise ValueError(f"code object is for machine {flags & _EF_AMDGPU_MACH:#x}, "
                         f"not {src} ({_MACH[src]:#x})")
    out = bytearray(elf)
    struct.pack_into("<I", out, 48, (flags & ~_EF_AMDGPU_MACH) | _MACH[dst])
    old, new = f"amdgcn-amd-amdhsa--{src}".encode(), f"amdgcn-amd-amdhsa--{dst}".encode()
    if old not in out:
        raise ValueError(f"no target id {old.decode()!r} in the code object")
    return bytes(out).replace(old, new)


def _retarget_bundle(data: bytes, src: str, dst: str) -> bytes:
    n = struct.unpack_from("<Q", data, 24)[0]
    pos = 32
    entries = []
    for _ in range(n):
        off, size, idlen = struct.unpack_from("<QQQ", data, pos)
        pos += 24
        tid = data[pos:pos + idlen].decode()
        pos += idlen
        entries.append((tid, off, size))
    out = bytearray(data)
    hit = False
    for tid, off, size in entries:
        if tid.endswith(f"--{src}"):
            out[off:off + size] = _retarget_elf(data[off:off + size], src, dst)
            hit = True
    if not hit:
        raise ValueError(f"no {src} entry in the offload bundle")
    # Entry ids are in the header; same length, so offsets stay valid.
    old, new = f"amdhsa--{src}".encode(), f"amdhsa--{dst}".encode()
    head = bytes(out[:pos]).replace(old, new)
    return head + bytes(out[pos:])
