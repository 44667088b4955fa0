"""The replicated state machine (pure: no clock, no randomness, no IO but the injected store).

* :mod:`~raftsched.fsm.state` — :class:`SchedulerState`: ``apply`` (format, idempotency, epoch
  fencing, the apply chain), the table that hands each command to its book, loading, and the
  locked read methods. It is the host every book works through.
* The books, each over a narrow host protocol the state implements:
  :mod:`~raftsched.fsm.tasks` (task records and commands), :mod:`~raftsched.fsm.fires` (fire
  batches, overlap, fire records), :mod:`~raftsched.fsm.runs` (unfinished runs, results,
  retries, run history: the one writer of a run record; what a run raises is
  :mod:`~raftsched.fsm.run_alerts`), :mod:`~raftsched.fsm.executors`
  (membership, draining, placement flags, assignments), :mod:`~raftsched.fsm.workflows` (runs;
  with :mod:`~raftsched.fsm.workflow_defs`, definitions, and :mod:`~raftsched.fsm.workflow_model`,
  what both share), :mod:`~raftsched.fsm.hot` (the columnar hot path; with
  :mod:`~raftsched.fsm.hot_slots` and :mod:`~raftsched.fsm.hot_wire`),
  :mod:`~raftsched.fsm.policy` (quotas, locks), :mod:`~raftsched.fsm.calendars`,
  :mod:`~raftsched.fsm.alerts`, :mod:`~raftsched.fsm.access` (tokens, audit),
  :mod:`~raftsched.fsm.membership`.
* :mod:`~raftsched.fsm.snapshot` — the canonical snapshot, its digests, the format checks.
* :mod:`~raftsched.fsm.view` — the one read path into the in-memory state for other threads.
* :mod:`~raftsched.fsm.effects` — what ``apply`` returns (:class:`Applied`) and the effects the
  leader carries out after commit.
* :mod:`~raftsched.fsm.records` — :class:`TaskState`, :class:`Retention` and record helpers.
* :mod:`~raftsched.fsm.rules` — refusals shared by task and workflow commands.
* :mod:`~raftsched.fsm.queries` — read queries over a store reader and the in-memory view.
* :mod:`~raftsched.fsm.keys` — the key layout of the store.

Dependencies point one way: ``state`` → the books → ``effects``/``records``/``rules``/``keys``;
no book imports ``state`` (``tests/unit/test_fsm_modules.py`` checks it).
"""
