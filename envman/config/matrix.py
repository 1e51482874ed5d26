"""config.toml's ``[matrix]`` table: the user's matrix files and the PyTorch variant index
``envman matrix update`` reads, parsed into one typed value, :class:`MatrixConfig`::

    [matrix]
    files = ["~/envman/ours.toml", "updates.toml"]   # relative: to the config file's folder
    torch_index = "https://torch.corp.example/whl"
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from envman.config.values import Invalid, check_url
from envman.errors import UserError

#: The keys of ``[matrix]``.
MATRIX_KEYS = ("files", "torch_index")


@dataclass(frozen=True)
class MatrixConfig:
    """The ``[matrix]`` table, checked: the user's matrix files (absolute or relative to the
    config file's folder) and the PyTorch variant index ``envman matrix update`` reads."""

    files: tuple[Path, ...] = ()
    torch_index: str | None = None

    @classmethod
    def parse(cls, table: Mapping[str, Any], *, folder: Path, where: Callable[[str], str]) -> "MatrixConfig":
        """``table`` (``[matrix]``'s keys) checked: ``files`` a list of paths (relative to
        ``folder``), ``torch_index`` an index URL; ``where(key)`` names a value in errors."""
        files: tuple[Path, ...] = ()
        if "files" in table:
            value = table["files"]
            if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                raise UserError("files must be a list of paths", where=where("files"),
                                fix='e.g. files = ["~/envman/ours.toml"]')
            files = tuple(p if p.is_absolute() else folder / p for p in (Path(v).expanduser() for v in value))
        torch_index = None
        if "torch_index" in table:
            try:
                torch_index = check_url(table["torch_index"], what="torch index")
            except Invalid as exc:
                raise UserError(exc.what, where=where("torch_index"), fix=exc.fix) from None
        return cls(files, torch_index)


__all__ = ["MATRIX_KEYS", "MatrixConfig"]
