# Types of the extension module (python/src/lib.rs). A test holds this file to the module (mypy's
# stubtest) and checks a usage file against it with mypy --strict.

import os
from typing import Any, Literal, final

__all__ = ["__version__", "GateError", "Report", "Check", "gate", "main"]

__version__: str

_Outcome = Literal["PASS", "FAIL", "UNDECIDED"]

class GateError(Exception):
    """The gate could not run on the package (the CLI's exit 2); never a verdict."""

    reason: str
    path: str
    package: str

@final
class Check:
    @property
    def id(self) -> str: ...
    @property
    def outcome(self) -> _Outcome: ...
    @property
    def message(self) -> str: ...
    @property
    def evidence(self) -> dict[str, Any] | None: ...
    @property
    def blocked_by(self) -> str | None: ...

@final
class Report:
    @property
    def verdict(self) -> _Outcome: ...
    @property
    def package(self) -> str: ...
    @property
    def exit_code(self) -> Literal[0, 1, 3]: ...
    @property
    def checks(self) -> list[Check]: ...
    @property
    def census(self) -> dict[str, Any]: ...
    @property
    def loaders(self) -> list[dict[str, Any]]: ...
    @property
    def not_checked(self) -> list[str]: ...
    def to_json(self) -> str: ...
    def __bool__(self) -> bool: ...

def gate(
    path: str | os.PathLike[str],
    *,
    target: str | os.PathLike[str] | None = None,
    source: str | os.PathLike[str] | None = None,
    manifest: bool = False,
    revision: str | None = None,
    loader: list[str] | None = None,
) -> Report: ...
def main(args: list[bytes]) -> int: ...
