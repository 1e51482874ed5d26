"""envman.images.remote by rule: every refusal whole, every boundary, every field of a push or a pull.

Written against the mutation run of the module (docs/security.md, "Mutation testing"): each test
here pins a behaviour that a small change of the code would alter (what is allowed, refused,
printed, pushed, pulled or promoted).
"""

from __future__ import annotations

import ipaddress
import json
import socket

import pytest
from hypothesis import given, settings, strategies as st

from envman import labels as L
from envman.engine.api import ImageInfo
from envman.errors import UserError
from envman.images import remote as R
from envman.images.store import rootfs_digest, verdict_of_report
from envman.render.dockerfile import stack_label_json
from envman.state import save_report_json, stable_ref
from tests.support.fake_engine import FakeEngine
from tests.support.refusal import refusal

LAN = ("127.0.0.0/8", "10.0.0.0/8")
HASH = "c" * 64


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state" / "deep"))  # not there yet
    return tmp_path


@pytest.fixture(scope="module")
def stack():
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve

    return resolve(load_matrix(), "torch-2.4-cpu")


def _verdict(rootfs, status="pass", at=1):
    return verdict_of_report({"overall": status, "reason": "ok", "image_id": "sha256:t"}, rootfs=rootfs, uid=7,
                             user="u", at=at)


def _release_labels(stack, layers, render_hash=HASH, status="pass"):
    return {L.MANAGED: "true", L.NAME: stack.name, L.STACK: stack_label_json(stack), L.RENDER_HASH: render_hash,
            **_verdict(rootfs_digest(ImageInfo("x", layers=layers)), status).to_labels()}


def _in_registry(engine, stack, render_hash=HASH, host="reg.example:5000", **over):
    """An envman release of ``stack`` in the fake registry at ``host`` (its digest ref known to the engine)."""
    repo = f"{host}/envman/{stack.name}"
    image_id = engine.add_image()
    layers = engine.inspect_image(image_id).layers
    labels = {k: v for k, v in {**_release_labels(stack, layers, render_hash), **over}.items() if v is not None}
    engine.registry[f"{repo}:latest"] = image_id
    digest = engine.registry_digest(f"{repo}:latest")
    engine.registry[f"{repo}@{digest}"] = image_id
    engine._images[image_id] = ImageInfo(image_id, labels=labels, layers=layers, repo_digests=(f"{repo}@{digest}",))
    return image_id, f"{repo}@{digest}", digest


def _promoted(engine, stack, *, labelled=True, status="pass"):
    """A promoted image of ``stack`` here, its verdict on its labels (or only in this user's cache)."""
    image_id = engine.add_image(stable_ref(stack.name))
    layers = engine.inspect_image(image_id).layers
    labels = _release_labels(stack, layers, status=status) if labelled else {
        k: v for k, v in _release_labels(stack, layers).items() if not k.startswith("envman.smoke.")}
    engine._images[image_id] = ImageInfo(image_id, labels=labels, layers=layers)
    return image_id


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("text,what,fix", [
    ("u:pw@reg.example", "the registry carries credentials (user@host)",
     "give HOST[:PORT][/PREFIX] and log in with `docker login HOST`: envman uses Docker's own credentials"),
    ("https://reg.example", "registry 'https://reg.example' has a URL scheme", "give HOST[:PORT][/PATH] without http(s)://"),
    ("reg.example:0", "registry 'reg.example:0': port 0 is out of range", "use a port 1-65535"),
    ("reg.example:65536", "registry 'reg.example:65536': port 65536 is out of range", "use a port 1-65535"),
    ("[::1]:65536/x", "registry '[::1]:65536/x': port 65536 is out of range", "use a port 1-65535"),
])
def test_every_registry_refusal_whole(text, what, fix):
    assert refusal(lambda: R.parse_registry(text, where="W")) == ("UserError", what, "W", fix)


@pytest.mark.parametrize("port", [1, 2, 5000, 65534, 65535])
def test_every_port_in_range_is_taken(port):
    for text in (f"reg.example:{port}", f"[::1]:{port}"):
        assert R.parse_registry(text, where="W").host == text


@given(st.integers(min_value=65536, max_value=99999) | st.just(0))
@settings(max_examples=30, deadline=None)
def test_every_port_out_of_range_is_refused(port):
    assert refusal(lambda: R.parse_registry(f"reg.example:{port}", where="W"))[1].endswith(f"port {port} is out of range")


def test_the_length_limit_is_200_characters():
    def name(n):  # reg.example/aaa...: exactly n characters
        return "reg.example/" + "a" * (n - len("reg.example/"))

    assert str(R.parse_registry(name(200), where="W")) == name(200)
    assert refusal(lambda: R.parse_registry(name(201), where="W")) == (
        "UserError", f"registry {name(201)[:40]!r}...: longer than 200 characters", "W", None)


