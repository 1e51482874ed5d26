"""Running a project: the plan, preflight, the fast path cache, and the daily commands around it."""
