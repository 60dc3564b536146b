"""POSIX `cksum`: the CRC of a byte string as the `cksum` program prints it, so that a
process's command line read in Python (a local node) and one read by a node's shell
(`head -c N /proc/PID/cmdline | cksum`) give the same word. Comparing this word, not the
text, compares bytes with bytes: a command line with bytes that are not UTF-8, or cut in
the middle of a character, is still recognised as itself. Pure."""

from __future__ import annotations


def _table() -> tuple[int, ...]:
    out = []
    for i in range(256):
        c = i << 24
        for _ in range(8):
            c = ((c << 1) ^ 0x04C11DB7) if c & 0x80000000 else (c << 1)
        out.append(c & 0xFFFFFFFF)
    return tuple(out)


_TABLE = _table()


def posix_cksum(data: bytes) -> int:
    """The CRC `cksum` prints for data (polynomial 0x04C11DB7, the length appended)."""
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _TABLE[((crc >> 24) ^ b) & 0xFF]
    n = len(data)
    while n:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _TABLE[((crc >> 24) ^ n) & 0xFF]
        n >>= 8
    return ~crc & 0xFFFFFFFF


def cksum_word(data: bytes) -> str:
    """ "CRC-LENGTH": `cksum`'s two numbers as the shell's `cksum | tr ' ' -` prints them."""
    return f"{posix_cksum(data)}-{len(data)}"


__all__ = ["cksum_word", "posix_cksum"]
