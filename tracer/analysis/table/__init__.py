"""Per-trace results as compact arrays (the trace table and its columns, trace ids, the
sparse rows, their reordering, memory given back, the workers' transfer) and the
reported figures read from them."""
