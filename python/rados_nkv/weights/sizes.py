# SPDX-License-Identifier: Apache-2.0
"""Byte sizes written as people write them: 4096, "4k", "64M", "1G", "64MiB"."""

import re

__all__ = ["parse_size", "fmt_size"]

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(v):
    """An int (returned as is) or a string: digits with an optional K/M/G/T (powers of 1024, also
    written KiB/KB...). ValueError otherwise."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if not isinstance(v, str):
        raise ValueError("a size must be an integer or a string like \"64M\", got %r" % (v,))
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", v)
    if not m:
        raise ValueError("bad size %r: a number of bytes, optionally followed by K, M, G or T" % v)
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def fmt_size(n):
    """@n bytes in the largest binary unit that keeps it >= 1 (one decimal)."""
    for unit, div in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%.1f %s" % (n / div, unit)
    return "%d B" % n