@pytest.mark.parametrize("host,hostname", [("reg.example", "reg.example"), ("reg.example:5000", "reg.example"),
                                           ("[::1]:5000", "::1"), ("[fd00::1]", "fd00::1"), ("10.1.2.3:1", "10.1.2.3")])
def test_hostname_drops_the_port_and_the_brackets(host, hostname):
    assert R.Registry(host).hostname == hostname


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize("key", ["allow_http", "pull_on_run", "trust_registry"])
@pytest.mark.parametrize("value", [True, False, None])
def test_each_switch_is_read_as_written_and_false_when_absent(home, key, value):
    f = home / "config.toml"
    f.write_text("[registry]\n" + (f"{key} = {str(value).lower()}\n" if value is not None else ""))
    s = R.load_registry_settings(f)
    assert getattr(s, key) is bool(value)
    assert all(getattr(s, k) is False for k in {"allow_http", "pull_on_run", "trust_registry"} - {key})


@pytest.mark.parametrize("key", ["allow_http", "pull_on_run", "trust_registry"])
def test_a_switch_that_is_not_a_boolean_is_refused_at_its_key(home, key):
    f = home / "config.toml"
    f.write_text(f'[registry]\n{key} = "yes"\n')
    assert refusal(lambda: R.load_registry_settings(f)) == (
        "UserError", f"{key} must be true or false, got 'yes'", f"{f}: [registry].{key}",
        f"write {key} = true or {key} = false")


def test_a_bad_default_registry_is_refused_at_its_key(home):
    f = home / "config.toml"
    f.write_text('[registry]\ndefault = "reg.example:0"\n')
    assert refusal(lambda: R.load_registry_settings(f))[2] == f"{f}: [registry].default"


def test_choose_registry(home):
    configured = R.RegistrySettings(R.Registry("reg.example:5000", "team"))
    assert R.choose_registry(None, configured) == R.Registry("reg.example:5000", "team")
    assert R.choose_registry("other.example/x", configured) == R.Registry("other.example", "x")
    assert R.choose_registry("other.example", R.RegistrySettings()) == R.Registry("other.example")
    assert refusal(lambda: R.choose_registry("reg.example:0", configured))[2] == "--registry"
    assert refusal(lambda: R.choose_registry(None, R.RegistrySettings())) == (
        "UserError", "no registry given and none configured", "envman push/pull",
        'pass --registry HOST[:PORT][/PREFIX], or set [registry] default = "..." in config.toml')


# --------------------------------------------------------------------------- plain HTTP


def _getaddrinfo(answers):
    def fake(host, port, *a, **kw):
        if isinstance(answers.get(host), BaseException):
            raise answers[host]
        return [(socket.AF_INET6 if ":" in a_ else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a_, 0))
                for a_ in answers.get(host, [])]
    return fake


def test_resolve_reads_every_address_a_name_has(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", _getaddrinfo({
        "a.example": ["fe80::1%eth0", "not-an-address", "10.1.2.3", "::ffff:192.0.2.7", "::1"],
        "gone.example": OSError("no such name"), "idna.example": UnicodeError("label too long"),
    }))
    got = R._resolve("a.example")
    assert [str(a) for a in got] == ["fe80::1%eth0", "10.1.2.3", "192.0.2.7", "::1"]
    assert got[2] == ipaddress.ip_address("192.0.2.7")  # an IPv4-mapped address is its IPv4 address
    assert R._resolve("gone.example") == [] and R._resolve("idna.example") == [] and R._resolve("none.example") == []


def test_an_address_literal_or_localhost_is_decided_without_resolving(monkeypatch):
    def no_dns(host):
        raise AssertionError(f"resolved {host}")

    monkeypatch.setattr(R, "_resolve", no_dns)
    for host in ("localhost", "LOCALHOST", "127.0.0.1", "127.8.0.1", "::1", "::ffff:127.0.0.1"):
        assert R.is_loopback(host), host
    for host in ("10.0.0.1", "192.0.2.1", "fd00::1", "::ffff:10.1.2.3", "::"):
        assert not R.is_loopback(host), host
    cidrs = ("10.0.0.0/8",)
    for host, http in (("10.1.2.3:5000", True), ("[::ffff:10.1.2.3]:5000", True), ("192.0.2.1", False),
                       ("[fd00::1]:5000", False)):
        assert R.engine_uses_http(R.Registry(host), cidrs, ()) is http, host


