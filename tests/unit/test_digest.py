"""SHA-256 without OpenSSL (envman/digest.py): the same digests as hashlib's, incrementally too,
and the fallback to hashlib where the interpreter has no SHA-256 of its own."""

from __future__ import annotations

import builtins
import hashlib
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envman import digest


@given(st.lists(st.binary(max_size=300), max_size=5))
def test_the_digests_are_hashlibs(parts):
    h = digest.sha256()
    for part in parts:
        h.update(part)
    whole = b"".join(parts)
    assert h.hexdigest() == hashlib.sha256(whole).hexdigest() == digest.sha256_hex(whole)
    assert h.digest() == hashlib.sha256(whole).digest() == digest.sha256(whole).digest()


def test_a_copy_goes_on_alone():
    h = digest.sha256(b"a")
    c = h.copy()
    c.update(b"b")
    assert (h.hexdigest(), c.hexdigest()) == (hashlib.sha256(b"a").hexdigest(), hashlib.sha256(b"ab").hexdigest())


def test_without_the_interpreters_own_module_hashlib_answers(monkeypatch):
    real = builtins.__import__

    def no_builtin_sha(name, *args, **kwargs):
        if name in ("_sha256", "_sha2"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_builtin_sha)
    assert digest.sha256_hex(b"x") == hashlib.sha256(b"x").hexdigest()


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="the built-in module is CPython's")
def test_hashing_does_not_load_openssl():
    code = "import sys\nfrom envman.digest import sha256_hex\nsha256_hex(b'x')\nprint('_hashlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
