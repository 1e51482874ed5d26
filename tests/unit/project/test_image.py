"""The project image's Dockerfile and context (and the notebook layer's), pinned to the exact
bytes envman wrote before those Dockerfiles moved into the template set. Their tags are hashes of
that content, so one changed byte would rebuild every user's project image: these cases must never
change silently.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envman.project.file import load_project
from envman.project.image import project_context, project_image_hash, project_image_ref
from envman.project.lock import Pin, make_lock, write_lock

BASE = "sha256:" + "c" * 64
STACK = "torch-2.4.1-cuda12.4-py3.10"
H1, H2 = "a" * 64, "0123456789abcdef" * 4


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


def make_project(tmp_path: Path, toml: str, req: str | None, lock: bool):
    root = tmp_path / "p"
    root.mkdir()
    (root / "envman.toml").write_text('stack = "torch-2.4"\nname = "demo"\n' + toml)
    if req is not None:
        (root / "requirements.txt").write_text(req)
    project = load_project(root)
    if lock:
        pins = [Pin("rich", "13.7.1", H2), Pin("markdown-it-py", "3.0.0", H1)]
        write_lock(root, make_lock(STACK, BASE, project.requirements, pins))
    return project


#: (envman.toml lines, requirements.txt or None, write a matching lock) per case.
CASES = {
    "apt-only": ('apt = ["zlib1g-dev", "ffmpeg"]\n', None, False),
    "requirements": ('requirements = "requirements.txt"\n', "einops==0.8.0\nrich>=13\n", False),
    "requirements-lock": ('requirements = "requirements.txt"\n', "rich>=13\n", True),
    "apt-requirements-lock": ('requirements = "requirements.txt"\napt = ["libsndfile1"]\n', "rich>=13\n", True),
    "apt-inline-requirements": ('requirements = ["einops==0.8.0"]\napt = ["git", "curl=7.81.0-1ubuntu1.16"]\n', None, False),
}

#: The Dockerfile of each case, byte for byte, as envman wrote it before the template.
DOCKERFILES = {
    'apt-only': (
        '# envman project image for demo: stack torch-2.4.1-cuda12.4-py3.10 (envman/torch-2.4.1-cuda12.4-py3.10:latest). Generated.\n'
        'FROM sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\n'
        'USER root\n'
        'RUN apt-get update \\\n'
        ' && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ffmpeg zlib1g-dev \\\n'
        ' && rm -rf /var/lib/apt/lists/*\n'
    ),
    'requirements': (
        '# envman project image for demo: stack torch-2.4.1-cuda12.4-py3.10 (envman/torch-2.4.1-cuda12.4-py3.10:latest). Generated.\n'
        'FROM sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\n'
        'USER root\n'
        'COPY requirements.txt /opt/envman/project/requirements.txt\n'
        'RUN /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check --report /opt/envman/project/pip-report.json -r /opt/envman/project/requirements.txt\n'
    ),
    'requirements-lock': (
        '# envman project image for demo: stack torch-2.4.1-cuda12.4-py3.10 (envman/torch-2.4.1-cuda12.4-py3.10:latest). Generated.\n'
        'FROM sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\n'
        'USER root\n'
        'COPY requirements.txt envman.lock.txt lockcheck.py /opt/envman/project/\n'
        'RUN /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check --require-hashes -r /opt/envman/project/envman.lock.txt \\\n'
        ' && /opt/venv/bin/python /opt/envman/project/lockcheck.py /opt/envman/project/requirements.txt /opt/envman/project/envman.lock.txt\n'
    ),
    'apt-requirements-lock': (
        '# envman project image for demo: stack torch-2.4.1-cuda12.4-py3.10 (envman/torch-2.4.1-cuda12.4-py3.10:latest). Generated.\n'
        'FROM sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\n'
        'USER root\n'
        'RUN apt-get update \\\n'
        ' && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libsndfile1 \\\n'
        ' && rm -rf /var/lib/apt/lists/*\n'
        'COPY requirements.txt envman.lock.txt lockcheck.py /opt/envman/project/\n'
        'RUN /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check --require-hashes -r /opt/envman/project/envman.lock.txt \\\n'
        ' && /opt/venv/bin/python /opt/envman/project/lockcheck.py /opt/envman/project/requirements.txt /opt/envman/project/envman.lock.txt\n'
    ),
    'apt-inline-requirements': (
        '# envman project image for demo: stack torch-2.4.1-cuda12.4-py3.10 (envman/torch-2.4.1-cuda12.4-py3.10:latest). Generated.\n'
        'FROM sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\n'
        'USER root\n'
        'RUN apt-get update \\\n'
        ' && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends curl=7.81.0-1ubuntu1.16 git \\\n'
        ' && rm -rf /var/lib/apt/lists/*\n'
        'COPY requirements.txt /opt/envman/project/requirements.txt\n'
        'RUN /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check --report /opt/envman/project/pip-report.json -r /opt/envman/project/requirements.txt\n'
    ),
}

#: The context's files and the content hash the image tag is cut from.
CONTEXTS = {
    'apt-only': (('Dockerfile',), '4b75b4981ffac6de91184bb76e56a98311288b35689393911a94fb819fe43305'),
    'requirements': (('Dockerfile', 'requirements.txt'), '442e63e2718617eaf8c52d0bc9a5d23b74622050ab8f495fdc52aeb4e3c9b14f'),
    'requirements-lock': (('Dockerfile', 'envman.lock.txt', 'lockcheck.py', 'requirements.txt'), 'c03275989bcef02b7aeae6fde2db51682fcc63fb700a1700d9a5024ff668c14b'),
    'apt-requirements-lock': (('Dockerfile', 'envman.lock.txt', 'lockcheck.py', 'requirements.txt'), '3fd149ace5cb8febef685a5babbf3101b8d51a2cdfb1d53eaaef444e195869eb'),
    'apt-inline-requirements': (('Dockerfile', 'requirements.txt'), '9c748aee2dd3bbb8835d243775a9e46c38ec1ceac564b100bccf289160e8e792'),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_project_dockerfile_bytes_are_pinned(tmp_path, case):
    project = make_project(tmp_path, *CASES[case])
    files = project_context(project, STACK, BASE)
    assert files["Dockerfile"].decode() == DOCKERFILES[case]


@pytest.mark.parametrize("case", sorted(CASES))
def test_project_context_and_tag_are_pinned(tmp_path, case):
    project = make_project(tmp_path, *CASES[case])
    names, digest = CONTEXTS[case]
    files = project_context(project, STACK, BASE)
    assert tuple(sorted(files)) == names
    assert project_image_hash(files) == digest
    assert project_image_ref(project, STACK, BASE) == f"envman/project-{project.identity}:{digest[:16]}"


def test_relock_drops_the_lock_and_installs_with_a_report(tmp_path):
    project = make_project(tmp_path, *CASES["apt-requirements-lock"])
    relocked = project_context(project, STACK, BASE, relock=True)
    assert sorted(relocked) == ["Dockerfile", "requirements.txt"]
    expected = DOCKERFILES["apt-requirements-lock"].split("COPY ")[0] + (
        "COPY requirements.txt /opt/envman/project/requirements.txt\n"
        "RUN /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check "
        "--report /opt/envman/project/pip-report.json -r /opt/envman/project/requirements.txt\n")
    assert relocked["Dockerfile"].decode() == expected


@pytest.mark.parametrize("toml", [
    'name = "demo\\n"\n',
    'apt = ["curl\\n"]\n',
    '[environment]\n"KEY\\n" = "x"\n',
])
def test_a_trailing_newline_never_passes_the_project_file_check(tmp_path, toml):
    """``$`` in ``re.match`` accepts a trailing newline; in a project image's Dockerfile it would
    end the line (a name in the title comment, a package in the apt step)."""
    from envman.errors import UserError

    root = tmp_path / "p"
    root.mkdir()
    (root / "envman.toml").write_text('stack = "torch-2.4"\n' + toml)
    with pytest.raises(UserError) as err:
        load_project(root)
    assert "\n" not in err.value.what


#: The notebook layer's Dockerfile and tag, as envman wrote them before the template.
NOTEBOOK = {
    "sha256:" + "a" * 64: "envman/notebook-demo:27f0caa9ce34e1f2",
    "sha256:" + "0123456789abcdef" * 4: "envman/notebook-demo:beadf17dda8cad76",
}


@pytest.mark.parametrize("base", sorted(NOTEBOOK))
def test_notebook_layer_bytes_and_tag_are_pinned(base):
    from envman.run.notebook import notebook_dockerfile, notebook_image_ref

    assert notebook_dockerfile(base) == (
        "# envman notebook layer: JupyterLab on top of the project's image. Generated.\n"
        f"FROM {base}\n"
        "USER root\n"
        'RUN /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check "jupyterlab>=4.2,<5"\n'
    )
    assert notebook_image_ref("demo", base) == NOTEBOOK[base]


def test_a_lock_that_cannot_be_written_is_told_to_the_caller_not_printed(tmp_path, monkeypatch, capfd):
    import json

    from envman.engine.api import RunResult
    from envman.project import image as I
    from tests.support.fake_engine import FakeEngine

    project = make_project(tmp_path, "", "rich\n", lock=False)
    report = {"install": [{"metadata": {"name": "rich", "version": "13.7.1"},
                           "download_info": {"archive_info": {"hash": f"sha256={H2}"}}}]}
    engine = FakeEngine(on_run=lambda image, cmd, kw: RunResult(0, json.dumps(report), ""))
    engine.add_image("envman/project-x:built")

    def read_only(root, lock):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(I, "write_lock", read_only, raising=False)
    monkeypatch.setattr("envman.project.lock.write_lock", read_only)
    told: list[str] = []
    ref = I.record_lock(engine, project, STACK, BASE, "envman/project-x:built", told.append)
    assert ref == "envman/project-x:built"
    assert engine.inspect_image(I.project_image_ref(project, STACK, BASE)) is None  # not tagged under a lock's ref
    assert told == [f"envman: warning: cannot write {project.root / 'envman.lock'}: Permission denied "
                    "(the next build resolves the requirements again)"]
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert I.record_lock(engine, project, STACK, BASE, "envman/project-x:built") == "envman/project-x:built"
