"""envman smoke-test probe: the code that runs inside every image envman builds.

These modules are shipped as one zipapp, ``/opt/envman/probe.pyz`` (built by
``envman.probe.pyz``, where this package is named ``envman_probe``), and run there as
``python /opt/envman/probe.pyz [options]``; the same file runs directly on a bare GPU host,
and ``python -m envman.probe.app`` runs it from a source checkout.

Constraints (checked by the unit tests, for every module of this package):
  * runs on any Python 3.6+: no f-strings at all, no walrus, no dataclasses, no
    ``from __future__ import annotations``, no annotations;
  * standard library only at module level (ctypes talks to libcuda); a framework (torch,
    tensorflow, jax, onnxruntime) is imported only inside the framework and bench checks;
  * imports inside the package are relative: in the archive it is named ``envman_probe``;
  * prints ONE JSON document as the last line of stdout. Anything else written to fd 1
    while the checks run (framework chatter) is sent to stderr instead;
  * exit status 0 when overall is ``pass`` or ``cpu-only``, 1 on ``fail``, 2 on bad usage
    (a JSON document with overall ``fail`` is printed for bad usage too, except --help).

Options:
  --expect FILE     resolved stack (JSON), default /opt/envman/stack.json; a missing or
                    unreadable file is bad usage (exit 2, overall fail): a check without its
                    expectations proves nothing
  --no-expect       run without expectations (a bare host); the document says so
                    (expect.found false, expect.path null)
  --require-gpu     a missing GPU is a failure, not a skip
  --bench           add the bench check (bandwidths, matmul TFLOP/s)
  --timeout SEC     per-check time limit (default 120); a hung check fails with
                    "timed out after N s"
  --only A,B        run only these checks (driver, runtime, kernel, framework, bench); the
                    driver discovery always runs, since the GPU checks depend on it, and is
                    listed when selected or when it failed

Result document (one line of JSON):
  {"probe_version": 1, "overall": "pass"|"cpu-only"|"fail", "reason": str,
   "python": "3.x.y", "host": {...}, "gpus": [{"index", "name", "cc", "memory_bytes", ...}],
   "driver_version": "12.4"|null, "checks": [{"name", "status", "reason", "seconds", "data"}],
   "bench": {...}|null, "expect": {"path", "found", "stack"}, "seconds": float}

Overall: any failed check -> fail; else, if no GPU was found or a check (or the GPU part
of the framework check) was skipped for lack of a GPU -> cpu-only; else pass. With
--require-gpu, no GPU -> fail.

Modules, in the order a run uses them: ``cli`` (options, stdout isolation, exit status),
``expect`` (the stack file), ``run`` (the checks in order), ``context`` (what the checks
share), the checks ``driver``, ``runtime``, ``kernel``, ``framework`` (with one adapter per
framework in ``frameworks``) and ``bench``; ``check`` (one time-limited check), ``verdict``
(overall and exit status), ``document`` (the JSON line); helpers ``cuda`` (libcuda through
ctypes), ``versions``, ``arch``, ``numeric``; ``contract`` holds what the host shares.
"""
