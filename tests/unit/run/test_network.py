"""The network a run joins, by rule: never the engine's default bridge, one per user and project
(never shared with another), made with envman's labels and joined only while it carries them;
``network = "none"`` gives none; a full address pool frees only this user's idle networks."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from envman import labels as L
from envman.engine.api import NetworkInfo
from envman.errors import EngineError, UserError
from envman.project.file import NETWORK_MODES, Port, check_network, load_project
from envman.project.settings import CliOverrides, UserConfig, merge_settings
from envman.run import network as N
from envman.run.plan import RunPlan, docker_argv, network_name
from tests.support.refusal import refusal


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


def plan(**kw: Any) -> RunPlan:
    base: dict[str, Any] = dict(image="sha256:" + "1" * 64, project="demo", stack="s", root="/w/demo", home="/h/demo",
                                uid=1000, gid=1000)
    base.update(kw)
    return RunPlan(**base)


def _networks(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, w in enumerate(argv) if w == "--network"] + [w for w in argv if w.startswith("--net=")
                                                                             or w.startswith("--network=")]


# --------------------------------------------------------------------------- the run plan

PLANS = {
    "least": {},
    "ports": {"ports": (Port(8888, 8888),)},
    "detached": {"detach": True, "container_name": "envman-1000-demo", "env_name": "demo"},
    "podman": {"engine": "podman", "engine_url": "unix:///run/user/1000/podman/podman.sock", "rootless": True},
    "none": {"network": "none"},
    "other user": {"uid": 2000, "gid": 2000},
}


@pytest.mark.parametrize("case", sorted(PLANS))
def test_every_run_names_exactly_one_network_and_never_a_shared_one(case):
    p = plan(**PLANS[case])
    nets = _networks(docker_argv(p))
    assert len(nets) == 1
    assert nets[0] not in ("bridge", "default", "host", "podman") and not nets[0].startswith("container:")
    assert nets[0] == ("none" if p.network == "none" else network_name(p.uid, p.project, p.root))


_NAMES = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)
_ROOTS = st.from_regex(r"/[a-z0-9/]{1,30}", fullmatch=True)


@given(st.tuples(st.integers(0, 2**31 - 1), _NAMES, _ROOTS), st.tuples(st.integers(0, 2**31 - 1), _NAMES, _ROOTS))
@settings(max_examples=200, deadline=None)
def test_two_runs_share_a_network_exactly_when_user_project_and_root_are_the_same(a, b):
    na, nb = network_name(*a), network_name(*b)
    same = (a[0], a[1], os.path.realpath(a[2])) == (b[0], b[1], os.path.realpath(b[2]))
    assert (na == nb) == same
    assert re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+", na)  # a name Docker and Podman accept


def test_the_network_is_per_user_and_per_project():
    base = network_name(1000, "demo", "/w/demo")
    assert base == network_name(1000, "demo", "/w/demo")
    assert len({base, network_name(1001, "demo", "/w/demo"), network_name(1000, "demo2", "/w/demo"),
                network_name(1000, "demo", "/w/other/demo")}) == 4


# --------------------------------------------------------------------------- the project file and the command line

@pytest.mark.parametrize("value", NETWORK_MODES)
def test_each_network_mode_is_read(value):
    assert check_network(value, where="f") == value


@pytest.mark.parametrize("value", ["host", "bridge", "default", "container:db", "envman-1000-other-abc", "", "NONE",
                                   " none", 1, True, ["none"], {"mode": "none"}])
def test_any_other_network_is_refused_in_one_line(value):
    with pytest.raises(UserError) as e:
        check_network(value, where="envman.toml")
    assert "\n" not in str(e.value) and "key network" in str(e.value)


def _project(tmp_path, body=""):
    (tmp_path / "p").mkdir(exist_ok=True)
    (tmp_path / "p" / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cpu"\n' + body)
    return load_project(tmp_path / "p")


#: (the file's network, the command line's) -> the run's network
PRECEDENCE = {(f, c): (c or f or "project") for f in (None, *NETWORK_MODES) for c in (None, *NETWORK_MODES)}


@pytest.mark.parametrize("case", sorted(PRECEDENCE, key=str), ids=str)
def test_the_command_line_beats_the_file_beats_the_default(tmp_path, case):
    in_file, on_cli = case
    proj = _project(tmp_path, f'network = "{in_file}"\n' if in_file else "")
    s = merge_settings(proj, UserConfig(), CliOverrides(network=on_cli))
    assert s.network == PRECEDENCE[case]
    assert dict(s.origin)["network"] == ("cli" if on_cli else "project" if in_file else "default")


@pytest.mark.parametrize("where", ["file", "cli"])
def test_no_network_with_published_ports_is_refused(tmp_path, where):
    proj = _project(tmp_path, 'network = "none"\nports = [8888]\n' if where == "file" else "ports = [8888]\n")
    cli = CliOverrides(network="none" if where == "cli" else None)
    with pytest.raises(UserError, match="contradict") as e:
        merge_settings(proj, UserConfig(), cli)
    assert "\n" not in str(e.value)


def test_an_untrusted_file_may_ask_for_no_network(tmp_path):
    from envman.project.trust import trust_asks

    assert trust_asks(_project(tmp_path, 'network = "none"\n')) == []


# --------------------------------------------------------------------------- ensure_network

@dataclass
class Facts:
    """The network calls of DockerFacts, in memory."""

    nets: dict[str, NetworkInfo] = field(default_factory=dict)
    pool: int = 100  # how many more networks the engine has room for
    created: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def inspect_network(self, name):
        return self.nets.get(name)

    def create_network(self, name, labels):
        if name in self.nets:
            return None
        if self.pool <= 0:
            raise EngineError(f"docker network create {name}: could not find an available, non-overlapping IPv4 "
                              "address pool among the defaults to assign to the network")
        self.pool -= 1
        self.nets[name] = NetworkInfo(f"id-{name}", name, "bridge", dict(labels), 0, 10**9)
        self.created.append(name)
        return f"id-{name}"

    def list_networks(self, labels):
        return [n for n in self.nets.values() if all(n.labels.get(k) == v for k, v in labels.items())]

    def remove_network(self, name):
        if self.nets[name].containers:
            return False
        del self.nets[name]
        self.pool += 1
        self.removed.append(name)
        return True


def test_a_missing_network_is_made_with_envman_s_labels_then_joined():
    f, p = Facts(), plan()
    assert N.ensure_network(f, p) == f"id-{p.network_name}"
    assert f.created == [p.network_name]
    assert f.nets[p.network_name].labels == {L.MANAGED: "true", L.ROLE: "network", L.UID: "1000", L.PROJECT: "demo",
                                             L.PROJECT_ID: p.network_name.removeprefix("envman-1000-")}
    assert N.ensure_network(f, p) == f"id-{p.network_name}" and f.created == [p.network_name]  # joined, not made again


def test_no_network_makes_nothing():
    f = Facts()
    assert N.ensure_network(f, plan(network="none")) is None and f.created == []


def _label_cases():
    good = N.network_labels(plan())
    cases = {f"{k} missing": {x: y for x, y in good.items() if x != k} for k in good}
    cases.update({f"{k} another's": {**good, k: good[k] + "x"} for k in good})
    return cases


@pytest.mark.parametrize("case", sorted(_label_cases()))
def test_a_network_of_that_name_that_is_not_envman_s_for_this_user_and_project_is_refused(case):
    p = plan()
    f = Facts(nets={p.network_name: NetworkInfo("x", p.network_name, "bridge", _label_cases()[case])})
    kind, what, where, fix = refusal(lambda: N.ensure_network(f, p))
    assert kind == "UserError" and what.startswith(f"network {p.network_name} exists but is not envman's")
    assert f"docker network rm {p.network_name}" in str(fix) and f.created == []


@pytest.mark.parametrize("driver", ["host", "macvlan", "overlay", "null", ""])
def test_a_network_that_is_not_a_bridge_is_refused(driver):
    p = plan()
    f = Facts(nets={p.network_name: NetworkInfo("x", p.network_name, driver, N.network_labels(p))})
    assert "not bridge" in refusal(lambda: N.ensure_network(f, p))[1]


def _mine(f, name, *, uid=1000, containers=0, created=0):
    f.nets[name] = NetworkInfo(f"id-{name}", name, "bridge", {**N.network_labels(plan(project=name, uid=uid))},
                               containers, created)


def test_a_full_pool_frees_only_this_user_s_idle_networks_then_makes_it():
    f, p = Facts(pool=0), plan()
    _mine(f, "idle")
    _mine(f, "busy", containers=1)
    _mine(f, "fresh", created=int(time.time()) - 10)  # made a moment ago: another run of this user may join it now
    _mine(f, "others", uid=2000)
    f.nets["foreign"] = NetworkInfo("id-f", "foreign", "bridge", {})
    assert N.ensure_network(f, p) == f"id-{p.network_name}"
    assert f.removed == ["idle"] and set(f.nets) == {"busy", "fresh", "others", "foreign", p.network_name}


def test_a_full_pool_with_nothing_idle_is_one_line():
    f, p = Facts(pool=0), plan()
    _mine(f, "busy", containers=1)
    kind, what, where, fix = refusal(lambda: N.ensure_network(f, p))
    assert kind == "UserError" and "no free address range" in what and 'network = "none"' in str(fix)
    assert "default-address-pools" in str(fix) and f.removed == []


def test_any_other_engine_error_is_not_taken_for_a_full_pool():
    class Broken(Facts):
        def create_network(self, name, labels):
            raise EngineError("docker network create: permission denied")

    f = Broken()
    _mine(f, "idle")
    with pytest.raises(EngineError, match="permission denied"):
        N.ensure_network(f, plan())
    assert f.removed == []


def test_idle_networks_are_those_of_this_user_only(monkeypatch):
    f = Facts()
    _mine(f, "a")
    _mine(f, "b", uid=2000)
    assert N.remove_idle_networks(f, 1000, now=10**10) == ["a"] and "b" in f.nets


def test_the_plan_names_what_ensure_network_made():
    f = Facts()
    for p in (plan(), replace(plan(), uid=7), plan(project="x", root="/w/x")):
        N.ensure_network(f, p)
        assert p.network_name in f.nets and _networks(docker_argv(p)) == [p.network_name]


# --------------------------------------------------------------------------- every refusal whole, and the edges


def test_every_refusal_whole():
    p = plan()
    name = p.network_name
    f = Facts(nets={name: NetworkInfo("x", name, "bridge", {**N.network_labels(p), L.UID: "7", L.PROJECT: "q"})})
    assert refusal(lambda: N.ensure_network(f, p)) == (
        "UserError", f"network {name} exists but is not envman's network of this project: its labels envman.project, "
        "envman.uid are not envman's for uid 1000 and project demo", "envman run",
        f'remove it (docker network rm {name}) and run again, or set network = "none" in the project file')
    assert refusal(lambda: N.ensure_network(Facts(pool=0), p)) == (
        "UserError", f"the engine has no free address range for network {name} (each project gets a network of its "
        "own; your idle ones were removed)", "envman run",
        "ask the engine's administrator for more \"default-address-pools\" in daemon.json (docker network ls shows "
        'who holds them), or set network = "none" in the project file')


def test_a_network_made_but_not_shown_is_an_engine_error():
    class Vanishing(Facts):
        def inspect_network(self, name):
            return None

    assert refusal(lambda: N.ensure_network(Vanishing(), plan())) == (
        "EngineError", f"network {plan().network_name} was created but the engine does not show it", None, "run again")


def test_joining_an_existing_network_asks_the_engine_once_and_makes_nothing():
    class Counting(Facts):
        asked: int = 0

        def create_network(self, name, labels):
            raise AssertionError("a network that exists was made again")

        def inspect_network(self, name):
            self.asked += 1
            return super().inspect_network(name)

    p = plan()
    f = Counting(nets={p.network_name: NetworkInfo("id-x", p.network_name, "bridge", N.network_labels(p))})
    assert N.ensure_network(f, p) == "id-x" and f.asked == 1


def test_joining_an_existing_network_takes_no_lock(monkeypatch):
    """Every run after the first finds its network: it neither waits on nor makes a lock file."""
    from envman.state import locks_dir

    class NoLock:
        def __init__(self, *a, **k):
            raise AssertionError("a lock was taken to join a network that exists")

    monkeypatch.setattr("filelock.FileLock", NoLock)
    p = plan()
    f = Facts(nets={p.network_name: NetworkInfo("id-x", p.network_name, "bridge", N.network_labels(p))})
    assert N.ensure_network(f, p) == "id-x"
    assert not (locks_dir() / f"network-{p.network_name}.lock").exists()


def test_a_network_another_process_made_while_this_one_waited_is_joined_not_made_again(monkeypatch):
    class Engine(Facts):  # as the engine does: a second network of a name is an error
        def create_network(self, name, labels):
            if name in self.nets:
                raise EngineError(f"docker network create {name}: network with name {name} already exists")
            return super().create_network(name, labels)

    p = plan()
    f = Engine()

    class MadeMeanwhile:
        """The lock: acquired only after another envman process made the network."""

        def __init__(self, path, timeout=-1):
            pass

        def __enter__(self):
            f.nets[p.network_name] = NetworkInfo("id-other", p.network_name, "bridge", N.network_labels(p))
            return self

        def __exit__(self, *a):
            return False

    monkeypatch.setattr("filelock.FileLock", MadeMeanwhile)
    assert N.ensure_network(f, p) == "id-other" and f.created == []


def test_a_held_lock_is_one_line_after_the_timeout(monkeypatch):
    from filelock import FileLock

    from envman.state import locks_dir

    monkeypatch.setattr(N, "LOCK_TIMEOUT_S", 0.05)
    p = plan()
    locks_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks_dir() / f"network-{p.network_name}.lock")):
        import threading

        out: list = []
        t = threading.Thread(target=lambda: out.append(refusal(lambda: N.ensure_network(Facts(), p))))
        t.start()
        t.join(30)
    assert out == [("UserError", f"another envman process has held the lock of network {p.network_name} for 0 s",
                    "envman run", "wait for it to finish, then run again")]


def test_the_lock_waits_as_long_as_its_timeout_says(monkeypatch):
    seen = {}

    class Lock:
        def __init__(self, path, timeout=-1):
            seen["timeout"] = timeout

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    monkeypatch.setattr("filelock.FileLock", Lock)
    N.ensure_network(Facts(), plan())
    assert seen["timeout"] == N.LOCK_TIMEOUT_S == 60.0


def test_idle_is_older_than_the_window_exactly():
    now = 10**9
    f = Facts()
    _mine(f, "young", created=now - N.IDLE_AFTER_S + 1)
    _mine(f, "edge", created=now - N.IDLE_AFTER_S)
    _mine(f, "old", created=0)
    _mine(f, "kept", created=0)
    assert sorted(N.remove_idle_networks(f, 1000, keep="kept", now=now)) == ["edge", "old"]
    assert set(f.nets) == {"young", "kept"}


def test_idle_networks_default_to_this_user_and_now(monkeypatch):
    import time

    f = Facts()
    monkeypatch.setattr(N.os, "getuid", lambda: 1000)
    _mine(f, "mine", created=int(time.time()) - 10 * N.IDLE_AFTER_S)
    _mine(f, "recent", created=int(time.time()))
    _mine(f, "theirs", uid=2000, created=0)
    assert N.remove_idle_networks(f) == ["mine"]


def test_a_network_that_changed_owner_or_gained_a_container_since_the_list_is_left():
    class Moving(Facts):
        def inspect_network(self, name):
            net = self.nets.get(name)
            if net is None or name == "gone":
                return None
            if name == "busy-now":
                return replace(net, containers=1)
            if name == "taken":
                return replace(net, labels={**net.labels, L.UID: "2000"})
            return net

    f = Moving()
    for n in ("gone", "busy-now", "taken", "idle"):
        _mine(f, n)
    assert N.remove_idle_networks(f, 1000, now=10**10) == ["idle"]


def test_create_command_makes_exactly_the_network_a_run_checks_for():
    import shlex

    p = plan(project="my.proj", root="/w/my proj")
    words = shlex.split(N.create_command(p.uid, p.project, p.root))
    assert words[:5] == ["docker", "network", "inspect", p.network_name, ">/dev/null"]
    made = words[words.index("create"):]
    assert made[-1] == p.network_name and made[1:3] == ["--driver", "bridge"]
    labels = dict(made[i + 1].split("=", 1) for i, w in enumerate(made) if w == "--label")
    assert labels == N.network_labels(p)
    assert N.network_problem(NetworkInfo("x", p.network_name, "bridge", labels), p) is None
