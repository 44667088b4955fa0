"""The Raft tick-thread probe (``sitecustomize.py``) and its report (``report.py``)."""
