"""The command line: options, the JSON line on the real stdout, exit statuses."""

import argparse
import math
import os
import sys
import traceback

from .context import DEFAULT_TIMEOUT, Context
from .contract import CHECK_ORDER, DEFAULT_EXPECT, EXIT_OK, EXIT_USAGE, PROBE_FILE
from .document import base_document, to_json_line, usage_document
from .expect import UsageError, load_expect
from .run import run_probe
from .verdict import exit_code_for


class Options(object):
    def __init__(self, expect_path=DEFAULT_EXPECT, require_gpu=False, bench=False,
                 timeout=DEFAULT_TIMEOUT, only=None):
        # None: run without expectations (--no-expect)
        self.expect_path = expect_path
        self.require_gpu = require_gpu
        self.bench = bench
        self.timeout = timeout
        self.only = only


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def parse_args(argv):
    p = _Parser(prog=PROBE_FILE, description="envman in-container smoke-test probe: prints one "
                "JSON document (see the envman_probe package docstring for its keys).")
    p.add_argument("--expect", metavar="FILE", default=None,
                   help="resolved stack JSON (default %s; it must exist)" % DEFAULT_EXPECT)
    p.add_argument("--no-expect", action="store_true",
                   help="run without expectations (a bare host, no stack)")
    p.add_argument("--require-gpu", action="store_true", help="a missing GPU is a failure")
    p.add_argument("--bench", action="store_true", help="measure bandwidths and matmul TFLOP/s")
    p.add_argument("--timeout", metavar="SECONDS", default=str(DEFAULT_TIMEOUT),
                   help="per-check time limit (default %(default)s)")
    p.add_argument("--only", metavar="CHECK,...", default=None,
                   help="run only these checks: %s" % ",".join(CHECK_ORDER))
    ns = p.parse_args(argv)
    try:
        timeout = float(ns.timeout)
    except ValueError:
        raise UsageError("--timeout: not a number: %r" % ns.timeout)
    if not timeout > 0 or math.isinf(timeout):
        raise UsageError("--timeout: must be a positive number of seconds, not %r" % ns.timeout)
    only = None
    if ns.only is not None:
        only = [c.strip() for c in ns.only.split(",") if c.strip()]
        unknown = [c for c in only if c not in CHECK_ORDER]
        if unknown or not only:
            raise UsageError("--only: unknown check(s) %s (known: %s)" % (
                ", ".join(repr(c) for c in unknown) or "(none given)", ", ".join(CHECK_ORDER)))
    bench = ns.bench or bool(only and "bench" in only)
    if ns.no_expect and ns.expect is not None:
        raise UsageError("--no-expect and --expect exclude each other")
    expect = None if ns.no_expect else (ns.expect or DEFAULT_EXPECT)
    return Options(expect, ns.require_gpu, bench, timeout, only)


def main(argv=None, out=None, ctx=None):
    """Parse ``argv``, run, write the JSON line to ``out``; returns the exit status."""
    out = out or sys.stdout
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        opts = parse_args(argv)
        expect, found = load_expect(opts.expect_path)
    except UsageError as e:
        sys.stderr.write("%s: error: %s\n" % (PROBE_FILE, e))
        out.write(to_json_line(usage_document(str(e))) + "\n")
        out.flush()
        return EXIT_USAGE
    try:
        doc = run_probe(opts, ctx=ctx, expect=expect, expect_found=found)
    except Exception as e:  # noqa: BLE001 - always answer with a document
        doc = base_document()
        doc["reason"] = "probe crashed: %s: %s" % (type(e).__name__, e)
        doc["traceback"] = traceback.format_exc().splitlines()[-12:]
    out.write(to_json_line(doc) + "\n")
    out.flush()
    main.last_doc = doc
    return exit_code_for(doc["overall"])


def _isolate_stdout():
    """Send fd 1 (and sys.stdout) to stderr; return a text file on the real stdout."""
    try:
        sys.stdout.flush()
        real = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        return os.fdopen(real, "w")
    except (OSError, ValueError, AttributeError):
        return sys.stdout


def entry():
    """The script's entry point: ``sys.exit(entry())``."""
    argv = sys.argv[1:]
    if "-h" in argv or "--help" in argv:
        try:
            parse_args(argv)
        except UsageError as e:
            sys.stderr.write("%s: error: %s\n" % (PROBE_FILE, e))
            return EXIT_USAGE
        return EXIT_OK
    out = _isolate_stdout()
    ctx = Context()
    code = main(argv, out=out, ctx=ctx)
    out.flush()
    if ctx.timed_out:
        # A hung check's thread may still sit in a driver or framework call: leave now.
        sys.stderr.flush()
        os._exit(code)
    return code
