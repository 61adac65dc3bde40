"""Checks that ELF binaries need glibc alone, and names the manylinux tag they allow.

Usage: glibc_only.py BINARY...    prints the tag (e.g. manylinux_2_34_x86_64) on stdout, and on
                                   stderr, per binary, what it needs and the newest glibc symbol
                                   version that sets the tag; exits 1 naming each problem.

"glibc alone" (what the manylinux policy lets a wheel's binary take from the system): its
DT_NEEDED entries are among libc, libm, libpthread, libdl, librt and the dynamic loader, and its
versioned symbols are GLIBC_* only (a GLIBCXX_ or CXXABI_ one would mean libstdc++ is not linked
statically; an OPENSSL_ one, libssl). The tag is manylinux_<major>_<minor> of the newest GLIBC_x.y
any binary references: the oldest glibc on which they all load. Reads `readelf -d -V`.
"""
import re
import subprocess
import sys

ALLOWED = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2"}
ARCHES = {"X86-64": "x86_64", "AArch64": "aarch64"}


def inspect(binary):
    """(needed libraries, version names referenced, machine) of one ELF file."""
    out = subprocess.run(["readelf", "-h", "-d", "-V", "--wide", binary], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"glibc_only: {binary}: readelf failed: {out.stderr.strip()}")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)
    versions = set(re.findall(r"Name: (\S+)\s+Flags", out.stdout))
    machine = re.search(r"Machine:\s+Advanced Micro Devices (X86-64)|Machine:\s+(AArch64)", out.stdout)
    arch = ARCHES.get(next(g for g in machine.groups() if g)) if machine else None
    return needed, versions, arch


def glibc_version(name):
    match = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def main(binaries):
    if not binaries:
        print(__doc__, file=sys.stderr)
        return 2
    problems, newest, arches = [], (2, 17), set()
    for binary in binaries:
        needed, versions, arch = inspect(binary)
        arches.add(arch)
        for library in needed:
            if library not in ALLOWED:
                problems.append(f"{binary} needs {library}, which is not part of glibc")
        foreign = sorted(v for v in versions if not v.startswith("GLIBC_"))
        if foreign:
            problems.append(f"{binary} references symbol versions of another library: {', '.join(foreign)}")
        glibc = sorted(filter(None, map(glibc_version, versions)))
        top = glibc[-1] if glibc else (2, 17)
        newest = max(newest, top)
        print(f"{binary}: needs {', '.join(needed) or 'nothing'}; newest symbol version GLIBC_{top[0]}.{top[1]}",
              file=sys.stderr)
    if None in arches or len(arches) != 1:
        problems.append(f"not one known machine among the binaries: {sorted(map(str, arches))}")
    for line in problems:
        print(f"glibc_only: {line}", file=sys.stderr)
    if problems:
        return 1
    print(f"manylinux_{newest[0]}_{newest[1]}_{arches.pop()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
