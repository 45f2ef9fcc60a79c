"""gguf-py's reading of a GGUF: its tensors and their values dequantized by `gguf.quants.dequantize`.

Usage: gguf_reference.py FILE OUT_DIR. Prints one JSON document: the file's tensors (name, type name,
dimensions ne0 first, absolute data offset, byte count) and the metadata keys asked for by the
differential test; writes each tensor's dequantized values (float32, little-endian, in file order)
to OUT_DIR/<index>.f32.

Usage: gguf_reference.py --quant-sizes. Prints gguf-py's `GGML_QUANT_SIZES` as one JSON object: each
type's name to its id, elements per block and bytes per block.

Usage: gguf_reference.py --verdicts. Reads one path a line from stdin and prints one line for each:
`ok` when gguf-py reads the file and every tensor's data, or `err <message>`.
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize


def verdicts():
    for line in sys.stdin:
        try:
            reader = GGUFReader(line.rstrip("\n"))
            for t in reader.tensors:
                if t.data.nbytes != t.n_bytes:
                    raise ValueError(f"tensor {t.name}: {t.data.nbytes} bytes of {t.n_bytes}")
            print("ok")
        except Exception as e:  # the verdict is the point, whatever the exception's type
            print("err", str(e).replace("\n", " ")[:300])
        sys.stdout.flush()


def quant_sizes():
    sizes = {t.name: [int(t), block, size] for t, (block, size) in GGML_QUANT_SIZES.items()}
    json.dump(sizes, sys.stdout)


def main():
    if sys.argv[1] == "--verdicts":
        verdicts()
        return
    if sys.argv[1] == "--quant-sizes":
        quant_sizes()
        return
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
