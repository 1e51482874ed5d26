"""Network options shared by ``envman render``, ``envman build`` and ``envman ci run``: the same
names, the same help, and one conversion to :class:`envman.render.options.RenderOptions`.

Each option is ``None`` when not given, so the user config (``[network]`` in ``config.toml``)
fills it; ``--offline/--online`` is three-valued for the same reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

RegistryMirror = Annotated[Optional[str], typer.Option("--registry-mirror", help="Pull Docker Hub base images through this registry: HOST, HOST:PORT or HOST:PORT/PATH (also makes rows on deleted bases buildable).", show_default=False)]
CaBundle = Annotated[Optional[Path], typer.Option("--ca-bundle", help="PEM bundle that apt, pip and uv trust inside the build.", show_default=False)]
PipIndex = Annotated[Optional[str], typer.Option("--pip-index", help="Replace PyPI as pip's index.", show_default=False)]
PipExtraIndex = Annotated[Optional[str], typer.Option("--pip-extra-index", help="Add a pip index.", show_default=False)]
FrameworkIndex = Annotated[Optional[str], typer.Option("--framework-index", help="Replace the framework's own index or find-links page (e.g. PyTorch's).", show_default=False)]
Wheelhouse = Annotated[Optional[Path], typer.Option("--wheelhouse", help="Directory of *.whl installed first (copied into the context).", show_default=False)]
Offline = Annotated[Optional[bool], typer.Option("--offline/--online", help="Install only from --wheelhouse, no index (default: config, else online).", show_default=False)]
AptMirror = Annotated[Optional[str], typer.Option("--apt-mirror", help="Rewrite the image's apt sources to this mirror URL.", show_default=False)]
Platform = Annotated[Optional[str], typer.Option("--platform", help="Build for this platform: linux/amd64 (default) or linux/arm64 (same as an -arm64 stack name).", show_default=False)]
BuilderOpt = Annotated[Optional[str], typer.Option("--builder", help="auto (BuildKit when the engine and a docker CLI support it), buildkit or classic (default: \\[build] builder in the config, else auto).", show_default=False)]
BaseOpt = Annotated[Optional[str], typer.Option("--base", help="How a stack gets an nvidia/cuda base NVIDIA no longer serves: auto (pull what is served, rebuild the rest from NVIDIA's recipe), pull or rebuild (default: \\[build] base in the config, else auto).", show_default=False)]
PythonMirror = Annotated[Optional[str], typer.Option("--python-mirror", help="python-build-standalone mirror for uv (UV_PYTHON_INSTALL_MIRROR).", show_default=False)]


def network_options(
    *,
    registry_mirror: str | None,
    ca_bundle: Path | None,
    pip_index: str | None,
    pip_extra_index: str | None,
    framework_index: str | None,
    wheelhouse: Path | None,
    offline: bool | None,
    apt_mirror: str | None,
    python_mirror: str | None,
):
    """RenderOptions from the command line (``None``: not given) over the user config."""
    from envman.render.options import RenderOptions

    return RenderOptions.from_config({
        "registry_mirror": registry_mirror,
        "ca_bundle": ca_bundle,
        "pip_index": pip_index,
        "pip_extra_index": pip_extra_index,
        "framework_index": framework_index,
        "wheelhouse": wheelhouse,
        "offline": offline,
        "apt_mirror": apt_mirror,
        "python_install_mirror": python_mirror,
    })


def platform_option(value: str | None) -> str | None:
    """``--platform`` as an OCI platform (``linux/arm64``), ``None`` when not given."""
    from envman.stack.names import parse_platform

    return parse_platform(value) if value is not None else None


def base_preference(value: str | None) -> str:
    """``--base`` when given, else ``[build] base`` of the user config, else ``auto``."""
    from envman.config import BASE_MODES, load_base_config
    from envman.errors import UserError

    if value is None:
        return load_base_config()
    if value not in BASE_MODES:
        raise UserError(f"--base {value!r} is not one of {', '.join(BASE_MODES)}", where="--base",
                        fix="use --base auto, pull or rebuild")
    return value


def builder_preference(value: str | None) -> str:
    """``--builder`` when given, else ``[build] builder`` of the user config, else ``auto``."""
    from envman.config import BUILDERS, load_builder_config
    from envman.errors import UserError

    if value is None:
        return load_builder_config()
    if value not in BUILDERS:
        raise UserError(f"--builder {value!r} is not one of {', '.join(BUILDERS)}", where="--builder",
                        fix="use --builder auto, buildkit or classic")
    return value
