#!/usr/bin/env python3
"""Says whether a PNG screenshot shows something: a page that failed to render comes out one
colour (white, or Chromium's grey). Standard library only (zlib): the image is decoded far enough
to count its pixels' colours, not unfiltered, which is enough to tell one colour from a page of
text.

  png_not_blank.py FILE      exit 0 and "W x H, N distinct byte values, the commonest M%" when
                             the picture is not blank, exit 1 saying why otherwise
"""
import collections
import struct
import sys
import zlib


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: png_not_blank.py FILE")
    try:
        data = open(sys.argv[1], "rb").read()
    except OSError as e:
        sys.exit(f"no screenshot: {e}")
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"not a PNG ({len(data)} bytes)")
    pos, idat, width, height = 8, b"", 0, 0
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    counts = collections.Counter(raw)
    commonest = counts.most_common(1)[0][1] / len(raw)
    summary = f"{width} x {height}, {len(counts)} distinct byte values, the commonest {commonest:.1%}"
    # A blank page: a handful of values (the filter bytes and one colour), or one value almost
    # everywhere (over 99%). Text on a page gives dozens of values (anti-aliasing): the guide's
    # getting-started page 92-95% one value, mxrun's status page, white below its tables, 97.5%.
    if width < 100 or height < 100 or len(counts) < 16 or commonest > 0.99:
        sys.exit(f"blank: {summary}")
    print(summary)


if __name__ == "__main__":
    main()
