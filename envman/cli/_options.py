"""Network options shared by ``envman build`` and ``envman ci run`` (same names, same help)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

RegistryMirror = Annotated[Optional[str], typer.Option("--registry-mirror", help="Pull base images through this registry: HOST, HOST:PORT or HOST/PATH (also makes rows on deleted bases buildable).")]
CaBundle = Annotated[Optional[Path], typer.Option("--ca-bundle", help="PEM bundle apt/pip/uv trust inside the build.")]
PipIndex = Annotated[Optional[str], typer.Option("--pip-index", help="Replace PyPI as pip's index.")]
PipExtraIndex = Annotated[Optional[str], typer.Option("--pip-extra-index", help="Add a pip index.")]
FrameworkIndex = Annotated[Optional[str], typer.Option("--framework-index", help="Replace the framework's own index (e.g. PyTorch's).")]
Wheelhouse = Annotated[Optional[Path], typer.Option("--wheelhouse", help="Directory of wheels installed offline first.")]
Offline = Annotated[bool, typer.Option("--offline", help="Install only from --wheelhouse (no index).")]
AptMirror = Annotated[Optional[str], typer.Option("--apt-mirror", help="Rewrite the image's apt sources to this mirror.")]
