"""The ConvexTok LP, one stage per module; import what you need from the module itself.

- graph: the tokenisation graph of a counted corpus (every colour, every edge) and the reduced
  LP over a set of candidate colours (`TokenisationGraph`, `LinearProgram`);
- relax: column generation, the whole pipeline: solve the reduced LP, price the colours left
  out, add those that would lower it, repeat (`relax`, `Relaxation`);
- solvers: the LP backends behind one `solve` (HiGHS, PDLP, cuOpt);
- dual: the LP-free solver, smoothed dual ascent on the full graph (`dual_ascent`);
- bound: certified lower bounds from any duals, and the token count of a vocabulary, the other
  side of the gap (`certify_on_full_graph`, `shortest_path_tokens`); on a length-capped graph,
  bounds for every vocabulary with the longer edges priced on the fly (`uncapped_bound`);
- rounding: colour values or prices to K tokens (`round_colours`: det, bias, int, price);
- memory: a run's peak memory estimated from the counts, and the check that refuses one the
  machine cannot hold (`guard`, `check_lp`).
"""