def test_a_name_is_read_by_what_it_resolves_to(monkeypatch):
    monkeypatch.setattr(R, "_resolve", lambda h: {"lan.example": [ipaddress.ip_address("10.9.9.9")],
                                                  "lo.example": [ipaddress.ip_address("127.0.0.1")]}.get(h, []))
    assert R.engine_uses_http(R.Registry("lan.example:5000"), ("10.0.0.0/8",), ())
    assert not R.engine_uses_http(R.Registry("nowhere.example:5000"), ("10.0.0.0/8",), ())
    assert R.is_loopback("lo.example") and not R.is_loopback("lan.example") and not R.is_loopback("nowhere.example")


@pytest.mark.parametrize("cidrs,http", [
    (("10.1.2.0/8",), True),  # host bits set: the engine reads it as 10.0.0.0/8
    (("not a network", "10.0.0.0/8"), True),  # one unreadable entry does not hide the next
    (("10.0.0.0/8", "not a network"), True),
    (("::ffff:0:0/96",), False),  # an IPv6 network never holds an IPv4 address
    (("not a network",), False), ((), False),
])
def test_the_engine_s_insecure_list_is_read_entry_by_entry(cidrs, http):
    assert R.engine_uses_http(R.Registry("10.1.2.3:5000"), cidrs, ()) is http


@pytest.mark.parametrize("names,http", [(("reg.example:5000",), True), (("reg.example",), True),
                                        (("other.example:5000",), False)])
def test_an_insecure_name_matches_with_or_without_its_port(names, http, monkeypatch):
    monkeypatch.setattr(R, "_resolve", lambda h: [])
    assert R.engine_uses_http(R.Registry("reg.example:5000"), (), names) is http


def test_the_plain_http_refusal_whole():
    reg = R.Registry("10.1.2.3:5000", "team")
    assert refusal(lambda: R.check_transport(reg, LAN, (), allow_http=False)) == (
        "UserError", "the Docker engine would talk plain HTTP to 10.1.2.3:5000 (it is in the engine's insecure-registries), "
        "so images and any credentials would cross the network unencrypted", "registry 10.1.2.3:5000/team",
        "serve the registry over HTTPS, or say so explicitly: --allow-http (or [registry] allow_http = true)")


# --------------------------------------------------------------------------- labels


def test_a_stack_label_differing_in_keys_names_the_first_five_of_either_side(stack):
    layers = ("sha256:l1",)
    mine = json.loads(stack_label_json(stack))
    theirs = {k: v for k, v in mine.items() if k != "framework"}  # one key missing there
    theirs.update({"zz_extra": 1, "cuda": "0.0", "python": "0.0", "os": "x", "torch_index": "y", "za": 2})
    labels = {**_release_labels(stack, layers), L.STACK: json.dumps(theirs)}
    problems = R.label_problems(labels, stack, rootfs_digest(ImageInfo("x", layers=layers)))
    keys = sorted(k for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k))
    assert len(keys) > 5 and "framework" in keys
    assert problems == [f"its envman.stack label differs from the stack this host resolves in {', '.join(keys[:5])} "
                        "(the matrices differ)"]


@pytest.mark.parametrize("render_hash", [None, "", "None", "c" * 63, "C" * 64, "c" * 65, "g" * 64])
def test_a_render_hash_that_is_not_64_hex_digits_is_a_problem(stack, render_hash):
    layers = ("sha256:l1",)
    labels = {k: v for k, v in {**_release_labels(stack, layers), L.RENDER_HASH: render_hash}.items() if v is not None}
    assert R.label_problems(labels, stack, rootfs_digest(ImageInfo("x", layers=layers))) == [
        "it has no valid envman.render-hash label"]


@pytest.mark.parametrize("status", ["fail"])
def test_a_verdict_that_does_not_run_is_named_whole(stack, status):
    layers = ("sha256:l1",)
    labels = _release_labels(stack, layers, status=status)
    assert R.label_problems(labels, stack, rootfs_digest(ImageInfo("x", layers=layers))) == [
        "its smoke verdict is 'fail', not one of pass, cpu-only"]


# --------------------------------------------------------------------------- push


def test_the_push_record_lives_in_the_state_directory(home):
    from envman.paths import state_dir

    assert R.pushed_path() == state_dir() / "registry" / "pushed.json"


def test_a_push_sends_latest_then_the_render_hash_and_records_it(home, stack, monkeypatch):
    engine = FakeEngine()
    image_id = _promoted(engine, stack)
    monkeypatch.setattr(R.time, "time", lambda: 1234.5)
    pushed = R.push_stack(engine, stack, R.Registry("127.0.0.1:5000", "lab"))
    repo = f"127.0.0.1:5000/lab/envman/{stack.name}"
    digest = engine.registry_digest(f"{repo}:latest")
    assert engine.pushed == [f"{repo}:latest", f"{repo}:{HASH[:16]}"]
    assert pushed == R.Pushed("127.0.0.1:5000/lab", stack.name, f"{repo}@{digest}", digest, image_id, "pass")
    entry = {"ref": f"{repo}@{digest}", "digest": digest, "image_id": image_id, "smoke": "pass", "time": 1234}
    expected = {"127.0.0.1:5000/lab": {stack.name: entry}}
    assert R.read_pushed() == expected
    assert R.pushed_path().read_text() == json.dumps(expected, indent=2, sort_keys=True) + "\n"
    assert R.pushed_path().with_name("pushed.json.lock").exists()  # the record is written under its lock


