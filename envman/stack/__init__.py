"""Stacks: the name grammar, resolving a name against the matrix, and the per-GPU verdict."""
