"""``python -m dflash_gate ARGS``: the command-line gate, ``dflash-gate ARGS``.

The arguments go, as the bytes the process was given, to the binary's own code compiled into the
extension; it parses them, prints, and returns the exit status. Nothing is parsed here.
"""

import os
import signal
import sys

from dflash_gate._native import main


def run() -> int:
    # The gate writes to the process's stdout and stderr directly, as the binary does: whatever
    # Python buffered goes out first.
    sys.stdout.flush()
    sys.stderr.flush()
    # Ctrl-C stops the gate as it stops the binary, at once, rather than as a KeyboardInterrupt
    # raised only after the gate has finished.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return main([os.fsencode(arg) for arg in sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(run())