@pytest.mark.parametrize("render_hash", ["", "c" * 63, "not-hex" * 10])
def test_without_a_valid_render_hash_only_latest_is_pushed(home, stack, render_hash):
    engine = FakeEngine()
    image_id = _promoted(engine, stack)
    engine._images[image_id].labels[L.RENDER_HASH] = render_hash
    R.push_stack(engine, stack, R.Registry("127.0.0.1:5000"))
    assert engine.pushed == [f"127.0.0.1:5000/envman/{stack.name}:latest"]


def test_push_refuses_plain_http_unless_allowed(home, stack, monkeypatch):
    engine = FakeEngine()
    _promoted(engine, stack)
    monkeypatch.setattr(engine, "insecure_registries", lambda: (LAN, ()))
    with pytest.raises(UserError, match="plain HTTP"):
        R.push_stack(engine, stack, R.Registry("10.1.2.3:5000"))
    assert engine.pushed == []
    assert R.push_stack(engine, stack, R.Registry("10.1.2.3:5000"), allow_http=True).smoke == "pass"


@pytest.mark.parametrize("case,what", [
    ("missing", "no promoted image envman/{s}:latest"),
    ("fail", "the smoke verdict of envman/{s}:latest says fail"),
    ("untested", "the smoke verdict of envman/{s}:latest is missing"),
])
def test_every_push_refusal_whole(home, stack, case, what):
    engine = FakeEngine()
    if case != "missing":
        _promoted(engine, stack, labelled=case == "fail", status="fail")
    fix = (f"build it first: envman build {stack.name} (or envman pull {stack.name})" if case == "missing" else
           f"envman smoke {stack.name}; only a passing or cpu-only image is pushed")
    assert refusal(lambda: R.push_stack(engine, stack, R.Registry("127.0.0.1:5000"))) == (
        "UserError", what.format(s=stack.name), f"stack {stack.name}", fix)
    assert engine.pushed == [] and engine.builds == []


def test_a_verdict_on_the_image_for_these_layers_is_pushed_as_it_is(home, stack):
    engine = FakeEngine()
    image_id = _promoted(engine, stack)
    assert R.promoted_image(engine, stack).id == image_id and engine.builds == []


@pytest.mark.parametrize("case", ["only-cached", "labels-for-other-layers", "later-cached-report"])
def test_a_verdict_known_only_here_travels_on_an_image_of_its_own(home, stack, case):
    engine = FakeEngine()
    image_id = _promoted(engine, stack, labelled=case != "only-cached")
    info = engine.inspect_image(image_id)
    if case == "labels-for-other-layers":
        engine._images[image_id].labels.update(_verdict("sha256:" + "9" * 64).to_labels())
    # the cached report names the image it first ran in (a candidate since re-labelled)
    report = {"overall": "pass", "reason": "later", "image_id": "sha256:" + "e" * 64, "created": 10**10}
    save_report_json(image_id, report)
    got = R.promoted_image(engine, stack)
    assert got.id != image_id and engine.builds == [f"envman/{stack.name}:verdict-" + got.labels[
        L.SMOKE_REPORT_DIGEST][7:23]]
    verdict = L.parse_smoke(got.labels)
    assert verdict.status == "pass" and verdict.rootfs == rootfs_digest(info) and verdict.image_id == image_id
    assert engine.inspect_image(stable_ref(stack.name)).id == image_id  # the promoted image keeps its id


def test_a_report_removed_while_the_push_reads_it_is_one_line(home, stack, monkeypatch):
    import envman.state

    engine = FakeEngine()
    image_id = _promoted(engine, stack, labelled=False)
    save_report_json(image_id, {"overall": "pass", "image_id": image_id})
    monkeypatch.setattr(envman.state, "load_report", lambda image_id: None)  # the push's own read finds it gone
    assert refusal(lambda: R.push_stack(engine, stack, R.Registry("127.0.0.1:5000"))) == (
        "UserError", f"the smoke report of envman/{stack.name}:latest vanished", f"stack {stack.name}", None)
    assert engine.pushed == []


