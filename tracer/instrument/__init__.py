"""What marks an application's spans: the ``stage`` decorator and context manager
(``stage.py``, with ``context.py``'s attach and detach on its hot paths), FastAPI and
httpx (``web.py``), the GenAI attributes (``genai.py``), and what a load model reads
(``load.py``: CPU, cores, instance and pools; ``host.py``: the host's busy CPU).

The public names are :mod:`tracer`'s (``tracer.stage``, ``tracer.instrument_fastapi``,
...); these modules are where they live.
"""
