"""The words after a command's first ``--``: a command to run, never options or arguments."""

from __future__ import annotations


def keep_command_words(ctx, args: list[str], key: str) -> list[str]:
    """Keep the words after the first ``--`` in ``ctx.meta[key]`` (``[]`` when there is none) and
    return the words before it, which the command parses as its options and arguments."""
    if "--" in args:
        i = args.index("--")
        ctx.meta[key] = list(args[i + 1:])
        return args[:i]
    ctx.meta[key] = []
    return args
