"""The command-line programs, one module each: its `main()` (the entry point in pyproject.toml's
[project.scripts]), its options, what it prints and its exit status. The work itself is library code elsewhere:

| command | module | library code |
|---|---|---|
| tsrl-train | `train.py` | tsrl.training.loop.train (a run: tsrl.training) |
| tsrl-judge-check | `judge_check.py` | tsrl.calibration.check.run_check |
| tsrl-eval | `evaluate.py` | tsrl.evaluation.report.evaluate_policies |
| tsrl-ladder | `ladder.py` | tsrl.anchors.build.build_ladders |
| tsrl-reproduce | `reproduce.py` | tsrl.reproduce (the grid, its multiruns, the tables) and tsrl.reproduce.tables |
| tsrl-human-study | `human_study.py` | tsrl.evaluation.human_study, tsrl.evaluation.study_sheets |
| tsrl-serve-judge | `serve_judge.py` | tsrl.remote.serve |
| tsrl-sweep | `sweep.py` | tsrl.reproduce.sweep (a multirun's sweep.md and sweep.png, also written as it ends) |

The four Hydra commands share `base.py`: the components and the command's root schema registered, `recipes=<name>`
checked, the composed config converted once to typed dataclasses (roots extend tsrl.config.CommandConfig), a
UserError or a misspelled key (named with the nearest real one) turned into one sentence and exit status 2, Ctrl-C
into one line and exit status 130, libraries' notes kept off the console (in the run's log file). This package is
the top layer: nothing else in tsrl imports it (tests/unit/test_layers.py).
"""
