"""``envman cdi generate``: a CDI spec of this host's NVIDIA GPUs, for Podman (or any CDI runtime)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from envman.cli._out import emit_line, emit_text
from envman.engine.cdi import DEFAULT_SPEC_PATH as DEFAULT_SPEC


def generate(
    output: Annotated[
        Optional[str],
        typer.Option("--output", "-o", help=f"Write the spec to this file (e.g. {DEFAULT_SPEC}); default: print it.",
                     show_default=False),
    ] = None,
) -> None:
    """Describe this host's NVIDIA GPUs as a CDI spec: device nodes, the driver's libraries and programs (read-only
    under /usr/local/nvidia), devices by index, UUID and 'all'. Podman then runs `--device nvidia.com/gpu=all`."""
    from envman.engine import cdi
    from envman.errors import EnvmanError, UserError

    try:
        spec = cdi.check_spec(cdi.spec_for(cdi.discover("/")))
    except cdi.CdiError as e:
        raise EnvmanError(f"cdi generate: {e}") from None
    text = cdi.spec_json(spec)
    if output is None or output == "-":
        emit_text(text)
        return
    from envman.state import atomic_write

    path = Path(output)
    if path.suffix not in (".json",):
        raise UserError(f"cdi generate: --output {output}: a CDI spec file must end in .json (Podman reads "
                        f"*.json and *.yaml from /etc/cdi and /var/run/cdi); e.g. {DEFAULT_SPEC}")
    if path.is_dir():
        raise UserError(f"cdi generate: --output {output} is a folder: name the file, e.g. {path / 'envman-nvidia.json'}")
    try:
        atomic_write(path, text, mode=0o644)
    except OSError as e:
        raise UserError(f"cdi generate: cannot write {output}: {e.strerror or e} (writing under /etc/cdi needs root)") from None
    devices = ", ".join(f"nvidia.com/gpu={d['name']}" for d in spec["devices"])
    emit_line(f"wrote {output}: {devices}", err=True)