def test_an_image_that_lost_its_verdict_on_the_way_is_never_pushed(home, stack, monkeypatch):
    from envman.images import store

    engine = FakeEngine()
    image_id = _promoted(engine, stack, labelled=False)
    save_report_json(image_id, {"overall": "pass", "image_id": image_id})
    monkeypatch.setattr(store, "record_verdict", lambda engine, name, report, move_tags: image_id)
    assert refusal(lambda: R.push_stack(engine, stack, R.Registry("127.0.0.1:5000"))) == (
        "RegistryError", f"the image {image_id[:19]} to push carries no runnable smoke verdict in its labels",
        f"stack {stack.name}", f"envman smoke {stack.name}, then push again")
    assert engine.pushed == []


# --------------------------------------------------------------------------- pull


def _pull(engine, stack, **kw):
    """A pull whose digest the user leaves to the registry (these tests are about the labels)."""
    kw.setdefault("render_hashes", frozenset({HASH}))
    kw.setdefault("trust_registry", True)
    return R.pull_stack(engine, stack, R.Registry("reg.example:5000"), **kw)


def test_a_pull_promotes_and_says_what_it_pulled(home, stack, monkeypatch):
    engine = FakeEngine()
    monkeypatch.setattr(engine, "insecure_registries", lambda: ((), ()))
    image_id, ref, digest = _in_registry(engine, stack)
    note = (f"reg.example:5000/envman/{stack.name}:latest is vouched for by its labels only, which anyone who can "
            "push to reg.example:5000 writes (trust_registry)")
    assert _pull(engine, stack) == R.Pulled(stack.name, ref, digest, image_id, "pass", False, R.LABELS_ONLY, note)
    assert engine.inspect_image(stable_ref(stack.name)).id == image_id
    assert _pull(engine, stack) == R.Pulled(stack.name, ref, digest, image_id, "pass", True, R.LABELS_ONLY, note)


def test_pull_refuses_plain_http_unless_allowed(home, stack, monkeypatch):
    engine = FakeEngine()
    monkeypatch.setattr(engine, "insecure_registries", lambda: (LAN, ()))
    monkeypatch.setattr(R, "_resolve", lambda h: [ipaddress.ip_address("10.1.2.3")])
    _in_registry(engine, stack)
    with pytest.raises(UserError, match="plain HTTP"):
        _pull(engine, stack)
    assert engine.inspect_image(stable_ref(stack.name)) is None
    assert _pull(engine, stack, allow_http=True).smoke == "pass"


@pytest.mark.parametrize("digest", ["sha256:" + "a" * 63, "sha256:" + "A" * 64, "a" * 64, "sha512:" + "a" * 64, ""])
def test_a_digest_that_is_not_sha256_hex_is_refused(home, stack, digest):
    engine = FakeEngine()
    assert refusal(lambda: _pull(engine, stack, digest=digest)) == (
        "UserError", f"digest {digest!r} is not sha256:<64 hex digits>", "--digest",
        "give it as envman push printed it (REPO@sha256:..., the part after @)")


def test_a_pulled_image_the_engine_cannot_show_is_an_error(home, stack, monkeypatch):
    engine = FakeEngine()
    _, ref, _ = _in_registry(engine, stack)
    monkeypatch.setattr(engine, "inspect_image", lambda r: None)
    assert refusal(lambda: _pull(engine, stack)) == (
        "RegistryError", f"pulled {ref} but the engine has no such image", "reg.example:5000", None)


def test_a_pulled_image_whose_digests_are_not_the_asked_one_is_refused(home, stack, monkeypatch):
    engine = FakeEngine()
    image_id, ref, digest = _in_registry(engine, stack)
    real = engine.inspect_image

    def other_digests(r):
        info = real(r)
        return None if info is None else ImageInfo(info.id, info.tags, info.labels, layers=info.layers,
                                                   repo_digests=("reg.example:5000/x@sha256:" + "0" * 64,))
    monkeypatch.setattr(engine, "inspect_image", other_digests)
    got = refusal(lambda: _pull(engine, stack))
    assert got[:2] == ("RegistryError", f"refused {ref}: the engine's digests of the pulled image are "
                       f"['reg.example:5000/x@sha256:{'0' * 64}'], not {digest}")
    assert engine.tag_names() == set()  # nothing promoted


def _refused_line(stack, ref, problem):
    return ("RegistryError", f"refused {ref}: {problem}", f"envman pull {stack.name}",
            f"push it again from a host whose matrix resolves the same stack: envman push {stack.name}")


