"""envman.run.plan and envman.run.prepare by rule (docs/security.md, "Mutation testing")."""

from __future__ import annotations
