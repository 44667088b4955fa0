"""What a node or an executor tells the outside about itself: Prometheus metrics and probes.

* :mod:`.metrics` — the metric primitives and their exposition (the only ``prometheus_client``
  import);
* :mod:`.tally` — pure, node-local counts of what the state machine applied (fires by outcome,
  finished runs, attempt results), read at scrape time;
* :mod:`.node` and :mod:`.executor` — the metric sets of a scheduler node and of an executor;
* :mod:`.grpc_metrics` — a gRPC server interceptor counting requests by method and code;
* :mod:`.listener` — the HTTP listener (``/metrics``, ``/healthz``, ``/readyz``, and whatever
  routes others add; the only ``aiohttp`` import);
* :mod:`.node_http` and :mod:`.executor_http` — each wires a metric set and a listener to a
  node or an executor;
* :mod:`.lateness` — the bounded lateness samples and memory figure ``raftsched status`` shows.

This package imports nothing at package level, so the pure :mod:`.tally` can be used by the state
machine without pulling in an HTTP server.
"""