def test_a_pull_refusal_whole_and_how_many_more_problems_there_were(home, stack):
    engine = FakeEngine()
    _, ref, _ = _in_registry(engine, stack, render_hash="d" * 64)
    assert refusal(lambda: _pull(engine, stack)) == _refused_line(
        stack, ref, f"its envman.render-hash label {'d' * 64} is not what this host renders for {stack.name} "
                    "(another recipe, envman version or network options)")
    engine = FakeEngine()
    _, ref, _ = _in_registry(engine, stack, **{L.MANAGED: None, L.NAME: "x", L.RENDER_HASH: None})
    assert refusal(lambda: _pull(engine, stack)) == _refused_line(
        stack, ref, "it carries no envman.managed=true label (not an envman image) (and 2 more)")
    engine = FakeEngine()
    _, ref, _ = _in_registry(engine, stack, **{L.MANAGED: None, L.NAME: "x"})
    assert refusal(lambda: _pull(engine, stack))[1].endswith("(not an envman image) (and 1 more)")


@pytest.mark.parametrize("had", [False, True])
def test_a_refused_image_is_removed_unforced_unless_it_was_here_before(home, stack, had, monkeypatch):
    engine = FakeEngine()
    _, ref, _ = _in_registry(engine, stack, render_hash="d" * 64)
    if not had:
        engine.registry.pop(ref)
        real_pull, image_id = engine.pull, engine._resolve(ref) or engine.registry[f"reg.example:5000/envman/{stack.name}:latest"]

        def pull(r):  # the image arrives only with the pull
            engine.registry[r] = image_id
            real_pull(r)
        monkeypatch.setattr(engine, "pull", pull)
    calls = []
    monkeypatch.setattr(engine, "remove_image", lambda r, **kw: calls.append((r, kw)))
    with pytest.raises(R.RegistryError):
        _pull(engine, stack)
    assert calls == ([] if had else [(ref, {"force": False})])


def test_by_default_a_pull_takes_the_render_hashes_of_the_user_s_config(home, stack):
    from envman.images.build import expected_render_hashes
    from envman.render.dockerfile import RenderOptions

    (home / "cfg").mkdir()
    (home / "cfg" / "config.toml").write_text('[network]\npip_index = "https://pypi.corp.example/simple"\n')
    mine = expected_render_hashes(stack, RenderOptions.from_config())
    assert mine.isdisjoint(expected_render_hashes(stack, RenderOptions()))  # the config changes the hash
    engine = FakeEngine()
    _in_registry(engine, stack, render_hash=sorted(mine)[0])
    assert R.pull_stack(engine, stack, R.Registry("reg.example:5000"), allow_http=True, trust_registry=True).smoke == "pass"
    engine = FakeEngine()
    _in_registry(engine, stack, render_hash=sorted(expected_render_hashes(stack, RenderOptions()))[0])
    with pytest.raises(R.RegistryError, match="not what this host renders"):
        R.pull_stack(engine, stack, R.Registry("reg.example:5000"), allow_http=True, trust_registry=True)


# --------------------------------------------------------------------------- who vouches for a pulled digest


REG = R.Registry("reg.example:5000")


def _pushed(stack, registry, digest):
    R.pushed_path().parent.mkdir(parents=True, exist_ok=True)
    R.pushed_path().write_text(json.dumps({str(registry): {stack.name: {
        "ref": f"{registry.repository(stack.name)}@{digest}", "time": 1}}}))
    R.pushed_path().chmod(0o600)


#: (a digest given, a push of yours: to this registry / another / none, trust_registry) -> who
#: vouches for the pulled digest, or None: refused before anything is pulled.
VOUCH_CASES = {
    (given, push, trusted): (R.GIVEN if given else R.PUSHED if push == "this" else R.LABELS_ONLY if trusted else None)
    for given in (True, False) for push in ("this", "other", "none") for trusted in (True, False)
}


@pytest.mark.parametrize("case", sorted(VOUCH_CASES), ids=lambda c: f"given={c[0]}-push={c[1]}-trust={c[2]}")
def test_a_pulled_digest_is_one_someone_vouches_for(home, stack, case):
    given, push, trusted = case
    engine = FakeEngine()
    image_id, ref, digest = _in_registry(engine, stack)
    if push == "this":
        _pushed(stack, REG, digest)
    elif push == "other":
        _pushed(stack, R.Registry("other.example"), digest)
    run = lambda: R.pull_stack(engine, stack, REG, digest=digest if given else None, trust_registry=trusted,  # noqa: E731
                               render_hashes=frozenset({HASH}))
    want = VOUCH_CASES[case]
    if want is None:
        assert refusal(run) == (
            "UserError", f"nothing vouches for reg.example:5000/envman/{stack.name}:latest: no --digest, and no push of "
            "yours to reg.example:5000; its labels are written by whoever pushed it", f"envman pull {stack.name}",
            f"ask whoever pushed it for the digest (envman push prints it): envman pull {stack.name} --digest "
            "sha256:...; or trust everyone who can push there: --trust-registry (or [registry] trust_registry = true)")
        assert engine.inspect_image(stable_ref(stack.name)) is None
        return
    pulled = run()
    assert (pulled.ref, pulled.vouched_by) == (ref, want)
    assert ("labels only" in pulled.note) == (want == R.LABELS_ONLY)
    assert (pulled.note == "") == (want != R.LABELS_ONLY)  # a digest given or yours, as the tag is: nothing to say


