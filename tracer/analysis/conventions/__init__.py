"""The conventions of other instrumentation and serving engines, as data: the stage map
and ``conventions.toml``, a serving engine's request span phases."""
