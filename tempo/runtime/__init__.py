"""The neutral runtime: tempo's push-based reference engine, beneath every executor.

``policy`` (an input's ``AdvanceTimeSettings`` decoded once into ticks), ``ingress`` (an
input's checks and CTIs, by the rules of ``tempo.rules``), ``operator`` (the protocol of the
push-based operators, one per plan node, each in its family's module beside it, with
``release_queues``), ``codegen`` (expressions as Python code), ``engine``
(compiling a plan into operators, the arrival-order merge, result assembly) and ``replay``
(CTIs replayed on the driver for executors that compute events in bulk). The in-memory
executor wraps the engine; the Spark executor uses the replay and the ingress rules on the
driver. The runtime imports no executor package (docs/architecture.md).
"""
