"""The reference safetensors reader's verdict on each container it is sent.

Reads records from stdin (an 8-byte little-endian length, then that many bytes of a would-be
safetensors file) and prints one line per record: `ok`, or `err <message>`.
"""
import struct
import sys

from safetensors import deserialize


def main():
    stdin = sys.stdin.buffer
    while True:
        head = stdin.read(8)
        if len(head) < 8:
            break
        (n,) = struct.unpack("<Q", head)
        data = stdin.read(n)
        try:
            deserialize(bytes(data))
            print("ok")
        except Exception as e:  # the verdict is the point, whatever the exception's type
            print("err", str(e).replace("\n", " ")[:300])
        sys.stdout.flush()


main()
