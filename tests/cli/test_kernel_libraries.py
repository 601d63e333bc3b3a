"""Every built zip carries the compiled kernels its platforms need, and nothing else.

Each zip in dist/ is opened and each kernel library in it is read from its bytes (standard
library only): its format and architecture from its header (ELF x86-64, PE32+ x86-64, Mach-O
arm64 and x86-64), and the names it exports from its dynamic symbol table (ELF), its export
directory (PE) or its export trie (Mach-O). Every ``SINEW_API`` function of
core/kernels/src/sinew_kernels.h must be exported. A platform's zip carries exactly its own
library; the legacy zip carries those of every platform zip built with it (all four in a full
``python3 build.py test`` or ``build``; ``test --fast`` builds the linux-x64 zip only).
"""

from __future__ import annotations

import re
import struct
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

HEADER = ROOT / "core" / "kernels" / "src" / "sinew_kernels.h"
DIST = ROOT / "dist"
LIB_DIR = "core/kernels/lib/"
OBJECT_SUFFIXES = (".o", ".obj", ".a", ".lib", ".exp", ".pdb", ".ilk", ".stamp", ".tmp")

# platform (as the zips name it): (library file, format, architecture)
PLATFORMS = {
    "linux_x64": ("sinew_kernels-linux_x64.so", "elf", "x86-64"),
    "windows_x64": ("sinew_kernels-windows_x64.dll", "pe", "x86-64"),
    "macos_arm64": ("sinew_kernels-macos_arm64.dylib", "macho", "arm64"),
    "macos_x64": ("sinew_kernels-macos_x64.dylib", "macho", "x86-64"),
}


def entry_points() -> set[str]:
    """The names of the functions marked SINEW_API in the kernels' header."""
    text = re.sub(r"/\*.*?\*/", " ", HEADER.read_text(), flags=re.S)
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)
    names = set(re.findall(r"\bSINEW_API\b[^;{(]*?\b([A-Za-z_]\w*)\s*\(", text))
    assert names, f"no SINEW_API functions found in {HEADER}"
    return names


# --------------------------------------------------------------------------- ELF


