"""Judge calibration: what `tsrl-judge-check` measures, and the simulated judge fitted to it by maximum likelihood."""
