"""Cluster configuration: one TOML file → frozen, validated values.

Every node (``raftsched-node --config cluster.toml --node-id n1``) and the CLI
(``raftsched --config cluster.toml ...``) read the same file. It is validated as a whole before
anything starts: :class:`raftsched.errors.ConfigError` lists *every* problem at once, each prefixed
with its key path (``nodes[2].raft: port 70000 out of range (1-65535)``). ``nodes[i]`` counts the
``[[nodes]]`` tables from 0 in file order. Unknown keys are problems too, so a typo is never
silently ignored.

The value types validate again at construction, so a hand-built :class:`ClusterConfig` (in tests,
in :mod:`raftsched.testing`) holds the same invariants as one read from a file.

The package is split so that leaf code loads only what it needs: :mod:`~raftsched.config.values`
(one value at a time: addresses, sizes, ids; the executor and the client use only this),
:mod:`~raftsched.config.types` (the frozen value types) and :mod:`~raftsched.config.load` (the
TOML file). This ``__init__`` imports nothing, so importing a submodule loads no other.

This package reads no clock and starts nothing. :func:`parse_config` reads one file at most: the
``cluster.secret_file``, when given. The ``[tls]`` files are only named here; the node reads and
checks them when it starts serving (:mod:`raftsched.security.tls`), and again on SIGHUP.

Safe defaults: a configuration whose gRPC API would be reachable beyond this machine (any
``grpc`` or ``grpc_bind`` address that is not loopback) is refused unless TLS *and*
authentication are configured, or ``cluster.insecure = true`` says the exposure is deliberate.
The same holds for a node's HTTP listener (``http``, which serves the HTTP/JSON API and the
console), with TLS on that listener (``tls.http = true``).
"""