def test_unpinned_pulls_are_refused_by_default(home, stack):
    engine = FakeEngine()
    _in_registry(engine, stack)
    with pytest.raises(UserError, match="nothing vouches"):
        R.pull_stack(engine, stack, REG, render_hashes=frozenset({HASH}))


def test_your_push_is_pulled_when_the_registry_cannot_say_where_its_tag_points(home, stack, monkeypatch):
    from envman.errors import EngineError

    engine = FakeEngine()
    _, mine, digest = _in_registry(engine, stack)
    _pushed(stack, REG, digest)

    def unknown(ref):
        raise EngineError("ask the registry: unauthorized")

    monkeypatch.setattr(engine, "registry_digest", unknown)
    pulled = R.pull_stack(engine, stack, REG, render_hashes=frozenset({HASH}))
    assert (pulled.ref, pulled.vouched_by, pulled.note) == (mine, R.PUSHED, "")


def test_your_push_is_pulled_even_when_the_tag_moved_since_and_the_move_is_named(home, stack):
    engine = FakeEngine()
    _, mine, my_digest = _in_registry(engine, stack)
    _pushed(stack, REG, my_digest)
    other_id, _, other_digest = _in_registry(engine, stack)  # someone pushed another image to :latest
    assert other_digest != my_digest
    pulled = R.pull_stack(engine, stack, REG, render_hashes=frozenset({HASH}))
    assert (pulled.ref, pulled.vouched_by) == (mine, R.PUSHED) and pulled.image_id != other_id
    assert pulled.note == (f"reg.example:5000/envman/{stack.name}:latest is now {other_digest}, not the {my_digest} "
                           f"you pushed; pulled yours: to take the newer one, ask who pushed it, then envman pull "
                           f"{stack.name} --digest {other_digest}")


@pytest.mark.parametrize("ref", ["", "x", f"reg.example:5000/envman/other@sha256:{'1' * 64}",
                                 f"evil.example/envman/STACK@sha256:{'1' * 64}", "reg.example:5000/envman/STACK:latest"])
def test_a_push_record_for_another_repository_or_not_a_digest_ref_vouches_for_nothing(home, stack, ref):
    R.pushed_path().parent.mkdir(parents=True, exist_ok=True)
    R.pushed_path().write_text(json.dumps({str(REG): {stack.name: {"ref": ref.replace("STACK", stack.name), "time": 1}}}))
    R.pushed_path().chmod(0o600)
    assert R.pushed_digest(REG, stack.name) is None


def test_trust_registry_is_a_config_switch(home):
    (home / "cfg").mkdir()
    (home / "cfg" / "config.toml").write_text("[registry]\ntrust_registry = true\n")
    assert R.load_registry_settings().trust_registry is True


# --------------------------------------------------------------------------- ensure_image and digest_ref


def test_ensure_image_keeps_a_runnable_promoted_image_and_pulls_otherwise(home, stack, monkeypatch):
    engine = FakeEngine()
    _promoted(engine, stack)
    monkeypatch.setattr(R, "pull_stack", lambda *a, **k: pytest.fail("pulled"))
    assert R.ensure_image(engine, stack) == stable_ref(stack.name)

    calls = []
    engine = FakeEngine()
    monkeypatch.setattr(R, "pull_stack", lambda e, s, reg, **kw: calls.append((reg, kw)) if (e, s) == (engine, stack)
                        else pytest.fail("another engine or stack"))
    _promoted(engine, stack, status="fail")
    assert refusal(lambda: R.ensure_image(engine, stack)) == (
        "UserError", f"no promoted image envman/{stack.name}:latest here and no registry configured to pull it from",
        f"stack {stack.name}",
        f'envman build {stack.name}, or set [registry] default = "HOST[:PORT][/PREFIX]" and envman push it')
    (home / "cfg").mkdir()
    (home / "cfg" / "config.toml").write_text('[registry]\ndefault = "reg.example:5000/lab"\nallow_http = true\n')
    assert R.ensure_image(engine, stack) == stable_ref(stack.name)
    assert R.ensure_image(engine, stack, allow_http=False) == stable_ref(stack.name)
    engine._tags.clear()
    assert R.ensure_image(engine, stack, registry=R.Registry("other.example")) == stable_ref(stack.name)
    assert calls == [(R.Registry("reg.example:5000", "lab"), {"allow_http": True, "trust_registry": False}),
                     (R.Registry("reg.example:5000", "lab"), {"allow_http": False, "trust_registry": False}),
                     (R.Registry("other.example"), {"allow_http": True, "trust_registry": False})]


