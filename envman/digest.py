"""SHA-256 without loading OpenSSL: the interpreter's own SHA-256 module when it has one.

``hashlib`` loads OpenSSL's library on import (about 3 ms here, on every ``envman run`` that
hashes anything); the built-in module (``_sha256`` in CPython 3.10-3.11, ``_sha2`` from 3.12)
loads in a tenth of that and gives the same digests. Standard library only, nothing at import.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from typing import Protocol

    class Hash(Protocol):  # what hashlib's and the built-in module's hash objects both are
        def update(self, data: bytes, /) -> None: ...
        def digest(self) -> bytes: ...
        def hexdigest(self) -> str: ...
        def copy(self) -> Hash: ...


def sha256(data: bytes = b"") -> Hash:
    """A SHA-256 hash object (``update``, ``digest``, ``hexdigest``, ``copy``) started on ``data``."""
    for name in ("_sha256", "_sha2"):  # CPython 3.10-3.11, then 3.12 and later
        try:
            made: Hash = __import__(name).sha256(data)
            return made
        except ImportError:
            continue
    import hashlib  # another interpreter, or one built without its own SHA-256

    return hashlib.sha256(data)


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` in hex."""
    return sha256(data).hexdigest()
