"""The user config file: [network] values, validation with file/key in one-line errors, precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from envman.config import NETWORK_KEYS, NetworkConfig, config_path, load_config, load_network_config
from envman.errors import UserError
from envman.render.options import RenderOptions

PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


def test_no_file_means_no_settings(tmp_path):
    assert load_config(tmp_path / "config.toml") == {}
    assert load_network_config(tmp_path / "config.toml") == NetworkConfig()
    assert load_network_config(tmp_path / "config.toml").given() == {}
    assert RenderOptions.from_config({}, config_file=tmp_path / "config.toml") == RenderOptions()


def test_location_follows_envman_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path))
    assert config_path() == tmp_path / "config.toml"


def test_every_key_is_read_and_validated(tmp_path):
    (tmp_path / "ca.pem").write_text(PEM)
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "torch-2.4.1-py3-none-any.whl").write_bytes(b"x")
    cfg = write(
        tmp_path,
        """
[network]
registry_mirror = "registry.corp.example:5000/hub/"
ca_bundle = "ca.pem"
pip_index = "https://pypi.corp.example/simple"
pip_extra_index = "https://extra.corp.example/simple"
framework_index = "https://torch.corp.example/whl/cu124"
wheelhouse = "wheels"
offline = true
apt_mirror = "http://apt.corp.example/ubuntu"
python_install_mirror = "https://pbs.corp.example/dl"

