"""gguf-py's reading of a GGUF: its tensors and their values dequantized by `gguf.quants.dequantize`.

Usage: gguf_reference.py FILE OUT_DIR. Prints one JSON document: the file's tensors (name, type name,
dimensions ne0 first, absolute data offset, byte count) and the metadata keys asked for by the
differential test; writes each tensor's dequantized values (float32, little-endian, in file order)
to OUT_DIR/<index>.f32.
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def main():
    path, out = sys.argv[1], sys.argv[2]
    reader = GGUFReader(path)
    tensors = []
    for i, t in enumerate(reader.tensors):
        values = dequantize(t.data, t.tensor_type)
        values = np.ascontiguousarray(values, dtype="<f4").ravel()
        values.tofile(os.path.join(out, f"{i}.f32"))
        tensors.append(
            {
                "name": t.name,
                "type": t.tensor_type.name,
                "dims": [int(d) for d in t.shape],
                "offset": int(t.data_offset),
                "bytes": int(t.n_bytes),
                "values": int(values.size),
            }
        )
    fields = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        value = field.contents()
        if isinstance(value, list) and len(value) > 64:
            value = {"count": len(value)}
        elif isinstance(value, float):
            value = float(np.float32(value))
        fields[key] = value
    json.dump({"tensors": tensors, "fields": fields}, sys.stdout)


main()
