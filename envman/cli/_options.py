"""Options shared by ``envman render``, ``envman build`` and ``envman ci run``, declared once:
:class:`BuildFlags` is the group of the network, builder and base options, with the same names,
the same help, and one conversion to :class:`envman.render.options.RenderOptions`; a command
takes the group as one parameter (:func:`option_group`) and typer sees its options one by one.

Each option is ``None`` when not given, so the user config (``[network]`` and ``[build]`` in
``config.toml``) fills it; ``--offline/--online`` is three-valued for the same reason.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional, TypeVar

import typer

if TYPE_CHECKING:
    from envman.config import BaseMode
    from envman.render.options import RenderOptions

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
) -> RenderOptions:
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


@dataclasses.dataclass(frozen=True)
class BuildFlags:
    """The network, builder and base options of ``render``, ``build`` and ``ci run``, as given
    (``None``: not given), in the order their ``--help`` lists them."""

    registry_mirror: RegistryMirror = None
    ca_bundle: CaBundle = None
    pip_index: PipIndex = None
    pip_extra_index: PipExtraIndex = None
    framework_index: FrameworkIndex = None
    wheelhouse: Wheelhouse = None
    offline: Offline = None
    apt_mirror: AptMirror = None
    python_mirror: PythonMirror = None
    builder: BuilderOpt = None
    base: BaseOpt = None

    def render_options(self) -> RenderOptions:
        """The network options over the user config's ``[network]``."""
        return network_options(
            registry_mirror=self.registry_mirror, ca_bundle=self.ca_bundle, pip_index=self.pip_index,
            pip_extra_index=self.pip_extra_index, framework_index=self.framework_index, wheelhouse=self.wheelhouse,
            offline=self.offline, apt_mirror=self.apt_mirror, python_mirror=self.python_mirror,
        )

    def builder_preference(self) -> str:
        return builder_preference(self.builder)

    def base_mode(self) -> BaseMode:
        return base_preference(self.base)


F = TypeVar("F", bound=Callable[..., Any])


def option_group(name: str, group: type) -> Callable[[F], F]:
    """Declare a dataclass of options once and take it as one parameter: the command's parameter
    ``name`` (annotated with ``group``) is shown to typer as the group's fields, each with its
    ``Annotated`` option and default, in their order and at that parameter's place (so ``--help``
    lists them as if written out); the command is called with ``name=group(...)``. Called
    directly, the command takes the fields as keywords too."""
    hints = typing.get_type_hints(group, include_extras=True)
    members = [f for f in dataclasses.fields(group)]

    def wrap(func: F) -> F:
        sig = inspect.signature(func, eval_str=True)
        if name not in sig.parameters:
            raise TypeError(f"{func.__qualname__} has no parameter {name!r} for {group.__name__}")
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            if p.name != name:
                params.append(p)
                continue
            params += [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=hints[f.name],
                                         default=f.default) for f in members]

        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> Any:
            kwargs[name] = group(**{f.name: kwargs.pop(f.name, f.default) for f in members})
            return func(*args, **kwargs)

        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not p.empty}
        return typing.cast(F, command)

    return wrap


def platform_option(value: str | None) -> str | None:
    """``--platform`` as an OCI platform (``linux/arm64``), ``None`` when not given."""
    from envman.stack.names import parse_platform

    return parse_platform(value) if value is not None else None


def base_preference(value: str | None) -> BaseMode:
    """``--base`` when given, else ``[build] base`` of the user config, else ``auto``."""
    from envman.config import base_mode, load_base_config

    return load_base_config() if value is None else base_mode(value, where="--base")


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
