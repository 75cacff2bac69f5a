"""``agent-session demo``: the reference stack assembled, a crash child that SIGKILLs itself
at a named failpoint, and the story the command tells."""
