"""envman.images.build by rule (docs/security.md, "Mutation testing")."""

from __future__ import annotations
