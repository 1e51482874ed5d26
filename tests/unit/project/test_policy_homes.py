"""The homes of other people in the never-mount policy: what they hold is resolved only when a
mount reaches into one, and every verdict and message stays what resolving everything at once
gives (issue 26: costs that do not grow with the accounts of a shared server; issue 23: by rule).

The reference below is the policy as it was before: every protected path of every home resolved
when the policy is made, and each mount compared with each of them in order."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st

from envman.project import policy
from envman.project.aliases import path_chain
from envman.project.policy import Protected

ROOT = Path(__file__).resolve().parents[3]
#: A mount table with nothing shared: one file system of a type that reports its own identities.
PLAIN = [("/", "/", "8:1", "ext4")]


# --------------------------------------------------------------------------- the reference


@dataclass(frozen=True)
class _RefEntry:
    p: Protected
    real: str
    ident: tuple[int, int] | None
    chain: frozenset[str]
    chain_ids: frozenset[tuple[int, int]]


def _flat(protected: list[Protected]) -> list[Protected]:
    """Each protected path followed by the paths it holds, as separate entries."""
    return [q for p in protected for q in (Protected(p.path, p.why, p.contents), *p.within())]


def _ref_entries(protected: list[Protected]) -> list[_RefEntry]:
    entries = []
    for p in protected:
        real = os.path.realpath(p.path)
        chain = path_chain(real)
        entries.append(_RefEntry(p, real, policy._ident(real), frozenset(chain),
                                 frozenset(i for i in map(policy._ident, chain) if i is not None)))
    return entries


def _ref_reason(source: str, entries: list[_RefEntry], eager: policy.Policy) -> str | None:
    """The verdict as the policy gave it when every path was resolved at once (``eager``: a policy
    of the same paths, for what a mounted folder holds)."""
    real = os.path.realpath(source)
    name = os.path.basename(real)
    try:
        st_ = os.stat(real)
    except (OSError, ValueError):
        st_ = None
    if st_ is not None and stat.S_ISSOCK(st_.st_mode):
        return f"{real} is a Unix socket (container engine sockets give root on the host)"
    if name.endswith(".sock"):
        return f"{real} is named like a container engine socket"
    chain = path_chain(real)
    chain_set = frozenset(chain)
    chain_ids = {i for i in map(policy._ident, chain) if i is not None}
    own = (st_.st_dev, st_.st_ino) if st_ is not None else None
    for e in entries:
        p = e.p
        if e.real == real or (e.ident is not None and e.ident == own):
            return f"{real} is {p.why} ({p.path})"
        if p.contents and (e.real in chain_set or (e.ident is not None and e.ident in chain_ids)):
            return f"{real} lies inside {p.why} ({p.path})"
        if real in e.chain or (own is not None and own in e.chain_ids):
            return f"{real} contains {p.why} ({p.path})"
    inside = policy._inside_folder(real, st_, eager) if st_ is not None else None
    return f"{real} {inside}" if inside else None


def _both(paths: list[str]) -> list[tuple[str, str | None, str | None]]:
    """(path, the policy's verdict, the reference's) for each path, with one policy of each."""
    protected = policy.protected_paths()
    flat = _flat(protected)
    pol = policy.Policy.of(protected)
    ref, eager = _ref_entries(flat), policy.Policy.of(flat)
    return [(p, policy.forbidden_reason(p, pol), _ref_reason(p, ref, eager)) for p in paths]


def _unprivileged(fn):
    """``fn()``, run by a user that file modes hold back: as nobody in a child process when the
    tests run as root (for whom a folder with mode 000 can still be read)."""
    if os.geteuid() != 0:
        return fn()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            out = json.dumps({"ok": fn()})
        except BaseException:
            out = json.dumps({"error": traceback.format_exc()})
        with os.fdopen(w, "w") as f:
            f.write(out)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    got = json.loads(data)
    if "error" in got:
        raise AssertionError(got["error"])
    return [tuple(x) if isinstance(x, list) else x for x in got["ok"]]


@pytest.fixture
def world(monkeypatch):
    """A folder everyone may search (the tests' own temporary folder is its owner's alone), with
    your home, three other homes, config and state in it; the mount table has nothing shared."""
    top = Path(tempfile.mkdtemp(prefix="envman-homes-"))
    top.chmod(0o755)
    me = top / "homes" / "me"
    me.mkdir(parents=True)
    (top / "homes").chmod(0o755)
    me.chmod(0o755)
    monkeypatch.setenv("HOME", str(me))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(top / "cfg"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(top / "state"))
    for var in ("XDG_RUNTIME_DIR", "SSH_AUTH_SOCK", "DOCKER_HOST", "CONTAINER_HOST"):
        monkeypatch.delenv(var, raising=False)
    homes = [str(me)] + [str(top / "homes" / f"u{i}") for i in range(3)]
    monkeypatch.setattr(policy, "_homes", lambda: sorted(homes))
    monkeypatch.setattr(policy, "mount_table", lambda: PLAIN)
    policy._CACHE.clear()
    yield top
    policy._CACHE.clear()
    for d, dirs, _ in os.walk(top):
        for x in dirs:
            p = os.path.join(d, x)
            if not os.path.islink(p):
                os.chmod(p, 0o755)
    shutil.rmtree(top, ignore_errors=True)


def _tree_paths(top: Path) -> list[str]:
    """Every path in the tree, a path inside each, and each parent of ``top``."""
    out = set(path_chain(str(top)))
    for d, dirs, files in os.walk(top):
        for x in [*dirs, *files]:
            p = os.path.join(d, x)
            out.update((p, p + "/x"))
    return sorted(out)


# --------------------------------------------------------------------------- every verdict as before

#: Names a tree is made of: in homes (protected ones, the folders on their way, ordinary ones,
#: one spelled in capitals) and outside them.
HOME_PARTS = [".ssh", ".config", ".config/fish", ".config/gh", ".local", ".local/share", ".local/share/fish",
              ".cache", ".cache/huggingface", ".cache/huggingface/token", ".bashrc", ".git-credentials", "data",
              "data/x", "bin", ".SSH", ".config/FISH"]
OUT_PARTS = ["out", "out/keys", "out/keys/deep", "out/file"]
WHERE = st.sampled_from(["me", "u0", "u1", "u2"])
PLACE = st.one_of(st.tuples(st.just("homes"), WHERE, st.sampled_from(HOME_PARTS)),
                  st.tuples(st.just(""), st.just(""), st.sampled_from(OUT_PARTS)))
OPS = st.lists(st.tuples(st.sampled_from(["dir", "file", "link-abs", "link-rel", "hardlink", "mode"]), PLACE, PLACE,
                         st.sampled_from([0o755, 0o711, 0o700, 0o000])), max_size=14)


def _at(top: Path, place: tuple[str, str, str]) -> Path:
    kind, who, part = place
    return top / kind / who / part if kind else top / part


def _build(top: Path, ops) -> None:
    for home in ("u0", "u1"):  # two of the other homes exist, the third does not
        (top / "homes" / home).mkdir(exist_ok=True)
    for op, place, other, mode in ops:
        path, target = _at(top, place), _at(top, other)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if op == "dir":
                path.mkdir(exist_ok=True)
            elif op == "file":
                path.write_text("secret")
            elif op == "link-abs":
                path.symlink_to(target)  # dangling, a loop or a link to a link: all allowed
            elif op == "link-rel":
                path.symlink_to(os.path.relpath(target, path.parent))
            elif op == "hardlink" and target.is_file() and not target.is_symlink():
                os.link(target, path)
            elif op == "mode" and path.is_dir() and not path.is_symlink():
                path.chmod(mode)
        except OSError:
            continue  # the place is taken by something else: keep what is there


def _op(op, where, part, to=("", "", "out/keys"), mode=0o755):
    return (op, ("homes", where, part) if where else ("", "", part), to, mode)


#: Under mutation testing (scripts/mutation.py) each mutant runs the property's fixed examples and
#: twenty generated ones, the same each time, without shrinking a failure.
MUTATION = "MUTANT_UNDER_TEST" in os.environ


@settings(max_examples=20 if MUTATION else 60, deadline=None, derandomize=MUTATION, database=None if MUTATION else settings().database,
          phases=(Phase.explicit, Phase.generate) if MUTATION else tuple(Phase),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
@example(ops=[_op("dir", "u0", ".ssh"), _op("link-abs", "me", ".ssh", ("homes", "u0", ".ssh"))])
@example(ops=[_op("dir", "u0", ".config"), _op("link-rel", "u0", ".config/zsh", ("homes", "u0", ".config/zsh.d"))])
@example(ops=[_op("file", "u0", ".git-credentials"), _op("hardlink", "", "out/file", ("homes", "u0", ".git-credentials"))])
@example(ops=[_op("dir", "", "out/keys"), _op("link-abs", "u0", ".ssh")])
@example(ops=[_op("dir", "", "out/keys/deep"), _op("link-rel", "u1", ".config")])
@example(ops=[_op("dir", "u0", ".config"), _op("link-abs", "u0", ".config/fish"), _op("mode", "u0", ".config", mode=0o711)])
@example(ops=[_op("dir", "u1", ".local/share"), _op("link-rel", "u1", ".local/share/fish", ("homes", "u1", "data")),
              _op("mode", "u1", "", mode=0o700)])
@example(ops=[_op("link-abs", "u0", ".ssh", ("homes", "u1", ".ssh")), _op("link-abs", "u1", ".ssh", ("homes", "u0", ".ssh"))])
@example(ops=[_op("file", "me", ".netrc"), _op("hardlink", "u0", "data/x", ("homes", "me", ".netrc"))])
def test_every_verdict_is_the_one_resolving_every_home_at_once_gives(world, ops):
    """Random trees of homes: symbolic links inside and out of them (absolute, relative, dangling,
    loops), hard links, nested protected names, folders that cannot be listed or searched. For
    every path in the tree, a path inside each, and each parent: the very same verdict."""
    top = world / "t"
    shutil.rmtree(top, ignore_errors=True)
    top.mkdir(mode=0o755)
    top.chmod(0o755)
    homes = [str(top / "homes" / h) for h in ("me", "u0", "u1", "u2")]
    (top / "homes" / "me").mkdir(parents=True)
    for p in (top / "homes", top / "homes" / "me"):
        p.chmod(0o755)
    os.environ["HOME"] = homes[0]
    policy._homes = lambda: sorted(homes)  # type: ignore[assignment]  # restored by the fixture's monkeypatch
    _build(top, ops)
    paths = _tree_paths(top)
    try:
        # as you (root, when the tests run as root: modes hold nothing back) and as someone else
        results = _both(paths) + (_unprivileged(lambda: _both(paths)) if os.geteuid() == 0 else [])
        for path, got, want in results:
            assert got == want, path
    finally:
        for d, dirs, _ in os.walk(top):
            for x in dirs:
                p = os.path.join(d, x)
                if not os.path.islink(p):
                    os.chmod(p, 0o755)


# --------------------------------------------------------------------------- rules


def _other(world: Path, name: str = "u0") -> Path:
    h = world / "homes" / name
    h.mkdir(exist_ok=True)
    h.chmod(0o755)
    return h


def test_a_symbolic_link_out_of_another_home_protects_where_it_leads(world):
    keys = world / "data" / "keys"
    keys.mkdir(parents=True)
    fish = world / "data" / "fish"
    fish.mkdir()
    h = _other(world)
    (h / ".ssh").symlink_to(keys)
    (h / ".config").mkdir()
    (h / ".config" / "fish").symlink_to("../../../data/fish")
    pol = policy.Policy.of(policy.protected_paths())
    assert policy.forbidden_reason(str(keys), pol) == f"{keys} is a credentials file or folder ({h}/.ssh)"
    assert policy.forbidden_reason(str(keys / "id"), pol) == f"{keys}/id lies inside a credentials file or folder ({h}/.ssh)"
    assert policy.forbidden_reason(str(world / "data"), pol) == (
        f"{world}/data contains a file a shell or a tool runs at start-up ({h}/.config/fish)")
    assert policy.forbidden_reason(str(fish), pol) == f"{fish} is a file a shell or a tool runs at start-up ({h}/.config/fish)"
    assert all(g.made is None for g in pol.groups)  # found without resolving the rest of that home


def test_a_folder_on_the_way_that_is_a_link_protects_all_it_holds(world):
    cfg = world / "dotfiles" / "config"
    (cfg / "gh").mkdir(parents=True)
    h = _other(world)
    (h / ".config").symlink_to(cfg)
    pol = policy.Policy.of(policy.protected_paths())
    assert policy.forbidden_reason(str(cfg / "gh"), pol) == f"{cfg}/gh is a credentials file or folder ({h}/.config/gh)"
    assert policy.forbidden_reason(str(cfg / "nvim" / "x"), pol) == (
        f"{cfg}/nvim/x lies inside a file a shell or a tool runs at start-up ({h}/.config/nvim)")


def test_a_hard_link_to_a_file_in_another_home_is_refused(world):
    h = _other(world)
    (h / ".git-credentials").write_text("https://u:t@host\n")
    (world / "shared").mkdir()
    link = world / "shared" / "creds"
    os.link(h / ".git-credentials", link)
    pol = policy.Policy.of(policy.protected_paths())
    want = f"{link} is a credentials file or folder ({h}/.git-credentials)"
    assert policy.forbidden_reason(str(link), pol) == want
    assert policy.forbidden_reason(str(link / "x"), pol) == (  # a path under it: its parent is the file
        f"{link}/x lies inside a credentials file or folder ({h}/.git-credentials)")


def test_another_spelling_of_a_home_s_path_reaches_its_contents(world, monkeypatch):
    """On a file system that ignores case, another spelling of the home names the same folder:
    the mount's parent has the home's identity (simulated: this one heeds case)."""
    h = _other(world)
    (h / ".ssh").mkdir()
    spelled = world / "homes" / "U0"
    spelled.mkdir()
    (spelled / ".ssh").mkdir()
    real_ident = policy._ident
    monkeypatch.setattr(policy, "_ident", lambda p: real_ident(p.replace("/U0", "/u0")))
    [(_, got, want)] = _both([str(spelled / ".ssh")])
    assert got == want == f"{spelled}/.ssh lies inside a credentials file or folder ({h}/.ssh)"


@pytest.mark.parametrize("exists", [False, True])
def test_a_home_that_does_not_exist_or_is_empty_still_protects_its_names(world, exists):
    h = world / "homes" / "u2"
    if exists:
        _other(world, "u2")
    pol = policy.Policy.of(policy.protected_paths())
    assert policy.forbidden_reason(str(h), pol) == f"{h} is a home directory ({h})"
    assert policy.forbidden_reason(str(h / ".ssh"), pol) == f"{h}/.ssh is a credentials file or folder ({h}/.ssh)"
    assert policy.forbidden_reason(str(h / ".config" / "fish" / "x"), pol) == (
        f"{h}/.config/fish/x lies inside a file a shell or a tool runs at start-up ({h}/.config/fish)")
    assert policy.forbidden_reason(str(h / ".config"), pol) == (
        f"{h}/.config contains a file a shell or a tool runs at start-up ({h}/.config/zsh)")
    assert policy.forbidden_reason(str(h / "data"), pol) is None
    assert policy.forbidden_reason(str(world / "homes"), pol).startswith(f"{world}/homes contains a home directory")


@pytest.mark.parametrize("mode,listed", [(0o700, "lazy"), (0o711, "at once"), (0o755, "lazy")])
def test_a_home_you_cannot_list_is_made_at_once_when_you_may_search_it(world, mode, listed):
    """Mode 711: the names in it can be looked up (a link out of it followed) but not listed, so
    all of it is resolved with the policy; 700: nothing in it can be looked up by you."""
    h = _other(world)
    (world / "elsewhere").mkdir()
    (h / ".ssh").symlink_to(world / "elsewhere")
    h.chmod(mode)

    def check():
        protected = policy.protected_paths()
        pol = policy.Policy.of(protected)
        ref, eager = _ref_entries(_flat(protected)), policy.Policy.of(_flat(protected))
        made = [str(g.base.real) for g in pol.groups]
        return [made, *[(p, policy.forbidden_reason(p, pol), _ref_reason(p, ref, eager))
                        for p in (str(world / "elsewhere"), str(h / ".ssh"), str(world))]]

    made, *verdicts = _unprivileged(check)
    for path, got, want in [*verdicts, *check()[1:]]:
        assert got == want, path
    assert (str(h) in made) == (listed == "lazy")


def test_a_parent_that_cannot_be_looked_at_above_one_that_can_makes_every_home(world, monkeypatch):
    """Lookups refused by name (a security module) could hide another spelling: resolve all."""
    _other(world)
    (world / "a" / "b").mkdir(parents=True)
    real_ident = policy._ident
    monkeypatch.setattr(policy, "_ident", lambda p: None if p == str(world / "a") else real_ident(p))
    pol = policy.Policy.of(policy.protected_paths())
    assert policy.forbidden_reason(str(world / "a" / "b" / "c"), pol) is None
    assert all(g.made is not None for g in pol.groups)


def test_a_file_with_one_link_or_a_mount_refused_before_a_home_makes_nothing(world):
    h = _other(world)
    (world / "f").write_text("x")
    (h / ".profile").symlink_to(h / "data" / "profile")  # an early path of that home, made with the policy
    pol = policy.Policy.of(policy.protected_paths())
    assert policy.forbidden_reason(str(world / "f"), pol) is None
    assert policy.forbidden_reason(str(h / "data" / "profile"), pol) == (
        f"{h}/data/profile is a file a shell or a tool runs at start-up ({h}/.profile)")
    assert all(g.made is None for g in pol.groups)


def test_a_home_in_a_place_a_second_mount_shows_again_is_made_at_once(world, monkeypatch):
    h = _other(world)
    monkeypatch.setattr(policy, "mount_table", lambda: [*PLAIN, ("/mnt/keys", f"{h}/.ssh", "8:1", "ext4")])
    pol = policy.Policy.of(policy.protected_paths())
    assert str(h) not in [g.base.real for g in pol.groups]
    assert f"{h}/.ssh" in [e.real for e in pol.entries]
    assert str(world / "homes" / "u1") in [g.base.real for g in pol.groups]  # another home still waits


def test_a_mount_under_a_file_system_that_reports_other_identities_makes_every_home(world, monkeypatch):
    _other(world)
    (world / "ov").mkdir()
    monkeypatch.setattr(policy, "mount_table", lambda: [*PLAIN, (str(world / "ov"), "/", "0:99", "overlay")])
    pol = policy.Policy.of(policy.protected_paths())
    assert pol.groups and all(g.made is None for g in pol.groups)
    assert policy.forbidden_reason(str(world / "ov" / "f"), pol) is None
    assert all(g.made is not None for g in pol.groups)


def test_without_a_mount_table_every_home_is_made_at_once(world, monkeypatch):
    _other(world)
    monkeypatch.setattr(policy, "mount_table", lambda: None)
    assert policy.Policy.of(policy.protected_paths()).groups == ()


def test_your_own_home_and_homes_around_it_are_made_at_once(world, monkeypatch):
    """Your home's protected folders are scanned for the inodes of their files (hard links): a
    home inside yours, or holding yours, is made with it."""
    me = Path(os.environ["HOME"])
    inner = me / "guest"
    inner.mkdir()
    homes = [str(me), str(inner), str(world / "homes"), str(world / "homes" / "u0")]
    monkeypatch.setattr(policy, "_homes", lambda: sorted(homes))
    pol = policy.Policy.of(policy.protected_paths())
    assert [g.base.real for g in pol.groups] == [str(world / "homes" / "u0")]


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_bind_mount_of_another_home_s_folder_is_refused_by_its_identity(world):
    """A real bind mount, in a mount namespace of its own (root, or a user namespace, needed)."""
    h = _other(world)
    (h / ".config" / "fish").mkdir(parents=True)
    (h / ".ssh").mkdir()
    (world / "mnt" / "cfg").mkdir(parents=True)
    (world / "mnt" / "keys").mkdir()
    code = (
        "import json, sys\nfrom envman.project import policy\nfrom tests.unit.project.test_policy_homes import _both\n"
        f"policy._homes = lambda: sorted({[os.environ['HOME'], str(h)]!r})\n"
        "pol = policy.Policy.of(policy.protected_paths())\n"
        "print(json.dumps([[g.base.real for g in pol.groups], _both(sys.argv[1:])]))\n"
    )
    script = (f"mount --bind {h}/.config {world}/mnt/cfg && mount --bind {h}/.ssh {world}/mnt/keys && "
              f'exec "$0" -c "$1" {world}/mnt/cfg/fish {world}/mnt/keys {world}/mnt/keys/id {world}/mnt')
    args = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        args[1:1] = ["--user", "--map-root-user"]
    done = subprocess.run([*args, "sh", "-c", script, sys.executable, code], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"no bind mounts here: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stderr
    groups, verdicts = json.loads(done.stdout)
    assert str(h) not in groups  # the mount table shows its folders again elsewhere: made at once
    for _, got, want in verdicts:
        assert got == want
    assert [got for _, got, _ in verdicts] == [
        f"{world}/mnt/cfg/fish is a file a shell or a tool runs at start-up ({h}/.config/fish)",
        f"{world}/mnt/keys is a credentials file or folder ({h}/.ssh)",
        f"{world}/mnt/keys/id lies inside a credentials file or folder ({h}/.ssh)",
        None,  # the folder holding the mounts is one of its own
    ]


def test_the_real_path_of_a_home_is_realpath_s(tmp_path):
    """Homes are resolved from their folder's real path with one look at each: the same answer
    as ``os.path.realpath`` for links, loops, missing steps and odd spellings."""
    (tmp_path / "home" / "real").mkdir(parents=True)
    (tmp_path / "home" / "file").write_text("x")
    (tmp_path / "home" / "link").symlink_to("real")
    (tmp_path / "home" / "dangling").symlink_to("nowhere/else")
    (tmp_path / "home" / "loop").symlink_to("loop")
    (tmp_path / "linked").symlink_to(tmp_path / "home")
    (tmp_path / "looped").symlink_to("looped")
    cases = [f"{top}/{name}" for top in (tmp_path / "home", tmp_path / "linked", tmp_path / "looped", tmp_path / "missing",
                                         tmp_path / "home" / "file")
             for name in ("real", "link", "dangling", "loop", "missing", ".", "..", "x/..")]
    cases += [f"/{tmp_path}/home/real", f"{tmp_path}/home/real/", "relative/home", "/", "//"]
    parents = policy._Parents()
    for path in cases:
        assert parents.real(path) == os.path.realpath(path), path
        assert parents.chain(os.path.realpath(path)) == path_chain(os.path.realpath(path))


# --------------------------------------------------------------------------- cost


def test_a_thousand_homes_cost_one_look_each_when_the_mount_is_outside_them(world, monkeypatch):
    """Counted, not timed: no path inside another home is looked up or resolved, each existing
    home is listed once, and no home's protected paths are made."""
    base = world / "many"
    homes = [os.environ["HOME"]] + [str(base / f"u{i}") for i in range(1000)]
    for i in range(0, 1000, 100):  # a tenth of them exist, with a few things in them
        h = base / f"u{i}"
        (h / ".ssh").mkdir(parents=True)
        (h / ".config" / "fish").mkdir(parents=True)
        (h / ".bashrc").write_text("x")
    monkeypatch.setattr(policy, "_homes", lambda: sorted(homes))
    project = world / "proj"
    (project / "data").mkdir(parents=True)
    looked: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        for name in ("stat", "lstat", "scandir"):
            real = getattr(os, name)
            mp.setattr(os, name, lambda p, *a, real=real, **k: looked.append(os.fspath(p)) or real(p, *a, **k))
        pol = policy.Policy.of(policy.protected_paths())
        for p in (project, project / "data", project / "missing"):
            assert policy.forbidden_reason(str(p), pol) is None
    inside = [p for p in looked if p.startswith(str(base) + "/") and p.count("/") > str(base).count("/") + 1]
    assert inside == [str(base / f"u{i}" / ".config") for i in range(0, 1000, 100)]  # a folder on the way, listed
    assert sum(p.startswith(str(base) + "/") for p in looked) <= 1000 * 4
    assert len(pol.groups) == 1000 and all(g.made is None for g in pol.groups)
    assert len(pol.entries) == len(policy.protected_paths()) + len(policy.HOME_INSIDE)  # your home's alone


