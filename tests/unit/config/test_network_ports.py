"""Network settings by rule: every URL and registry mirror with a port takes exactly the ports
1-65535 (one line at validation, not a failed build later), and a registry mirror, written into
every Dockerfile's FROM, carries no token, as an index URL carries none."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from envman.config import VALIDATORS, Invalid, shown_url

from tests.unit.project.test_requirements_urls import TOKENS

#: Each network setting that takes a host and port, with {port} where the port goes.
WITH_PORT = {
    "registry_mirror": "mirror.example:{port}/hub",
    "pip_index": "https://pypi.example:{port}/simple",
    "pip_extra_index": "https://u:pw@pypi.example:{port}/simple",
    "framework_index": "http://127.0.0.1:{port}/whl",
    "apt_mirror": "http://deb.example:{port}/debian",
    "python_install_mirror": "https://py.example:{port}/releases",
}


def _accepted(key: str, value: str) -> bool:
    try:
        VALIDATORS[key](value)
    except Invalid as exc:
        assert "\n" not in exc.what
        return False
    return True


@pytest.mark.parametrize("key", sorted(WITH_PORT))
@pytest.mark.parametrize("port", ["0", "00", "1", "80", "65535", "65536", "99999", "00080"])
def test_every_port_setting_takes_exactly_1_to_65535(key, port):
    assert _accepted(key, WITH_PORT[key].format(port=port)) == (1 <= int(port) <= 65535)


@given(st.sampled_from(sorted(WITH_PORT)), st.integers(0, 99999))
@settings(max_examples=300, deadline=None)
def test_the_port_rule_holds_for_every_port(key, port):
    assert _accepted(key, WITH_PORT[key].format(port=port)) == (1 <= port <= 65535)


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("form", ["mirror.example/{t}", "mirror.example:5000/{t}/hub", "{t}.mirror.example"])
def test_a_registry_mirror_with_a_token_is_refused_without_showing_it(token, form):
    from envman.config import check_registry_mirror

    t = token.lower().replace("_", "-")  # a mirror path is lowercase
    value = form.format(t=t)
    with pytest.raises(Invalid) as e:
        check_registry_mirror(value)
    assert t not in e.value.what and t not in str(e.value.fix) and "\n" not in e.value.what
    assert shown_url(value) != value


@pytest.mark.parametrize("value", ["mirror.example", "mirror.example:5000/dockerhub", "registry.corp.example/hub/v2",
                                   "localhost:5000", "[::1]:5000/x"])
def test_an_ordinary_registry_mirror_is_taken(value):
    assert _accepted("registry_mirror", value)


@pytest.mark.parametrize("name", [
    "envman-test-3f9a2b7c1d4e-tampered-stack", "ml-team-a1b2c3d4e5f6", "pytorch-cu124-2024-mirror",
    "dockerhub-proxy-eu-west-1", "registry-mirror-2024-11-26-v2",
])
def test_names_of_words_and_short_ids_are_not_tokens(name):
    from envman.config import check_registry_mirror, looks_like_token, token_in_path

    assert not looks_like_token(name)
    assert check_registry_mirror(f"127.0.0.1:5000/{name}") == f"127.0.0.1:5000/{name}"
    assert token_in_path(f"https://pypi.corp.example/{name}/simple") is None


@pytest.mark.parametrize("name", [
    "team-aB3kF9xQ2mZ7pL4wR8tYq", "9fQ2xL7mN4pR8tV1wZ3yB6cD_proxy", "hub.Zk3p9QmX7vT2rW8yL4nB6c.io",
    "123e4567-e89b-12d3-a456-426614174000",
])
def test_a_random_run_or_a_uuid_inside_a_name_is_a_token(name):
    from envman.config import looks_like_token

    assert looks_like_token(name)
