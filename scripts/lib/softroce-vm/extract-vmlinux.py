#!/usr/bin/env python3
"""Extract the uncompressed ELF vmlinux from an xz-compressed bzImage (vmlinuz).

Usage: extract-vmlinux.py VMLINUZ OUTPUT

QEMU can boot the resulting ELF through its PVH note (CONFIG_PVH=y), which skips
the kernel's own xz decompressor (about 7 s per boot under TCG).
"""
import lzma
import os
import sys

XZ_MAGIC = b"\xfd7zXZ\x00"


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src, dst = sys.argv[1], sys.argv[2]
    data = open(src, "rb").read()
    pos = data.find(XZ_MAGIC)
    while pos >= 0:
        try:
            out = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[pos:])
        except lzma.LZMAError:
            out = b""
        if out[:4] == b"\x7fELF":
            tmp = dst + ".tmp"
            with open(tmp, "wb") as f:
                f.write(out)
            os.replace(tmp, dst)
            return 0
        pos = data.find(XZ_MAGIC, pos + 1)
    print(f"extract-vmlinux: no xz-compressed ELF found in {src}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
