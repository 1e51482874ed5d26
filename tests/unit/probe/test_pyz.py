"""The probe as it ships: the package ``envman/probe/app`` in Python 3.6 grammar with standard
library imports only, packed by ``envman.probe.pyz`` into one deterministic ``probe.pyz`` that
runs on the host's Python and on every other Python 3.6+ installed on this machine.
"""

from __future__ import annotations

import ast
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
import zipfile
from pathlib import Path

import pytest

from envman.errors import RenderError
from envman.probe import APP_DIR, IN_IMAGE_PROBE, PROBE_FILE, ProbeSourceMissing, parse_output, probe_archive
from envman.probe.pyz import DATE_TIME, PACKAGE, SHEBANG, build_pyz
from tests.support.probe_doc import probe_pyz

ROOT = Path(__file__).resolve().parents[3]
MODULES = sorted(p for p in APP_DIR.rglob("*.py") if "__pycache__" not in p.parts)

#: What the probe may import at module level: standard library modules that Python 3.6 has.
STDLIB_ALLOWED = frozenset({"argparse", "array", "ctypes", "glob", "json", "math", "os", "platform", "re",
                            "site", "socket", "subprocess", "sys", "threading", "time", "traceback"})
#: What it may import inside a function (the framework and bench checks), besides those.
FRAMEWORK_IMPORTS = frozenset({"torch", "tensorflow", "jax", "jaxlib", "onnxruntime", "numpy",
                               "jax_cuda12_plugin", "jax_cuda13_plugin"})


def rel(path: Path) -> str:
    return path.relative_to(APP_DIR).as_posix()


def _interpreters() -> dict[tuple[int, int], str]:
    """One working interpreter per Python 3.6+ version installed here: {(3, minor): path}. The
    installed files first; then, for a version none of them has, the ones on PATH (wrappers such
    as pyenv's shims cost a process of their own)."""
    installed: list[str] = []
    for pattern in ("~/.pyenv/versions/3.*/bin/python3.*", "/root/.pyenv/versions/3.*/bin/python3.*",
                    "/usr/bin/python3.*", "/usr/local/bin/python3.*"):
        installed += sorted(glob.glob(os.path.expanduser(pattern)))
    found = _versions(installed)
    on_path = [shutil.which("python3.%d" % m) for m in range(6, 15) if (3, m) not in found]
    for version, path in _versions([c for c in on_path if c]).items():
        found.setdefault(version, path)
    return found


