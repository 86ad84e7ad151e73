"""Draws the kernelspec logos (32 and 64 px PNGs) with the standard library only."""
import struct
import zlib
from pathlib import Path


def png(size: int) -> bytes:
    rows = []
    c = (size - 1) / 2
    for y in range(size):
        row = bytearray([0])
        for x in range(size):
            d = ((x - c) ** 2 + (y - c) ** 2) ** 0.5 / (size / 2)
            if d > 0.98:
                row += bytes([0, 0, 0, 0])
            elif d > 0.80:
                row += bytes([40, 40, 40, 255])  # dark ring: Rust's gear rim
            else:
                # An orange disc with a lighter "D" stripe.
                in_d = 0.30 * size < x < 0.42 * size and 0.25 * size < y < 0.75 * size
                arc = 0.30 * size < x and 0.18 < ((x - 0.42 * size) ** 2 + (y - c) ** 2) ** 0.5 / size < 0.26
                light = in_d or arc
                row += bytes([250, 230, 200, 255] if light else [222, 90, 30, 255])
        rows.append(bytes(row))
    raw = zlib.compress(b"".join(rows), 9)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


if __name__ == "__main__":
    here = Path(__file__).parent
    for s in (32, 64):
        (here / f"logo-{s}x{s}.png").write_bytes(png(s))
