"""The render cache (envman.render.rendercache): a hit gives the exact text a fresh render gives, without
jinja2; anything that could change the text, and anything in doubt about the file, is a miss."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envman.paths import templates_dir
from envman.render import rendercache
from envman.render import template as template_mod
from envman.render.layerplan import notebook_plan, project_plan
from envman.render.plan import stack_plan
from envman.render.sections import DockerfilePlan, NetworkOptions
from envman.render.options import RenderOptions
from envman.render.layout import dockerfile_steps
from envman.render.template import jinja_env, render_dockerfile
from tests.unit.render.test_dockerfile import make_stack

BASE = "sha256:" + "c" * 64


def plan(**kw) -> DockerfilePlan:
    args = dict(apt=("git", "curl=7.81.0-1ubuntu1.16"), requirements=True, locked=True,
                report_path="/opt/envman/project/report.json", where="envman.toml")
    args.update(kw)
    return project_plan("demo", "torch-2.4.1-cuda12.4-py3.10", BASE, **args)


def fresh(p: DockerfilePlan) -> str:
    return jinja_env().get_template(p.template).render(steps=dockerfile_steps(p))


def entries() -> dict:
    return json.loads(Path(rendercache.cache_path()).read_text())["renders"]


@pytest.fixture
def counted(monkeypatch):
    """How many times the Jinja render ran."""
    calls = []
    real = template_mod._render

    def spy(p):
        calls.append(p)
        return real(p)

    monkeypatch.setattr(template_mod, "_render", spy)
    return calls


@pytest.mark.parametrize("p", [plan(), plan(apt=()), plan(requirements=False), plan(locked=False),
                               notebook_plan(BASE, "jupyterlab==4.2.5")], ids=str)
def test_a_hit_is_byte_identical_to_a_fresh_render_and_skips_jinja(p, counted):
    first = render_dockerfile(p)
    second = render_dockerfile(p)
    assert first == second == fresh(p)
    assert len(counted) == 1
    assert len(entries()) == 1


def test_the_cache_file_is_private_in_a_private_folder(counted):
    render_dockerfile(plan())
    path = Path(rendercache.cache_path())
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"


def _variants(value):
    """One changed copy of ``value`` per field it holds, nested sections included (field path, copy)."""
    for f in dataclasses.fields(value):
        current = getattr(value, f.name)
        if dataclasses.is_dataclass(current):
            for path, changed in _variants(current):
                yield f"{f.name}.{path}", dataclasses.replace(value, **{f.name: changed})
            continue
        if isinstance(current, bool):
            new = not current
        elif isinstance(current, str):
            new = current + "x"
        elif isinstance(current, tuple):
            new = (*current, "extra")
        elif current is None:
            new = "x"
        else:
            raise AssertionError(f"no variant for {f.name}: {current!r}")
        yield f.name, dataclasses.replace(value, **{f.name: new})


def test_every_field_of_the_plan_is_in_the_key():
    p = plan()
    root = str(templates_dir())
    key = rendercache.render_key(p, root)
    assert key is not None
    variants = list(_variants(p))
    # every section and every field of the sections a project plan has
    names = {name for name, _ in variants}
    assert {"title", "template", "base.image", "base.from_image", "base.platform", "os_packages.packages",
            "os_packages.install_env", "project.requirements.install", "project.requirements.check",
            "project.name", "builder.kind", "labels", "nvidia", "pip_packages"} <= names
    keys = set()
    for name, changed in variants:
        k = rendercache.render_key(changed, root)
        if changed.template != "project.Dockerfile.j2" or changed.network is not None:
            assert k is None, name
            continue
        assert k is not None and k != key, name
        keys.add(k)
    assert len(keys) == len([1 for _, c in variants if c.template == "project.Dockerfile.j2" and c.network is None])


def test_a_section_of_another_type_with_the_same_fields_is_another_key():
    @dataclasses.dataclass(frozen=True)
    class Twin:
        name: str
        stack: str
        requirements: object

    p = plan()
    twin = dataclasses.replace(p, project=Twin(p.project.name, p.project.stack, p.project.requirements))
    assert rendercache.render_key(twin, str(templates_dir())) != rendercache.render_key(p, str(templates_dir()))


def test_plans_that_may_hold_index_settings_are_never_cached(counted):
    p = dataclasses.replace(plan(), network=NetworkOptions(pip_env=(("PIP_INDEX_URL", "https://u:p@h/simple"),)))
    assert rendercache.render_key(p, str(templates_dir())) is None
    render_dockerfile(p)
    stack = stack_plan(make_stack(), RenderOptions(pip_index="https://user:secret@pypi.example/simple"), [])
    render_dockerfile(stack)
    render_dockerfile(stack)
    assert rendercache.render_key(stack, str(templates_dir())) is None
    assert len(counted) == 3
    assert not Path(rendercache.cache_path()).exists()


def copy_templates(tmp_path) -> Path:
    root = tmp_path / "templates"
    shutil.copytree(templates_dir(), root)
    return root


def test_a_changed_byte_in_the_template_the_render_reads_is_a_miss(tmp_path):
    root = copy_templates(tmp_path)
    before = rendercache.render_key(plan(), str(root))
    with open(root / "project.Dockerfile.j2", "ab") as fh:
        fh.write(b" ")
    after = rendercache.render_key(plan(), str(root))
    assert before is not None and after is not None and before != after


@pytest.mark.parametrize("name", rendercache.LAYOUT_MODULES)
def test_a_changed_byte_in_any_module_that_lays_the_plan_out_is_a_miss(tmp_path, monkeypatch, name):
    """Which steps a plan becomes and how each is written is code, not template: a changed line
    of it must not serve the text the old code rendered."""
    here = Path(rendercache.__file__).parent
    copy = tmp_path / "render"
    copy.mkdir()
    for module in rendercache.LAYOUT_MODULES:
        shutil.copy(here / module, copy / module)
    monkeypatch.setattr(rendercache, "__file__", str(copy / "rendercache.py"))
    before = rendercache.render_key(plan(), str(templates_dir()))
    with open(copy / name, "ab") as fh:
        fh.write(b"\n")
    after = rendercache.render_key(plan(), str(templates_dir()))
    assert before is not None and after is not None and before != after


def test_the_layout_modules_are_every_render_module_the_layout_reads():
    """LAYOUT_MODULES names each module of envman.render that template.py, layout.py or steps.py
    import, directly or through one another (under TYPE_CHECKING too). What plan.py imports
    computes the plan's values, which the key holds."""
    import ast

    here = Path(rendercache.__file__).parent
    seen: set[str] = set()
    todo = ["template.py", "layout.py", "steps.py"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name == "plan.py":
            continue
        for node in ast.walk(ast.parse((here / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("envman.render."):
                todo.append(node.module.rsplit(".", 1)[1] + ".py")
    seen -= {"rendercache.py"}  # the cache itself: a lookup, not a render
    assert seen <= set(rendercache.LAYOUT_MODULES), seen - set(rendercache.LAYOUT_MODULES)


def test_a_template_the_project_render_does_not_read_is_not_in_the_key(tmp_path):
    root = copy_templates(tmp_path)
    before = rendercache.render_key(plan(), str(root))
    with open(root / "Dockerfile.j2", "ab") as fh:
        fh.write(b" ")
    assert rendercache.render_key(plan(), str(root)) == before


def test_the_templates_found_are_the_ones_jinja_loads():
    import jinja2

    loaded = []

    class Recording(jinja2.FileSystemLoader):
        def get_source(self, environment, template):
            loaded.append(template)
            return super().get_source(environment, template)

    env = jinja_env().overlay(loader=Recording(str(templates_dir())), cache_size=0)
    for p in (plan(), notebook_plan(BASE, "jupyterlab")):
        env.get_template(p.template).render(steps=dockerfile_steps(p))
        assert set(loaded) == set(rendercache.template_files(p.template, str(templates_dir())))
        loaded.clear()


@pytest.mark.parametrize("tag", ['{% include plan.template %}', '{% import name as m %}',
                                 '{%- from ["base.Dockerfile.j2"][0] import x %}', '{% extends  base %}'])
def test_a_template_loaded_through_an_expression_is_never_cached(tmp_path, tag):
    root = copy_templates(tmp_path)
    with open(root / "project.Dockerfile.j2", "a") as fh:
        fh.write(tag + "\n")
    assert rendercache.render_key(plan(), str(root)) is None


def test_a_missing_template_is_not_cached_and_still_an_error(tmp_path):
    root = copy_templates(tmp_path)
    (root / "project.Dockerfile.j2").unlink()
    assert rendercache.render_key(plan(), str(root)) is None


def test_another_envman_version_is_a_miss(monkeypatch):
    before = rendercache.render_key(plan(), str(templates_dir()))
    monkeypatch.setattr(rendercache, "__version__", "0.0.0+other")
    assert rendercache.render_key(plan(), str(templates_dir())) != before


def test_another_jinja_or_environment_is_a_miss(monkeypatch):
    before = rendercache.render_key(plan(), str(templates_dir()))
    monkeypatch.setattr(rendercache, "_jinja_fingerprint", lambda: b"__version__ = '9.9'")
    assert rendercache.render_key(plan(), str(templates_dir())) != before
    monkeypatch.setattr(rendercache, "_jinja_fingerprint", lambda: None)
    assert rendercache.render_key(plan(), str(templates_dir())) is None


def _poison(text: str) -> None:
    """Replace every entry's text (keeping the recorded hash)."""
    path = Path(rendercache.cache_path())
    data = json.loads(path.read_text())
    for entry in data["renders"].values():
        entry["text"] = text
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("damage", ["truncate", "garbage", "not-a-dict", "wrong-format", "text-changed",
                                    "entry-not-a-dict", "hash-missing", "empty"])
def test_a_damaged_cache_is_a_miss_never_a_wrong_text(damage, counted):
    p = plan()
    expected = render_dockerfile(p)
    path = Path(rendercache.cache_path())
    raw = path.read_text()
    data = json.loads(raw)
    if damage == "truncate":
        path.write_text(raw[: len(raw) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\xff\x00garbage")
    elif damage == "not-a-dict":
        path.write_text("[1, 2]")
    elif damage == "wrong-format":
        data["format"] = 999
        path.write_text(json.dumps(data))
    elif damage == "text-changed":
        _poison("FROM evil\n")
    elif damage == "entry-not-a-dict":
        path.write_text(json.dumps({"format": rendercache.CACHE_FORMAT, "renders": {k: "FROM evil\n" for k in data["renders"]}}))
    elif damage == "hash-missing":
        path.write_text(json.dumps({"format": rendercache.CACHE_FORMAT,
                                    "renders": {k: {"text": "FROM evil\n"} for k in data["renders"]}}))
    elif damage == "empty":
        path.write_text("")
    assert render_dockerfile(p) == expected
    assert len(counted) == 2
    assert render_dockerfile(p) == expected  # rewritten: a hit again
    assert len(counted) == 2


def test_a_group_or_world_writable_cache_file_is_a_miss(counted):
    render_dockerfile(plan())
    path = Path(rendercache.cache_path())
    os.chmod(path, 0o666)
    _poison("FROM evil\n")
    os.chmod(path, 0o666)
    assert render_dockerfile(plan()) == fresh(plan())
    assert len(counted) == 2


def test_an_unreadable_cache_file_is_a_miss(counted, monkeypatch):
    render_dockerfile(plan())
    path = rendercache.cache_path()
    real_open = os.open

    def refuse(name, *args, **kw):  # what a file mode 000 gives a user other than root
        if os.fspath(name) == path:
            raise PermissionError(13, "Permission denied", name)
        return real_open(name, *args, **kw)

    monkeypatch.setattr(rendercache.os, "open", refuse)
    assert render_dockerfile(plan()) == fresh(plan())
    assert len(counted) == 2


def test_a_cache_file_owned_by_someone_else_is_a_miss(counted, monkeypatch):
    render_dockerfile(plan())
    monkeypatch.setattr(rendercache.os, "geteuid", lambda: os.stat(rendercache.cache_path()).st_uid + 1)
    assert rendercache.lookup(rendercache.render_key(plan(), str(templates_dir()))) is None


def test_a_symlinked_cache_file_is_a_miss(tmp_path, counted):
    render_dockerfile(plan())
    path = Path(rendercache.cache_path())
    target = tmp_path / "elsewhere.json"
    path.rename(target)
    path.symlink_to(target)
    assert rendercache.lookup(rendercache.render_key(plan(), str(templates_dir()))) is None


def test_an_unwritable_cache_folder_only_costs_time(tmp_path, monkeypatch, counted):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(blocker / "cache"))
    assert render_dockerfile(plan()) == fresh(plan())
    assert render_dockerfile(plan()) == fresh(plan())
    assert len(counted) == 2


def test_the_cache_keeps_the_newest_entries_only(counted):
    for i in range(rendercache.MAX_ENTRIES + 5):
        render_dockerfile(notebook_plan(BASE, f"jupyterlab=={i}"))
    kept = entries()
    assert len(kept) == rendercache.MAX_ENTRIES
    counted.clear()
    render_dockerfile(notebook_plan(BASE, f"jupyterlab=={rendercache.MAX_ENTRIES + 4}"))  # newest: a hit
    assert counted == []
    render_dockerfile(notebook_plan(BASE, "jupyterlab==0"))  # oldest: evicted
    assert len(counted) == 1


@pytest.mark.parametrize("renders", [1, 5, 40, rendercache.MAX_ENTRIES + 1, rendercache.MAX_ENTRIES * 3])
def test_a_batch_reads_and_writes_the_cache_file_once(counted, monkeypatch, renders):
    """Many renders in one batch (prune's): one load and one write, and every render hits the
    next time, more renders than MAX_ENTRIES too (the cache keeps what a batch used: prune with
    1,000 projects missed all but 64 every time); outside a batch each miss is written at once."""
    import envman.state as S

    loads, writes = [], []
    real_load, real_write = rendercache._load, S.atomic_write
    monkeypatch.setattr(rendercache, "_load", lambda path: loads.append(path) or real_load(path))
    monkeypatch.setattr(S, "atomic_write", lambda path, text: writes.append(path) or real_write(path, text))
    plans = [notebook_plan(BASE, f"jupyterlab=={i}") for i in range(renders)]
    for _ in range(2):
        with rendercache.batched():
            texts = [render_dockerfile(p) for p in plans]
            with rendercache.batched():  # nested: still the one batch
                assert render_dockerfile(plans[0]) == texts[0]
        assert texts == [fresh(p) for p in plans]
    assert len(loads) == 2 and len(writes) == 1  # the second batch hit every render: nothing to write
    assert len(counted) == renders
    render_dockerfile(notebook_plan(BASE, "jupyterlab==outside"))
    assert len(writes) == 2


HIT_SCRIPT = """
import sys
from pathlib import Path
from envman.project.file import load_project
from envman.project.image import project_image_ref
p = load_project(Path(sys.argv[1]))
print(project_image_ref(p, "torch-2.4.1-cuda12.4-py3.10", "sha256:" + "c" * 64))
print("jinja2" in sys.modules)
print("envman.render.sections" in sys.modules)
"""


def test_a_run_path_hit_does_not_import_jinja2(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "envman.toml").write_text('stack = "torch-2.4"\nname = "demo"\napt = ["git"]\n'
                                      'requirements = ["einops==0.8.0"]\n')
    env = {**os.environ, "ENVMAN_CACHE_DIR": str(tmp_path / "cache"), "ENVMAN_STATE_DIR": str(tmp_path / "state"),
           "ENVMAN_CONFIG_DIR": str(tmp_path / "config")}

    def run() -> list[str]:
        out = subprocess.run([sys.executable, "-c", HIT_SCRIPT, str(root)], env=env, capture_output=True,
                             text=True, check=True)
        return out.stdout.split()

    miss, hit = run(), run()
    assert miss[1:] == ["True", "True"] and hit[1:] == ["False", "False"]  # a hit builds no plan either
    assert miss[0] == hit[0]
    (tmp_path / "cache" / rendercache.RENDER_CACHE).unlink()
    assert run() == miss  # the same tag without the cache


def test_envman_clean_removes_the_render_cache(tmp_path, monkeypatch):
    from envman.run.clean import apply, plan as clean_plan

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    render_dockerfile(plan())
    path = Path(rendercache.cache_path())
    (path.parent / "mine.txt").write_text("keep")
    p = clean_plan()
    assert path in p.paths
    apply(p)
    assert not path.exists() and (path.parent / "mine.txt").exists()


# --- the inputs key: a project's text found from its values, without building its plan ---------

def inputs(**kw) -> dict:
    values = dict(name="demo", stack_name="torch-2.4.1-cuda12.4-py3.10", base_image_id=BASE, apt=["git"],
                  requirements=True, locked=False, report_path="/opt/envman/project/report.json", where="envman.toml")
    values.update(kw)
    return values


@pytest.mark.parametrize("change", [dict(name="demo2"), dict(stack_name="torch-2.5.1-cuda12.4-py3.10"),
                                    dict(base_image_id="sha256:" + "d" * 64), dict(apt=[]), dict(apt=["git", "curl"]),
                                    dict(apt=["curl", "git"]), dict(requirements=False), dict(locked=True),
                                    dict(report_path="/r.json"), dict(where="other/envman.toml")], ids=str)
def test_every_value_a_project_plan_is_built_from_is_in_its_inputs_key(change):
    root = str(templates_dir())
    before = rendercache.inputs_key("project_plan", "project.Dockerfile.j2", inputs(), root)
    after = rendercache.inputs_key("project_plan", "project.Dockerfile.j2", inputs(**change), root)
    assert before is not None and after is not None and before != after


def test_the_inputs_key_is_not_a_plan_key_and_names_its_builder():
    root = str(templates_dir())
    a = rendercache.inputs_key("project_plan", "project.Dockerfile.j2", inputs(), root)
    assert a != rendercache.inputs_key("notebook_plan", "project.Dockerfile.j2", inputs(), root)
    assert a != rendercache.render_key(plan(apt=("git",), locked=False), root)
    assert rendercache.inputs_key("stack_plan", "Dockerfile.j2", inputs(), root) is None  # only cached templates
    assert rendercache.inputs_key("project_plan", "project.Dockerfile.j2", {"x": object()}, root) is None


def _package_copy(tmp_path: Path) -> Path:
    """A copy of the modules the inputs key reads, laid out as in the package; rendercache's
    ``__file__`` is pointed into it."""
    package = Path(rendercache.__file__).parent.parent
    copy = tmp_path / "envman"
    for name in (*rendercache.PLAN_MODULES, *(f"render/{m}" for m in rendercache.LAYOUT_MODULES)):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(package / name, copy / name)
    return copy


@pytest.mark.parametrize("name", rendercache.PLAN_MODULES)
def test_a_changed_byte_in_any_module_that_builds_the_plan_is_a_miss(tmp_path, monkeypatch, name):
    """The inputs key stands for a plan nobody built: a changed line of the code that builds it
    (a new step, a pattern that now refuses a name) must not serve the old text."""
    copy = _package_copy(tmp_path)
    monkeypatch.setattr(rendercache, "__file__", str(copy / "render" / "rendercache.py"))
    before = rendercache.inputs_key("project_plan", "project.Dockerfile.j2", inputs(), str(templates_dir()))
    with open(copy / name, "ab") as fh:
        fh.write(b"\n")
    after = rendercache.inputs_key("project_plan", "project.Dockerfile.j2", inputs(), str(templates_dir()))
    assert before is not None and after is not None and before != after
    (copy / name).unlink()
    assert rendercache.inputs_key("project_plan", "project.Dockerfile.j2", inputs(), str(templates_dir())) is None


def test_the_plan_modules_are_every_module_importing_the_plan_builder_loads():
    """PLAN_MODULES, with LAYOUT_MODULES, names the file of every envman module that importing
    envman.render.layerplan (the project plan's builder) loads, in a fresh interpreter."""
    code = ("import sys, envman.render.layerplan\n"
            "print('\\n'.join(m.__file__ for n, m in sys.modules.items() if n.split('.')[0] == 'envman'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    package = Path(rendercache.__file__).parent.parent
    loaded = {Path(f).relative_to(package).as_posix() for f in out}
    named = set(rendercache.PLAN_MODULES) | {f"render/{m}" for m in rendercache.LAYOUT_MODULES}
    assert loaded <= named, sorted(loaded - named)


def test_an_inputs_hit_is_the_text_the_plan_renders_to(tmp_path):
    """project_dockerfile's text from the inputs key is byte-identical to a render of the plan,
    for a project with and without apt packages and requirements, locked or not."""
    from envman.project.file import load_project
    from envman.project.image import project_dockerfile
    from envman.project.lock import REPORT_PATH

    for i, (apt, reqs) in enumerate([("", ""), ('apt = ["git", "curl"]\n', 'requirements = ["six==1.17.0"]\n')]):
        root = tmp_path / f"p{i}"
        root.mkdir()
        (root / "envman.toml").write_text(f'stack = "torch-2.4"\nname = "demo{i}"\n{apt}{reqs}')
        project = load_project(root)
        for lock in (None, object()):
            if lock is not None and not reqs:
                continue
            first = project_dockerfile(project, "torch-2.4.1-cuda12.4-py3.10", BASE, lock)  # type: ignore[arg-type]
            key = rendercache.inputs_key("project_plan", "project.Dockerfile.j2", {
                "name": project.name, "stack_name": "torch-2.4.1-cuda12.4-py3.10", "base_image_id": BASE,
                "apt": list(project.apt), "requirements": bool(reqs), "locked": lock is not None,
                "report_path": REPORT_PATH, "where": str(project.file)}, str(templates_dir()))
            assert key is not None and rendercache.lookup(key) == first
            again = project_dockerfile(project, "torch-2.4.1-cuda12.4-py3.10", BASE, lock)  # type: ignore[arg-type]
            assert again == first == fresh(project_plan(project.name, "torch-2.4.1-cuda12.4-py3.10", BASE, apt=project.apt,
                                                        requirements=bool(reqs), locked=lock is not None,
                                                        report_path=REPORT_PATH, where=str(project.file)))


def test_a_project_with_network_settings_is_never_found_by_its_inputs(monkeypatch):
    from envman.project.image import project_dockerfile

    asked = []
    monkeypatch.setattr(rendercache, "inputs_key", lambda *a, **k: asked.append(a))
    project = type("P", (), {"name": "demo", "apt": (), "requirements": "", "file": Path("envman.toml")})()
    project_dockerfile(project, "torch-2.4.1-cuda12.4-py3.10", BASE, None,  # type: ignore[arg-type]
                       RenderOptions(pip_index="https://pypi.example.org/simple"))
    assert asked == []
