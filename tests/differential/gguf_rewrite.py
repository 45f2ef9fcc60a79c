"""Rewrites a GGUF with gguf-py's own writer (``GGUFWriter``), the library llama.cpp's converter writes
every GGUF with: each metadata key with its type, each tensor with its data and type (a quantized
one as its blocks), in order, alignment the writer's own. ``python gguf_rewrite.py IN OUT``.

The gate then reads what gguf-py wrote, not what the test generator wrote: its layout (key and
tensor order, padding, offsets) is the converter's library's, not a copy of it.
"""

import sys

import gguf


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        # The header's own fields, and the keys the writer writes itself.
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment"):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub)
    for tensor in reader.tensors:
        # A quantized tensor's data is its blocks as bytes: the writer takes the element shape from
        # their byte shape and the type.
        writer.add_tensor(tensor.name, tensor.data, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
