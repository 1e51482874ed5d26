"""config.toml's [network] table: one typed value (NetworkConfig), every key checked by the
validator the CLI option uses; hostile values refused in one line naming the file and key."""

from __future__ import annotations

import dataclasses

import pytest

from envman.config import NETWORK_KEYS, NetworkConfig, load_network_config
from envman.errors import UserError


def write(tmp_path, text):
    p = tmp_path / "config.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_the_table_has_one_field_per_key_and_is_frozen():
    assert [f.name for f in dataclasses.fields(NetworkConfig)] == list(NETWORK_KEYS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        NetworkConfig().pip_index = "https://x.example/simple"  # type: ignore[misc]


def test_given_names_only_what_is_set_offline_false_included(tmp_path):
    cfg = write(tmp_path, '[network]\noffline = false\npip_index = "https://pypi.corp.example/simple"\n')
    got = load_network_config(cfg)
    assert got == NetworkConfig(pip_index="https://pypi.corp.example/simple", offline=False)
    assert got.given() == {"pip_index": "https://pypi.corp.example/simple", "offline": False}


@pytest.mark.parametrize("key,value", [
    ("offline", '"false"'), ("offline", "0"), ("pip_index", "[]"), ("pip_index", '""'),
    ("registry_mirror", '"mirror.example:65536"'), ("registry_mirror", '"mirror.example:0"'),
    ("apt_mirror", '"http://apt.example/u\\u001b[2J"'), ("pip_index", '"https://pypi.example/sim ple"'),
    ("ca_bundle", "7"), ("wheelhouse", '{ path = "/tmp" }'),
])
def test_hostile_values_are_one_line_naming_file_and_key(tmp_path, key, value):
    cfg = write(tmp_path, f"[network]\n{key} = {value}\n")
    with pytest.raises(UserError) as e:
        load_network_config(cfg)
    line = e.value.line()
    assert line.startswith(f"{cfg}: [network].{key}: ") and " — " in line
    assert "\n" not in line and "\x1b" not in line and e.value.exit_code == 2


def test_a_port_at_the_limit_is_taken_and_one_past_is_not(tmp_path):
    assert load_network_config(write(tmp_path, '[network]\nregistry_mirror = "m.example:65535"\n')).registry_mirror == \
        "m.example:65535"
    with pytest.raises(UserError, match="port 65536 is out of range"):
        load_network_config(write(tmp_path, '[network]\nregistry_mirror = "m.example:65536"\n'))


def test_an_unknown_key_names_the_known_ones(tmp_path):
    cfg = write(tmp_path, '[network]\npip_mirror = "https://x.example"\n')
    with pytest.raises(UserError) as e:
        load_network_config(cfg)
    assert e.value.line() == (f"{cfg}: [network].pip_mirror: unknown key network.pip_mirror — known keys in [network]: "
                              + ", ".join(NETWORK_KEYS))
