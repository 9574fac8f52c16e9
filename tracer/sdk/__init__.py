"""The OpenTelemetry SDK pipeline :func:`tracer.setup` installs: ``setup.py`` (the
provider, its resource, sampler, processors and exporter in one call), ``batch.py``
(the batch processor that queues span snapshots the garbage collector ignores),
``snapshot.py`` (an ended span as one flat tuple), ``probe.py`` (a span the installed
SDK made, to check the fast paths on) and ``json_export.py`` (OTLP/HTTP with JSON
bodies).
"""
