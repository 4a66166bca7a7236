"""The runtime: the ``Runtime`` facade, inspection, answers, logging."""
