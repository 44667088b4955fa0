"""Workflows (DAGs): definitions, validation, workflow files, templates and the pure run state machine.

Everything here is pure (no clock, no IO) except :mod:`raftsched.workflow.files`, which reads
workflow files at the CLI/SDK edge.
"""