[project]
other = "tables belong to other features"
""",
    )
    net = load_network_config(cfg)
    assert set(net.given()) == set(NETWORK_KEYS)
    assert net.registry_mirror == "registry.corp.example:5000/hub"
    assert net.ca_bundle == (tmp_path / "ca.pem").resolve()  # relative to the config file
    assert net.wheelhouse == (tmp_path / "wheels").resolve()
    assert net.offline is True
    o = RenderOptions.from_config({}, config_file=cfg)
    assert o.offline and o.wheelhouse == (tmp_path / "wheels").resolve()


@pytest.mark.parametrize(
    "body,expect",
    [
        ("[network\n", "not valid TOML"),
        ('network = "x"\n', "[network] must be a table"),
        ('[network]\npip_indx = "https://x.example/simple"\n', "[network].pip_indx: unknown key network.pip_indx"),
        ('[network]\npip_index = "ftp://x.example/simple"\n', "[network].pip_index"),
        ('[network]\napt_mirror = "https://me:secret@x.example/debian"\n', "never bakes credentials"),
        ('[network]\napt_mirror = 3\n', "[network].apt_mirror"),
        ('[network]\noffline = "yes"\n', "[network].offline"),
        ('[network]\nregistry_mirror = "mirror"\n', "[network].registry_mirror"),
        ('[network]\nca_bundle = "missing.pem"\n', "[network].ca_bundle"),
        ('[network]\nwheelhouse = "missing-dir"\n', "[network].wheelhouse"),
    ],
)
def test_malformed_config_is_one_line_naming_file_and_key(tmp_path, body, expect):
    cfg = write(tmp_path, body)
    with pytest.raises(UserError) as info:
        RenderOptions.from_config({}, config_file=cfg)
    line = info.value.line()
    assert "\n" not in line
    assert str(cfg) in line and expect in line
    assert info.value.exit_code == 2


def test_ca_bundle_that_is_not_pem_names_the_key(tmp_path):
    (tmp_path / "ca.der").write_bytes(b"\x30\x82")
    cfg = write(tmp_path, '[network]\nca_bundle = "ca.der"\n')
    with pytest.raises(UserError, match=r"\[network\]\.ca_bundle: CA bundle .* is not PEM"):
        load_network_config(cfg)


def test_not_utf8(tmp_path):
    p = tmp_path / "config.toml"
    p.write_bytes(b"\xff\xfe[network]")
    with pytest.raises(UserError, match="UTF-8"):
        load_config(p)


def test_cli_overrides_config_and_none_means_not_given(tmp_path):
    cfg = write(tmp_path, '[network]\npip_index = "https://config.example/simple"\napt_mirror = "http://apt.config.example/u"\n')
    o = RenderOptions.from_config({"pip_index": "https://cli.example/simple", "apt_mirror": None}, config_file=cfg)
    assert o.pip_index == "https://cli.example/simple"
    assert o.apt_mirror == "http://apt.config.example/u"


def test_cli_values_are_validated_with_the_option_name(tmp_path):
    with pytest.raises(UserError, match="^--pip-extra-index: "):
        RenderOptions.from_config({"pip_extra_index": "not a url"}, config_file=tmp_path / "none.toml")
    with pytest.raises(UserError, match="unknown network option 'pip_mirror'"):
        RenderOptions.from_config({"pip_mirror": "https://x.example"}, config_file=tmp_path / "none.toml")


def test_offline_in_config_without_wheelhouse(tmp_path):
    cfg = write(tmp_path, "[network]\noffline = true\n")
    with pytest.raises(UserError, match="needs a wheelhouse"):
        RenderOptions.from_config({}, config_file=cfg)
    assert not RenderOptions.from_config({"offline": False}, config_file=cfg).offline  # --online wins


def test_options_are_frozen_and_describe_what_is_set():
    o = RenderOptions(pip_index="https://pypi.corp.example/simple")
    with pytest.raises(Exception):
        o.pip_index = "https://other.example/simple"  # type: ignore[misc]
    assert o.describe() == {"pip_index": "https://pypi.corp.example/simple"}


# --- one reader for every table ------------------------------------------------------------------


def _loaders():
    from envman.cluster.slurm import load_slurm_config
    from envman.config import load_build_config, load_matrix_config
    from envman.engine.select import load_engine_config
    from envman.images.remote import load_registry_settings
    from envman.project.settings import load_user_config

    return {
        "network": load_network_config, "build": load_build_config, "matrix": load_matrix_config,
        "engine": load_engine_config, "registry": load_registry_settings,
        "run": load_user_config, "project": load_user_config, "slurm": load_slurm_config,
    }


@pytest.mark.parametrize("table", ["network", "build", "engine", "registry", "matrix", "run", "project", "slurm"])
def test_every_table_is_checked_the_same_way(tmp_path, monkeypatch, table):
    from envman.config import TABLES

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path))
    cfg = tmp_path / "config.toml"
    load = _loaders()[table]
    cfg.write_text(f"{table} = 3\n")
    with pytest.raises(UserError) as e:
        load(cfg)
    assert e.value.line() == (f"{cfg}: [{table}]: [{table}] must be a table — "
                              f"write [{table}] on a line of its own, then its keys (key = value)")
    cfg.write_text(f"[{table}]\nnot_a_key = 1\n")
    with pytest.raises(UserError) as e:
        load(cfg)
    assert e.value.line() == (f"{cfg}: [{table}].not_a_key: unknown key {table}.not_a_key — "
                              f"known keys in [{table}]: " + ", ".join(TABLES[table]))
    assert e.value.exit_code == 2
    cfg.write_text(f"[{table}]\n[elsewhere]\nanything = 1\n")  # tables envman does not know are left alone
    load(cfg)


def test_the_file_is_parsed_once_per_content(tmp_path, monkeypatch):
    import envman.safefile as safefile

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path))
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'# {tmp_path}\n[network]\npip_index = "https://a.example/simple"\n[run]\nshm_size = "2g"\n'
                   '[slurm]\nruntime = "podman"\n')  # content no other test wrote
    parses = []
    real = safefile.parse_toml
    monkeypatch.setattr(safefile, "parse_toml", lambda *a, **kw: parses.append(1) or real(*a, **kw))
    loaders = _loaders()
    for name in ("network", "build", "engine", "registry", "matrix", "run", "slurm"):
        loaders[name](cfg)
    assert len(parses) == 1
    cfg.write_text(f'# {tmp_path}\n[network]\npip_index = "https://b.example/simple"\n')  # new content: read again
    assert load_network_config(cfg).pip_index == "https://b.example/simple"
    assert len(parses) == 2


def test_the_matrix_table_comes_back_typed(tmp_path):
    from envman.config import MatrixConfig, load_matrix_config

    cfg = tmp_path / "config.toml"
    cfg.write_text('[matrix]\nfiles = ["ours.toml", "/abs/theirs.toml"]\ntorch_index = "https://torch.corp.example/whl"\n')
    assert load_matrix_config(cfg) == MatrixConfig((tmp_path / "ours.toml", Path("/abs/theirs.toml")),
                                                   "https://torch.corp.example/whl")
    assert load_matrix_config(tmp_path / "absent.toml") == MatrixConfig((), None)


@pytest.mark.parametrize("table", ["network", "build", "engine", "registry", "matrix", "run", "project", "slurm"])
def test_every_table_comes_back_as_one_frozen_typed_value(tmp_path, monkeypatch, table):
    """No table comes back as a dict or a bare string: each loader returns a frozen dataclass."""
    import dataclasses

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path))
    for text in ("", f"[{table}]\n"):
        (tmp_path / "config.toml").write_text(text)
        value = _loaders()[table](tmp_path / "config.toml")
        assert dataclasses.is_dataclass(value) and not isinstance(value, type)
        assert type(value).__dataclass_params__.frozen  # type: ignore[attr-defined]


@pytest.mark.parametrize("table,key", [("network", "offline"), ("registry", "allow_http"), ("registry", "pull_on_run"),
                                       ("registry", "trust_registry")])
@pytest.mark.parametrize("value", ['"yes"', "1", "0", '"true"', "[true]"])
def test_a_key_that_takes_true_or_false_has_one_wording_in_every_table(tmp_path, monkeypatch, table, key, value):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path))
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"[{table}]\n{key} = {value}\n")
    with pytest.raises(UserError) as e:
        _loaders()[table](cfg)
    shown = {'"yes"': "'yes'", '"true"': "'true'", "[true]": "[True]"}.get(value, value)
    assert e.value.line() == (f"{cfg}: [{table}].{key}: {key} must be true or false, got {shown} — "
                              f"write {key} = true or {key} = false")