def _record(home, data):
    R.pushed_path().parent.mkdir(parents=True, exist_ok=True)
    R.pushed_path().write_text(json.dumps(data))
    R.pushed_path().chmod(0o600)


D1, D2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def test_digest_ref_takes_the_newest_push_or_the_push_to_the_registry_asked(home):
    _record(home, {
        "a.example": {"s": {"ref": f"a.example/envman/s@{D1}", "time": 5}},
        "b.example/lab": {"s": {"ref": f"b.example/lab/envman/s@{D2}", "time": 9},
        "0.example": {"s": {"ref": f"0.example/envman/s@x@{D1}", "time": 99}},  # two @: not a digest ref
                          "t": {"ref": f"b.example/lab/envman/t@{D2}", "time": 99}},
        "c.example": {"s": {"ref": "c.example/envman/s@sha256:short", "time": 50},
                      "u": "not a table"},
        "d.example": {"s": {"ref": f"d.example/envman/s:{D1}", "time": 60}},  # no @: not a digest ref
        "e.example": "not a table",
    })
    assert R.digest_ref("s") == f"b.example/lab/envman/s@{D2}"
    assert R.digest_ref("s", registry=R.Registry("a.example")) == f"a.example/envman/s@{D1}"
    assert R.digest_ref("s", registry=R.Registry("b.example", "lab")) == f"b.example/lab/envman/s@{D2}"
    for reg in (R.Registry("c.example"), R.Registry("d.example"), R.Registry("e.example"), R.Registry("z.example")):
        assert R.digest_ref("s", registry=reg) is None
    assert R.digest_ref("u") is None and R.digest_ref("zzz") is None


def test_the_newest_push_wins_whatever_the_names(home):
    _record(home, {"a.example": {"s": {"ref": f"a.example/envman/s@{D1}", "time": 9}},
                   "b.example": {"s": {"ref": f"b.example/envman/s@{D2}", "time": 5}}})
    assert R.digest_ref("s") == f"a.example/envman/s@{D1}"


@pytest.mark.parametrize("time", [None, "x", True, 1.5, [1]])
def test_a_push_record_without_a_numeric_time_counts_as_the_oldest(home, time):
    entry = {"ref": f"z.example/envman/s@{D1}", **({"time": time} if time is not None else {})}
    _record(home, {"z.example": {"s": entry}, "a.example": {"s": {"ref": f"a.example/envman/s@{D2}", "time": 1}}})
    assert R.digest_ref("s") == f"a.example/envman/s@{D2}"
    _record(home, {"z.example": {"s": entry}})
    assert R.digest_ref("s") == f"z.example/envman/s@{D1}"


def test_a_push_record_others_can_write_is_not_believed_and_named_so(home, capfd):
    _record(home, {"a.example": {"s": {"ref": f"a.example/envman/s@{D1}", "time": 1}}})
    R.pushed_path().chmod(0o662)
    assert R.read_pushed() == {} and R.digest_ref("s") is None
    err = capfd.readouterr().err
    assert err == 2 * (f"envman: warning: ignoring the push record {R.pushed_path()}: writable by its group or by others "
                       "(remove it; envman writes a new one)\n")  # once for each read


def test_digest_ref_falls_back_to_what_was_pulled_here(home, stack):
    engine = FakeEngine()
    assert R.digest_ref("s") is None and R.digest_ref("s", engine=engine) is None
    image_id = engine.add_image("envman/s:latest")
    engine._images[image_id] = ImageInfo(image_id, repo_digests=(
        f"z.example/envman/s@{D2}", f"a.example/envman/s2@{D1}", f"b.example/lab/envman/s@{D1}", f"c.example/envman/s@{D1}",
        f"a.example/envman/s@sha256:{'1' * 63}", f"a/b@c.example/envman/s@{D1}"))
    assert R.digest_ref("s", engine=engine) == f"b.example/lab/envman/s@{D1}"  # the first, sorted
    assert R.digest_ref("s", engine=engine, registry=R.Registry("z.example")) == f"z.example/envman/s@{D2}"
    assert R.digest_ref("s", engine=engine, registry=R.Registry("b.example")) is None
    assert R.digest_ref("s2", engine=engine) is None


@pytest.mark.parametrize("length", [80, 81, 300])
def test_a_malformed_digest_is_shown_clipped_to_80_characters(length):
    digest = "sha256:" + "z" * (length - 7)
    line = refusal(lambda: R.check_digest(digest))
    shown = digest if length <= 80 else f"{digest[:80]}… ({length - 80} more characters)"
    assert line == ("UserError", f"digest {shown!r} is not sha256:<64 hex digits>", "--digest",
                    "give it as envman push printed it (REPO@sha256:..., the part after @)")
