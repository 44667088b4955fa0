"""The replicated state machine (pure: no clock, no randomness, no IO but the injected store).

* :mod:`~raftsched.fsm.state` — :class:`SchedulerState`: ``apply``, snapshot and restore, the
  task, run and executor commands, and the locked read methods.
* :mod:`~raftsched.fsm.workflows` — :class:`WorkflowBook`, the workflow commands; it reaches the
  task side only through the :class:`~raftsched.fsm.workflows.TaskHost` protocol.
* :mod:`~raftsched.fsm.effects` — what ``apply`` returns (:class:`Applied`) and the effects the
  leader carries out after commit.
* :mod:`~raftsched.fsm.records` — :class:`TaskState`, :class:`Retention` and record helpers.
* :mod:`~raftsched.fsm.rules` — refusals shared by task and workflow commands.
* :mod:`~raftsched.fsm.queries` — read queries over a store reader and the in-memory view.
* :mod:`~raftsched.fsm.keys` — the key layout of the store.

Dependencies point one way: ``state`` → ``workflows`` → ``effects``/``records``/``rules``/``keys``;
``queries`` reads ``workflows``' book and is used by ``state``'s read methods and the servicers.
"""
