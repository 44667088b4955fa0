"""Integration tests: real node processes, pysyncobj, LMDB and gRPC on loopback."""
