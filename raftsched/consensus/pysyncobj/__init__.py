"""The consensus adapter over pysyncobj: the only package in raftsched that imports pysyncobj.

``node`` (:class:`PySyncObjNode`, the SyncObj subclass), ``transport`` (the Raft-port guard),
``snapshot`` (the snapshot file format and the checks of pysyncobj's files), ``status`` (status
decoding) and ``patches`` (the ledger of every pysyncobj private member overridden or read).
"""