def read_elf(data: bytes) -> dict:
    assert data[:4] == b"\x7fELF", "not an ELF file"
    assert data[4] == 2 and data[5] == 1, "not a 64-bit little-endian ELF file"
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, _e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = []
    for i in range(e_shnum):
        # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info, sh_addralign, sh_entsize
        sections.append(struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize))
    exported: set[str] = set()
    needed_versions: set[str] = set()
    for sec in sections:
        sh_type, sh_offset, sh_size, sh_link, sh_entsize = sec[1], sec[4], sec[5], sec[6], sec[9]
        strtab = sections[sh_link]
        str_off = strtab[4]

        def name_at(i: int, str_off: int = str_off) -> str:
            return data[str_off + i:data.index(b"\0", str_off + i)].decode()

        if sh_type == 11:  # SHT_DYNSYM
            for k in range(sh_size // sh_entsize):
                st_name, st_info, st_other, st_shndx = struct.unpack_from("<IBBH", data, sh_offset + k * sh_entsize)
                bind, kind, visibility = st_info >> 4, st_info & 0xF, st_other & 3
                if st_shndx != 0 and bind in (1, 2) and kind == 2 and visibility == 0:  # defined global function
                    exported.add(name_at(st_name))
        elif sh_type == 0x6FFFFFFE:  # SHT_GNU_verneed: the symbol versions needed from libc
            off = sh_offset
            while True:
                _vn_version, vn_cnt, _vn_file, vn_aux, vn_next = struct.unpack_from("<HHIII", data, off)
                aux = off + vn_aux
                for _ in range(vn_cnt):
                    _hash, _flags, _other, vna_name, vna_next = struct.unpack_from("<IHHII", data, aux)
                    needed_versions.add(name_at(vna_name))
                    aux += vna_next
                if not vn_next:
                    break
                off += vn_next
    return {"format": "elf", "arch": {62: "x86-64", 183: "arm64"}.get(e_machine, hex(e_machine)),
            "shared": e_type == 3, "exports": exported, "versions": needed_versions}


# --------------------------------------------------------------------------- PE


def read_pe(data: bytes) -> dict:
    assert data[:2] == b"MZ", "not a PE file"
    pe, = struct.unpack_from("<I", data, 0x3C)
    assert data[pe:pe + 4] == b"PE\0\0", "no PE signature"
    machine, nsections, _time, _symtab, _nsyms, opt_size, characteristics = struct.unpack_from("<HHIIIHH", data, pe + 4)
    opt = pe + 24
    magic, = struct.unpack_from("<H", data, opt)
    assert magic == 0x20B, f"optional header magic {magic:#x}, not PE32+"
    export_rva, export_size = struct.unpack_from("<II", data, opt + 112)  # data directory 0 (PE32+)
    sections = [struct.unpack_from("<8sIIII", data, opt + opt_size + 40 * i) for i in range(nsections)]

    def offset(rva: int) -> int:
        for _name, vsize, vaddr, raw_size, raw_ptr in sections:
            if vaddr <= rva < vaddr + max(vsize, raw_size):
                return raw_ptr + rva - vaddr
        raise AssertionError(f"RVA {rva:#x} is in no section")

    def cstring(rva: int) -> str:
        at = offset(rva)
        return data[at:data.index(b"\0", at)].decode()

    exported: set[str] = set()
    if export_rva:
        d = offset(export_rva)
        (_flags, _time, _major, _minor, _name, _base, _nfuncs, nnames, _funcs, names_rva,
         _ordinals) = struct.unpack_from("<IIHHIIIIIII", data, d)
        for i in range(nnames):
            name_rva, = struct.unpack_from("<I", data, offset(names_rva) + 4 * i)
            exported.add(cstring(name_rva))
    return {"format": "pe", "arch": {0x8664: "x86-64", 0xAA64: "arm64"}.get(machine, hex(machine)),
            "shared": bool(characteristics & 0x2000), "exports": exported}  # IMAGE_FILE_DLL


# --------------------------------------------------------------------------- Mach-O


def _uleb(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _export_trie(data: bytes, start: int, size: int) -> set[str]:
    names: set[str] = set()
    stack = [(0, "")]
    seen: set[int] = set()
    while stack:
        node, prefix = stack.pop()
        assert node < size and node not in seen, "malformed export trie"
        seen.add(node)
        at = start + node
        terminal, at = _uleb(data, at)
        if terminal:
            names.add(prefix)
        at += terminal
        # children: a count, then (edge string, uleb offset) pairs
        count = data[at]
        at += 1
        for _ in range(count):
            end = data.index(b"\0", at)
            edge = data[at:end].decode()
            child, at = _uleb(data, end + 1)
            stack.append((child, prefix + edge))
    return names


def read_macho(data: bytes) -> dict:
    magic, cputype, _subtype, filetype, ncmds, _sizeofcmds, _flags, _reserved = struct.unpack_from("<IiiIIIII", data, 0)
    assert magic == 0xFEEDFACF, f"magic {magic:#x}, not a 64-bit little-endian Mach-O file"
    exported: set[str] = set()
    minos = None
    at = 32
    for _ in range(ncmds):
        cmd, cmdsize = struct.unpack_from("<II", data, at)
        if cmd in (0x22, 0x80000022):  # LC_DYLD_INFO(_ONLY)
            export_off, export_size = struct.unpack_from("<II", data, at + 40)
            if export_size:
                exported |= _export_trie(data, export_off, export_size)
        elif cmd == 0x80000033:  # LC_DYLD_EXPORTS_TRIE
            off, size = struct.unpack_from("<II", data, at + 8)
            exported |= _export_trie(data, off, size)
        elif cmd == 0x32:  # LC_BUILD_VERSION: platform, minos (xxxx.yy.zz nibbles)
            platform, packed = struct.unpack_from("<II", data, at + 8)
            assert platform == 1, f"built for Mach-O platform {platform}, not macOS"
            minos = (packed >> 16, (packed >> 8) & 0xFF)
        elif cmd == 0x24:  # LC_VERSION_MIN_MACOSX
            packed, = struct.unpack_from("<I", data, at + 8)
            minos = (packed >> 16, (packed >> 8) & 0xFF)
        at += cmdsize
    return {"format": "macho", "arch": {0x0100000C: "arm64", 0x01000007: "x86-64"}.get(cputype, hex(cputype)),
            "shared": filetype == 6,  # MH_DYLIB
            "exports": {n[1:] if n.startswith("_") else n for n in exported}, "minos": minos}


READERS = {"elf": read_elf, "pe": read_pe, "macho": read_macho}


# --------------------------------------------------------------------------- the zips


def built_zips() -> dict[str, Path]:
    """dist/'s zips by kind: a platform ('linux_x64', ...) or 'legacy'."""
    zips: dict[str, Path] = {}
    for path in sorted(DIST.glob("sinew-*.zip")):
        kind = path.stem.split("-", 2)[-1]
        assert kind in PLATFORMS or kind == "legacy", f"unexpected zip {path.name}"
        zips[kind] = path
    if "legacy" not in zips or not set(zips) & set(PLATFORMS):
        pytest.fail("dist/ lacks the built zips: run `python3 build.py build` (or `python3 build.py test`)")
    return zips


def kernel_files(path: Path) -> dict[str, bytes]:
    """The files of the zip's core/kernels/lib/ folder (by name), and no build artefacts anywhere."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        stray = [n for n in names if n.endswith(OBJECT_SUFFIXES)]
        assert not stray, f"{path.name} carries build artefacts: {stray}"
        prefix = "sinew/" + LIB_DIR if path.stem.endswith("legacy") else LIB_DIR
        return {n[len(prefix):]: zf.read(n) for n in names if n.startswith(prefix) and not n.endswith("/")}


def check_library(name: str, data: bytes, platform: str) -> None:
    want_name, fmt, arch = PLATFORMS[platform]
    assert name == want_name
    info = READERS[fmt](data)
    assert info["arch"] == arch, f"{name}: {info['arch']}, not {arch}"
    assert info["shared"], f"{name} is not a shared library"
    missing = entry_points() - info["exports"]
    assert not missing, f"{name} does not export {sorted(missing)}"
    if fmt == "elf":  # loads on glibc 2.17 and later
        glibc = [tuple(int(p) for p in v.split("_", 1)[1].split(".")) for v in info["versions"] if v.startswith("GLIBC_")]
        assert max(glibc, default=(2, 0)) <= (2, 17), f"{name} needs {sorted(info['versions'])}"
    if fmt == "macho":
        assert info["minos"] is not None and info["minos"] <= (11, 0), f"{name}: minimum macOS {info['minos']}"


def test_the_header_names_the_entry_points():
    names = entry_points()
    assert "sinew_abi_version" in names
    assert all(n.startswith("sinew_") for n in names)


def test_each_platform_zip_carries_exactly_its_own_library():
    zips = built_zips()
    for platform, path in zips.items():
        if platform == "legacy":
            continue
        files = kernel_files(path)
        assert sorted(files) == [PLATFORMS[platform][0]], f"{path.name}: {sorted(files)}"
        for name, data in files.items():
            check_library(name, data, platform)


def test_the_legacy_zip_carries_the_library_of_every_platform_built():
    zips = built_zips()
    built = sorted(p for p in zips if p != "legacy")
    files = kernel_files(zips["legacy"])
    assert sorted(files) == sorted(PLATFORMS[p][0] for p in built), f"legacy: {sorted(files)}"
    for platform in built:
        check_library(PLATFORMS[platform][0], files[PLATFORMS[platform][0]], platform)


def test_each_reader_refuses_the_other_formats():
    """The format checks are real: every library is refused by the readers of the others."""
    files = kernel_files(built_zips()["legacy"])
    assert files
    for name, fmt, _arch in PLATFORMS.values():
        if name not in files:
            continue
        for other, reader in READERS.items():
            if other != fmt:
                with pytest.raises((AssertionError, struct.error)):
                    reader(files[name])
