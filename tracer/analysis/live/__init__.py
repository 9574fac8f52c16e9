"""The collector's live metrics, the analyzer's side: the attribution process the
receiver starts by module path (:mod:`.worker`) and the traces it attributes
(:mod:`.attribution`)."""
