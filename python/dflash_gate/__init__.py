"""The DFlash draft package gate, in process.

``gate(path)`` reads a draft package (``config.json`` plus its weight file) and answers, before any
loader touches it, whether every tensor is in a form the loader decodes and agrees with the config.
It fails closed: ``bool(report)`` is true only for PASS, and a package the gate could not read at
all raises ``GateError`` instead of returning a verdict. See docs/python.md.

Everything here is the Rust library's own answer (the extension module ``dflash_gate._native``);
this file only names it.
"""

from dflash_gate._native import Check, GateError, Report, Row, __version__, gate, gate_all

__all__ = ["Check", "GateError", "Report", "Row", "__version__", "gate", "gate_all"]
