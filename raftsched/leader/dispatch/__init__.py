"""The leader's dispatch: committed attempts to executors (see :mod:`.dispatcher`)."""
