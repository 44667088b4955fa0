"""Shared test support: the state machine's helpers (:mod:`.fsm`), one poll-with-deadline
(:mod:`.wait`) and one executor launcher (:mod:`.procs`)."""