def test_the_homes_are_yours_and_people_s_absolute_ones(monkeypatch):
    """uid 0 and the login range 1000–59999 are people; a home that is not an absolute path (a
    relative ``$HOME``, an empty field) names no folder to protect, wherever the process runs."""
    import pwd

    def entry(uid: int, home: str) -> pwd.struct_passwd:
        return pwd.struct_passwd((f"u{uid}", "x", uid, uid, "", home, "/bin/sh"))

    table = [entry(0, "/root"), entry(999, "/var/lib/sys"), entry(1000, "/home/first"), entry(59999, "/home/last"),
             entry(60000, "/home/past"), entry(1001, "/"), entry(1002, "/nonexistent"), entry(1003, "relative/home"),
             entry(1004, "")]
    monkeypatch.setattr(pwd, "getpwall", lambda: table)
    monkeypatch.setenv("HOME", "w/me")
    assert policy._homes() == ["/home/first", "/home/last", "/root"]
    monkeypatch.setenv("HOME", "/home/me")
    assert policy._homes() == ["/home/first", "/home/last", "/home/me", "/root"]


def test_homes_in_one_folder_cost_one_realpath_of_the_folder(tmp_path, monkeypatch):
    """Counted: the folder holding the homes is resolved once; a name in it that is no link (or
    does not exist) costs no ``realpath`` at all, a link one; what ``realpath`` refuses (a NUL
    byte) is refused the same way. Paths that are not plain absolute names take ``realpath``."""
    base = os.path.realpath(tmp_path)
    (tmp_path / "home").mkdir()
    for i in range(5):
        (tmp_path / "home" / f"u{i}").mkdir()
    (tmp_path / "home" / "link").symlink_to("u0")
    resolved: list[str] = []
    real_realpath = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda p, *a, **k: resolved.append(os.fspath(p)) or real_realpath(p, *a, **k))
    parents = policy._Parents()
    names = [f"u{i}" for i in range(5)] + ["missing"]
    assert [parents.real(f"{base}/home/{n}") for n in names] == [f"{base}/home/{n}" for n in names]
    assert resolved == [f"{base}/home"]
    resolved.clear()
    assert parents.real(f"{base}/home/link") == f"{base}/home/u0" and resolved == [f"{base}/home/link"]
    for odd in ("relative/u0", f"/{base}/home/u1", f"{base}/home/u1/", f"{base}/home/.", f"{base}/home/..",
                f"{base}/home/./u1", f"{base}//home/u1"):
        resolved.clear()
        assert parents.real(odd) == real_realpath(odd) and resolved == [odd], odd
    with pytest.raises(ValueError):
        parents.real(f"{base}/home/a\0b")


@pytest.mark.parametrize("path, folder, want", [
    ("/home/u", "/home/u", True), ("/home/u/.ssh", "/home/u", True), ("/home/user2", "/home/u", False),
    ("/home/user2/.ssh", "/home/u", False), ("/home/u/", "/home/u/", True), ("/home/u/x", "/home/u/", True),
    ("/x", "/", True), ("/", "/", True), ("/home", "/home/u", False),
])
def test_at_or_in_is_the_folder_or_below_it_never_a_name_that_starts_alike(path, folder, want):
    assert policy._at_or_in(path, folder) is want
