"""The options the programs share to reach the cluster: ``$RAFTSCHED_CLUSTER`` and TLS.

Apart from :mod:`raftsched.cli.cluster` (which connects the admin CLI through the SDK) so that
``raftsched-executor`` takes the same options without loading the SDK, and through it the state
machine (``tests/unit/test_layers.py`` checks that the executor program never loads it).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raftsched.config.types import ClusterConfig
    from raftsched.security.tls import TlsConfig

__all__ = ["CLUSTER_ENV", "TLS_HELP", "add_tls_options", "tls_from_args"]

CLUSTER_ENV = "RAFTSCHED_CLUSTER"
TLS_HELP = (
    "TLS: each of --tls-ca/--tls-cert/--tls-key, else $RAFTSCHED_TLS_CA/CERT/KEY, else the "
    "--config file's [tls] (its CA, and the node certificate as client certificate); none of "
    "them: plaintext."
)


def add_tls_options(parser: argparse.ArgumentParser) -> None:
    """``--tls-ca``, ``--tls-cert`` and ``--tls-key`` (read by :func:`tls_from_args`)."""
    parser.add_argument(
        "--tls-ca", metavar="FILE", help="PEM CA certificate(s) the nodes' certificates must chain to"
    )
    parser.add_argument(
        "--tls-cert", metavar="FILE", help="PEM client certificate (for nodes that require one)"
    )
    parser.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")


def tls_from_args(args: argparse.Namespace, config: ClusterConfig | None) -> TlsConfig | None:
    """The TLS the options, the environment or ``config`` ask for (see :data:`TLS_HELP`)."""
    from raftsched.security.tls import client_tls  # lazily: it loads gRPC

    return client_tls(args.tls_ca, args.tls_cert, args.tls_key, config=config)
