"""One trace attributed into a row (:mod:`.attribute`), traces of one shape a batch at a
time (:mod:`.batches`, :mod:`.walks`, :mod:`.shapes`) and what is read of every trace
(:mod:`.words`, in C where ``_native.c`` is built)."""
