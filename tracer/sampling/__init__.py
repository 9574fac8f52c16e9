"""Which traces a service keeps: the samplers of :func:`tracer.setup`
(``samplers.py``: ``parentbased_always_on`` in one step, and the consistent probability
sampler of ``sample_ratio``), an unsampled trace's requests past the server-span
middleware (``unsampled.py``), and the OTEP 235 threshold in the trace state
(``threshold.py``, ``ot=th:...``), which the analyzer reads to weigh a kept trace.
"""