def _versions(cands: list[str]) -> dict[tuple[int, int], str]:
    """{version: the first of ``cands`` that runs as it}, asked of each real file once, all at once."""
    unique: dict[str, str] = {}
    for c in cands:
        if re.search(r"python3\.\d+$", c):
            unique.setdefault(os.path.realpath(c), c)
    runs = []
    for c in unique.values():
        try:
            runs.append((c, subprocess.Popen([c, "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)))
        except OSError:
            continue
    found: dict[tuple[int, int], str] = {}
    for c, proc in runs:
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            continue
        if proc.returncode == 0:
            major, minor = map(int, out.split())
            if (major, minor) >= (3, 6):
                found.setdefault((major, minor), c)
    return found


INTERPRETERS = _interpreters()


# --- every module: Python 3.6 grammar, standard library only -------------------------------------


def test_the_package_has_its_modules():
    names = {rel(p) for p in MODULES}
    assert {"__init__.py", "__main__.py", "cli.py", "contract.py", "run.py", "driver.py", "runtime.py",
            "kernel.py", "framework.py", "bench.py", "frameworks/__init__.py"} <= names
    # small modules: none carries the whole probe again
    assert max(len(p.read_text(encoding="utf-8").splitlines()) for p in MODULES) < 400


@pytest.mark.parametrize("path", MODULES, ids=rel)
def test_module_parses_with_python36_grammar(path):
    ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 6))


@pytest.mark.parametrize("path", MODULES, ids=rel)
def test_module_has_no_fstrings_annotations_or_dataclasses(path):
    # ast's feature_version does not catch everything on every host Python (3.12+ accepts
    # f"{x=}" under (3, 6)), so the probe simply uses no f-strings at all.
    fstring_start = getattr(tokenize, "FSTRING_START", None)
    with open(path, "rb") as f:
        for tok in tokenize.tokenize(f.readline):
            assert tok.type != fstring_start, "f-string at line %d" % tok.start[0]
            if tok.type == tokenize.STRING:
                prefix = re.match(r"^[A-Za-z]*", tok.string).group(0).lower()
                assert "f" not in prefix, "f-string at line %d" % tok.start[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            assert not (node.module == "__future__" and any(a.name == "annotations" for a in node.names))
            assert node.module != "dataclasses"
        if isinstance(node, ast.Import):
            assert all(a.name != "dataclasses" for a in node.names)
        assert not isinstance(node, ast.NamedExpr)
        assert not isinstance(node, ast.AnnAssign), "variable annotation at line %d" % node.lineno
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.returns is None, "return annotation on %s" % node.name
            for a in node.args.args + node.args.kwonlyargs:
                assert a.annotation is None, "annotation in %s" % node.name
            assert not node.args.posonlyargs, "positional-only parameters in %s" % node.name


def _imports(tree: ast.AST, module_level: bool):
    """``(top-level name or None, relative level, line)`` of each import in ``tree``."""
    nodes = tree.body if module_level else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0], 0, node.lineno
        elif isinstance(node, ast.ImportFrom):
            yield (node.module or "").split(".")[0] or None, node.level, node.lineno


@pytest.mark.parametrize("path", MODULES, ids=rel)
def test_module_imports_the_standard_library_or_its_own_package_only(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    depth = len(path.relative_to(APP_DIR).parts)  # 1 for app/x.py: "from ." stays inside, ".." leaves
    for name, level, line in _imports(tree, module_level=False):
        if level:
            assert level <= depth, "line %d: relative import leaves the probe package" % line
            continue
        top_level = any(line == ln for _, lv, ln in _imports(tree, module_level=True) if not lv)
        allowed = STDLIB_ALLOWED if top_level else STDLIB_ALLOWED | FRAMEWORK_IMPORTS
        assert name in allowed, "line %d: import of %r (module level: %s)" % (line, name, top_level)


def test_the_allow_list_is_standard_library():
    assert STDLIB_ALLOWED <= sys.stdlib_module_names
    py36 = INTERPRETERS.get((3, 6))
    if py36:
        r = subprocess.run([py36, "-I", "-c", "import " + ", ".join(sorted(STDLIB_ALLOWED))],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr


# --- the archive ---------------------------------------------------------------------------------


def test_archive_layout_and_fixed_metadata():
    data = probe_archive()
    assert data.startswith(SHEBANG)
    with zipfile.ZipFile(probe_pyz()) as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        assert names == sorted(names)
        assert names == sorted(["__main__.py"] + ["%s/%s" % (PACKAGE, rel(p)) for p in MODULES])
        for info in infos:
            assert info.date_time == DATE_TIME and info.compress_type == zipfile.ZIP_STORED
            assert info.external_attr >> 16 == 0o100644 and info.create_system == 3
            assert info.extra == b"" and info.comment == b""
            if info.filename != "__main__.py":
                assert zf.read(info) == (APP_DIR / info.filename.split("/", 1)[1]).read_bytes()
        assert zf.comment == b""
        assert "from %s.cli import entry" % PACKAGE in zf.read("__main__.py").decode()
    assert IN_IMAGE_PROBE.endswith("/" + PROBE_FILE) and PROBE_FILE == "probe.pyz"


_BUILD = ("import hashlib, importlib.util, sys; from pathlib import Path; "
          "spec = importlib.util.spec_from_file_location('probe_pyz', sys.argv[1]); "
          "m = importlib.util.module_from_spec(spec); sys.modules['probe_pyz'] = m; spec.loader.exec_module(m); "
          "print(hashlib.sha256(m.build_pyz(Path(sys.argv[2]))).hexdigest())")


def _digest_in(python: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    r = subprocess.run([python, "-I", "-c", _BUILD, str(ROOT / "envman" / "probe" / "pyz.py"), str(APP_DIR)],
                       capture_output=True, text=True, timeout=120, env=env, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_archive_is_byte_identical_across_runs_and_interpreters(tmp_path):
    import hashlib

    here = hashlib.sha256(probe_archive()).hexdigest()
    assert hashlib.sha256(build_pyz(APP_DIR)).hexdigest() == here
    # other processes: another hash seed, time zone, umask-independent, another directory
    env = {**os.environ, "PYTHONHASHSEED": "7", "TZ": "Pacific/Kiritimati", "SOURCE_DATE_EPOCH": "1234567890"}
    assert _digest_in(sys.executable, env=env, cwd=tmp_path) == here
    hosts = [p for v, p in sorted(INTERPRETERS.items()) if v >= (3, 10)]  # pyz.py is host code
    for python in hosts:
        assert _digest_in(python) == here, python


def test_archive_depends_on_module_bytes_only(tmp_path):
    app = tmp_path / "app"
    shutil.copytree(APP_DIR, app, ignore=shutil.ignore_patterns("__pycache__"))
    for p in app.rglob("*.py"):
        os.utime(p, (2_000_000_000, 2_000_000_000))
        p.chmod(0o600)
    (app / "__pycache__").mkdir(exist_ok=True)
    (app / "__pycache__" / "cli.cpython-36.pyc").write_bytes(b"junk")
    (app / ".#cli.py").write_text("editor lock file")
    (app / "cli-old.py").write_text("a stray copy")
    (app / "notes.txt").write_text("not a module")
    assert build_pyz(app) == probe_archive()
    cli = app / "cli.py"
    cli.write_bytes(cli.read_bytes() + b"\n")
    assert build_pyz(app) != probe_archive()


def test_a_missing_module_is_named(tmp_path, monkeypatch):
    app = tmp_path / "app"
    shutil.copytree(APP_DIR, app)
    (app / "cli.py").unlink()
    with pytest.raises(ProbeSourceMissing, match=r"has no cli\.py"):
        build_pyz(app)
    with pytest.raises(ProbeSourceMissing, match="has no __init__.py, cli.py, contract.py"):
        build_pyz(tmp_path / "nowhere")
    # render turns it into one line with the fix
    import envman.render.dockerfile as R

    def missing():
        raise ProbeSourceMissing(f"{app}: the probe package has no cli.py")

    monkeypatch.setattr(R, "probe_archive", missing)
    with pytest.raises(RenderError, match="the probe is missing from this installation") as exc:
        R.probe_source()
    assert "\n" not in exc.value.line() and "reinstall envman" in exc.value.line()


def test_the_host_api_loads_no_in_image_module():
    code = ("import sys, envman.probe, envman.render.dockerfile, envman.images.build; "
            "print(sorted(m for m in sys.modules if m.startswith('envman.probe.')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[0] == str(["envman.probe.app", "envman.probe.app.contract", "envman.probe.pyz"])


# --- it runs: alone, on the host's Python and on every installed Python 3.6+ ----------------------


def _run(python: str, pyz: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    # -I: no PYTHONPATH, no user site, not the current directory: the archive must be enough
    return subprocess.run([python, "-I", str(pyz), *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_the_archive_runs_alone_on_the_host_python(tmp_path):
    pyz = tmp_path / "elsewhere" / PROBE_FILE
    pyz.parent.mkdir()
    pyz.write_bytes(probe_archive())
    r = _run(sys.executable, pyz, "--help", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("usage: probe.pyz") and "--require-gpu" in r.stdout
    r = _run(sys.executable, pyz, "--no-expect", "--only", "runtime", cwd=tmp_path)
    doc = parse_output(r.stdout)
    assert r.returncode == 0, r.stderr
    assert doc["python"] == "%d.%d.%d" % sys.version_info[:3]
    assert doc["overall"] == "cpu-only" and [c["name"] for c in doc["checks"]] == ["runtime"]
    r = _run(sys.executable, pyz, "--bogus", cwd=tmp_path)
    assert r.returncode == 2 and "probe.pyz: error:" in r.stderr
    assert parse_output(r.stdout)["reason"].startswith("bad usage")


def test_the_package_runs_as_a_module_from_the_checkout(tmp_path):
    f = tmp_path / "stack.json"
    f.write_text(json.dumps({"name": "x", "framework": None, "cuda": None}))
    r = subprocess.run([sys.executable, "-m", "envman.probe.app", "--expect", str(f), "--only", "runtime"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    doc = parse_output(r.stdout)
    assert doc["expect"]["found"] is True and doc["expect"]["stack"]["name"] == "x"


@pytest.mark.parametrize("version", sorted(INTERPRETERS), ids=lambda v: "python%d.%d" % v)
def test_the_archive_runs_on_every_installed_python(version, tmp_path):
    python = INTERPRETERS[version]
    if version == (3, 6):  # the oldest the probe supports: every module compiles there too
        code = "import sys\nfor f in sys.argv[1:]:\n    compile(open(f, 'rb').read(), f, 'exec')\n"
        r = subprocess.run([python, "-I", "-c", code, *map(str, MODULES)], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
    r = _run(python, probe_pyz(), "--no-expect", cwd=tmp_path)
    doc = parse_output(r.stdout)
    assert doc["python"].startswith("%d.%d." % version)
    assert doc["overall"] in ("cpu-only", "pass") and r.returncode == 0, r.stderr
    assert [c["name"] for c in doc["checks"]] == ["driver", "runtime", "kernel", "framework"]


def test_the_pyz_builder_loads_on_its_own():
    spec = importlib.util.spec_from_file_location("lone_pyz", ROOT / "envman" / "probe" / "pyz.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["lone_pyz"] = mod
    try:
        spec.loader.exec_module(mod)
        assert mod.build_pyz(APP_DIR) == probe_archive()
    finally:
        del sys.modules["lone_pyz"]


def test_the_host_names_the_probe_once_and_reads_its_output_through_parse_output():
    package = ROOT / "envman"
    callers = []
    for path in sorted(package.rglob("*.py")):
        if APP_DIR in path.parents:
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        paths = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and n.value.startswith("/opt/envman/probe")]
        assert not paths, f"{path}: {paths}: use envman.probe.IN_IMAGE_PROBE"
        if "IN_IMAGE_PROBE" in text and path.parent != package / "probe":
            callers.append(path)
            names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "envman.probe"
                     for a in n.names}
            assert "parse_output" in names, f"{path} runs the probe but does not parse it with parse_output"
            assert "json.loads" not in text, f"{path}: the probe's output goes through parse_output only"
    assert [p.relative_to(package).as_posix() for p in callers] == ["images/build.py"]
