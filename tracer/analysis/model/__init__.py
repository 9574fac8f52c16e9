"""The model of a trace: the trace set, a trace prepared into stages, which span waits
for which, the critical path, the per-trace breakdown and the sub-stages."""
