"""envman.images.remote without an engine: names, the plain-HTTP rule, the label checks, the config."""

from __future__ import annotations

import json

import pytest

from envman import labels as L
from envman.errors import UserError
from envman.matrix.load import load_matrix
from envman.images.remote import (
    Registry, check_transport, engine_uses_http, is_loopback, label_problems, load_registry_settings, parse_registry,
)
from envman.render.dockerfile import stack_label_json
from envman.stack.resolve import resolve


@pytest.mark.parametrize("text,host,prefix", [
    ("127.0.0.1:5000", "127.0.0.1:5000", ""),
    ("localhost:5000/lab/team", "localhost:5000", "lab/team"),
    ("registry.lab.example", "registry.lab.example", ""),
    ("registry.lab.example:443/a_b/c-d.e/", "registry.lab.example:443", "a_b/c-d.e"),
    ("[::1]:5000/x", "[::1]:5000", "x"),
])
def test_registry_names(text, host, prefix):
    r = parse_registry(text, where="--registry")
    assert (r.host, r.prefix) == (host, prefix)
    assert r.repository("torch-2.4.1-cuda12.4-py3.12") == f"{r}/envman/torch-2.4.1-cuda12.4-py3.12"


@pytest.mark.parametrize("text,match", [
    ("user:pw@reg.example", "credentials"),
    ("https://reg.example", "scheme"),
    ("reg", "no dot and no port"),
    ("reg.example:0", "out of range"),
    ("reg.example:70000", "out of range"),
    ("reg.example/Team", "not HOST"),
    ("reg.example/a/../b", "not HOST"),
    ("reg.example/a b", "not HOST"),
    ("reg.example/$(id)", "not HOST"),
    ("-reg.example", "not HOST"),
    ("reg.example;rm -rf /", "not HOST"),
    ("reg.example\n", "not HOST"),
    ("", "non-empty"),
])
def test_registry_names_refused(text, match):
    with pytest.raises(UserError, match=match) as exc:
        parse_registry(text, where="--registry")
    assert "\n" not in exc.value.line()


def test_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("127.9.9.9") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("10.0.0.1") and not is_loopback("192.0.2.10")


def test_plain_http_only_on_loopback_or_when_allowed():
    cidrs, names = ("127.0.0.0/8", "10.0.0.0/8"), ("insecure.lab.example:5000",)
    lo, lan, named, tls = (Registry("127.0.0.1:5000"), Registry("10.1.2.3:5000"),
                           Registry("insecure.lab.example:5000"), Registry("192.0.2.10:443"))
    assert engine_uses_http(lo, cidrs, names) and engine_uses_http(lan, cidrs, names) and engine_uses_http(named, cidrs, names)
    assert not engine_uses_http(tls, cidrs, names)
    check_transport(lo, cidrs, names, allow_http=False)  # loopback: fine
    check_transport(tls, cidrs, names, allow_http=False)  # HTTPS: fine
    for reg in (lan, named):
        with pytest.raises(UserError, match="plain HTTP.*--allow-http"):
            check_transport(reg, cidrs, names, allow_http=False)
        check_transport(reg, cidrs, names, allow_http=True)


@pytest.fixture(scope="module")
def stack():
    return resolve(load_matrix(), "torch-2.4-cuda12.4")


ROOTFS = "sha256:" + "1" * 64


def _labels(stack, **over):
    from envman.images.store import verdict_of_report

    verdict = verdict_of_report({"overall": "pass", "reason": "all checks\npassed", "gpus_requested": True,
                                 "image_id": "sha256:x"}, rootfs=ROOTFS, uid=1000, user="u")
    base = {L.MANAGED: "true", L.NAME: stack.name, L.STACK: stack_label_json(stack), L.RENDER_HASH: "a" * 64,
            **verdict.to_labels()}
    base.update(over)
    return {k: v for k, v in base.items() if v is not None}


def test_a_promoted_image_with_its_verdict_passes(stack):
    labels = _labels(stack)
    assert label_problems(labels, stack, ROOTFS) == []
    assert json.loads(labels[L.STACK]) == json.loads(json.dumps(stack.to_json()))
    problems = label_problems(labels, stack, "sha256:" + "2" * 64)  # the verdict is about other layers
    assert len(problems) == 1 and "not taken on these layers" in problems[0]


@pytest.mark.parametrize("over,match", [
    ({L.SMOKE_STATUS: None}, "no valid envman.smoke.status label"),
    ({L.SMOKE_STATUS: "fail"}, "smoke verdict is 'fail'"),
    ({L.SMOKE_STATUS: "untested"}, "no valid envman.smoke.status"),
    ({L.SMOKE_ROOTFS: ""}, "not taken on these layers"),
    ({L.MANAGED: None}, "not an envman image"),
    ({L.NAME: "torch-9.9-cpu"}, "envman.name"),
    ({L.STACK: None}, "no envman.stack"),
    ({L.STACK: "{not json"}, "not a JSON object"),
    ({L.RENDER_HASH: "xyz"}, "render-hash"),
])
def test_label_problems(stack, over, match):
    problems = label_problems(_labels(stack, **over), stack, ROOTFS)
    assert problems and any(match in p for p in problems), problems


def test_a_stack_label_from_another_matrix_is_refused(stack):
    other = json.dumps({**json.loads(stack_label_json(stack)), "min_driver": "450.80.02"})
    problems = label_problems(_labels(stack, **{L.STACK: other}), stack, ROOTFS)
    assert len(problems) == 1 and "min_driver" in problems[0]


def test_config(tmp_path):
    f = tmp_path / "config.toml"
    f.write_text('[registry]\ndefault = "reg.lab.example:5000/team"\npull_on_run = true\n')
    s = load_registry_settings(f)
    assert s.default == Registry("reg.lab.example:5000", "team") and s.pull_on_run and not s.allow_http
    assert load_registry_settings(tmp_path / "missing.toml").default is None
    for text, match in (('[registry]\ndefault = "reg"\n', "no dot"), ("[registry]\npull_on_run = 1\n", "true or false"),
                        ('[registry]\nmirror = "x.example"\n', "unknown key"), ('registry = "x"\n', "must be a table")):
        f.write_text(text)
        with pytest.raises(UserError, match=match):
            load_registry_settings(f)


def test_push_stack_reports_progress(stack, monkeypatch, tmp_path):
    from envman.images.remote import parse_registry, push_stack
    from tests.unit.images.test_build import pipeline_engine
    from envman.images import build as B

    eng = pipeline_engine()
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))  # its records and reports: never the machine's
    monkeypatch.setattr(B, "_render", lambda s, *a, **k: __import__("tests.support.fake_engine", fromlist=["x"]).FakeContext("ab" * 32))
    B.build_smoke_promote(eng, stack)
    got = []
    push_stack(eng, stack, parse_registry("127.0.0.1:5000/lab", where="x"), on_progress=got.append)
    assert got and all(": " in line for line in got)
