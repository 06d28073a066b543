"""LP solvers behind one interface: `solve(lp, solver=...) -> Solution` with primal and row duals.

Backends:
- "highs": HiGHS dual simplex (exact; small LPs, tests), also "highs-ipm" and "highs-pdlp";
- "pdlp": OR-Tools PDLP, first order, the fastest CPU solver measured here (`polytok[pdlp]`);
- "cuopt": NVIDIA cuOpt PDLP on a GPU (`polytok[gpu]`), the solver of the ConvexTok paper.
"auto" takes cuopt when it imports and a GPU is visible, else pdlp when OR-Tools imports, else
highs. Whatever a solver reports as its objective is informational only: the bound comes from
its duals (polytok.lp.bound).

Dual convention everywhere: for rows l <= A x <= u of a minimisation, y_i > 0 means the lower
bound pushes, y_i < 0 the upper one, and the reduced costs are c - A^T y.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import time
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse

from polytok.errors import ConfigError, SolverError
from polytok.lp.graph import LinearProgram

PDLP_SHARDS = 32
"""PDLP work units: enough for 8 threads to balance, fixed so results do not depend on threads."""

SOLVERS = ("auto", "highs", "highs-ipm", "highs-pdlp", "pdlp", "cuopt")


@dataclass
class Solution:
    """A solver's primal point and row duals (either may be approximate)."""

    primal: np.ndarray = field(repr=False)
    duals: np.ndarray = field(repr=False)
    objective: float
    """As reported by the solver, constant included; never used as a bound."""
    status: str
    solver: str
    seconds: float
    iterations: int
    residuals: dict[str, float]
    warm_started: bool = False
    """Whether the solver started from a given point (only PDLP takes one)."""


def available(solver: str) -> bool:
    """Whether a backend can run here."""
    if solver.startswith("highs"):
        return importlib.util.find_spec("highspy") is not None
    if solver == "pdlp":
        return importlib.util.find_spec("ortools") is not None
    if solver == "cuopt":
        return importlib.util.find_spec("cuopt") is not None and _gpu_present()
    return False


def _gpu_present() -> bool:
    """A CUDA driver is installed and devices are not hidden (CUDA_VISIBLE_DEVICES="")."""
    return os.environ.get("CUDA_VISIBLE_DEVICES") != "" and shutil.which("nvidia-smi") is not None


def resolve(solver: str) -> str:
    """The concrete backend `solver` names ("auto" resolved)."""
    if solver not in SOLVERS:
        raise ConfigError(f"unknown solver {solver!r}; expected one of {', '.join(SOLVERS)}")
    if solver == "auto":
        for candidate in ("cuopt", "pdlp", "highs"):
            if available(candidate):
                return candidate
        raise SolverError("no LP solver found: install highspy (or polytok[pdlp] / polytok[gpu])")
    if not available(solver):
        extra = {"pdlp": "polytok[pdlp] (ortools)", "cuopt": "polytok[gpu] and a GPU"}.get(solver, "highspy")
        raise SolverError(f"solver {solver!r} is not available here: it needs {extra}")
    return solver


def solve(
    lp: LinearProgram,
    solver: str = "auto",
    *,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    threads: int | None = None,
    progress: bool = False,
    warm_start: tuple[np.ndarray, np.ndarray] | None = None,
) -> Solution:
    """Solves `lp` with the named backend. `tolerance` is the relative optimality tolerance of
    IPM and the first-order methods (simplex solves to its own defaults); `time_limit` stops the
    solve (its duals still certify a bound); `progress` prints the solver's own log.
    `warm_start` = (primal, duals), a starting point for PDLP, which converges faster from a
    point near the optimum; the other backends start from their own."""
    backend = resolve(solver)
    if warm_start is not None:
        primal, duals = warm_start
        if primal.shape != (lp.shape[1],) or duals.shape != (lp.shape[0],):
            raise ConfigError(
                f"warm start of shape {primal.shape}/{duals.shape} does not fit an LP of "
                f"{lp.shape[1]} variables and {lp.shape[0]} rows"
            )
    start = time.perf_counter()
    merged = SingleEdgeColours(lp)
    inner = merged.lp
    if warm_start is not None:
        warm_start = merged.compress(*warm_start)
    if backend.startswith("highs"):
        solution = _solve_highs(inner, backend, time_limit, tolerance, threads, progress)
    elif backend == "pdlp":
        solution = _solve_pdlp(inner, time_limit, tolerance, threads, progress, warm_start)
    else:
        solution = _solve_cuopt(inner, time_limit, tolerance, progress)
    if len(solution.primal) == inner.shape[1] and len(solution.duals) == inner.shape[0]:
        solution.primal, solution.duals = merged.expand(solution.primal, solution.duals)
        solution.residuals.update(_residuals(lp, solution.primal))
    solution.seconds = time.perf_counter() - start
    if solution.duals.shape != (lp.shape[0],) or not np.all(np.isfinite(solution.duals)):
        raise SolverError(f"{backend} returned no usable dual vector (status {solution.status})")
    return solution


class SingleEdgeColours:
    """Presolve: a colour with one priced edge e has c_t = p_e at every optimum (c_t appears
    only in p_e <= c_t and in the budget), so its column and capacity row go, and p_e enters the
    budget row itself. At 1 MB with every colour that is 61% of the colours. Exact both ways:
    the expanded primal sets c_t = p_e, and the expanded duals (see `expand`) give the same
    dual bound."""

    def __init__(self, lp: LinearProgram):
        self.original = lp
        self.lp = lp
        self.edges = np.empty(0, dtype=np.int64)
        """Priced edges (0-based among the priced) whose colour has no other edge."""
        rows, columns = lp.shape
        colour_base = lp.num_free + lp.num_priced
        if (rows, columns) != (lp.num_flow_rows + lp.num_priced + 1, colour_base + lp.num_colours):
            return  # not the LP graph.py builds (a test's variant, say): solved as it is
        per_colour = np.bincount(lp.priced_colour, minlength=lp.num_colours)
        # A colour that costs something itself is not free to follow its edge's flow.
        single_edge = (per_colour[lp.priced_colour] == 1) & (lp.objective[colour_base + lp.priced_colour] == 0)
        self.edges = np.flatnonzero(single_edge)
        if len(self.edges) == 0:
            return
        keep_columns = np.ones(columns, dtype=bool)
        keep_columns[colour_base + lp.priced_colour[self.edges]] = False
        keep_rows = np.ones(rows, dtype=bool)
        keep_rows[lp.num_flow_rows + self.edges] = False
        self.keep_columns, self.keep_rows = keep_columns, keep_rows
        matrix = lp.matrix[keep_rows][:, keep_columns]
        # The budget row is the last row of both; its new entries are the single edges' flows.
        budget_entries = scipy.sparse.csr_matrix(
            (np.ones(len(self.edges)), (np.full(len(self.edges), matrix.shape[0] - 1), lp.num_free + self.edges)),
            shape=matrix.shape,
        )
        self.lp = replace(
            lp, matrix=(matrix + budget_entries).tocsr(), objective=lp.objective[keep_columns],
            row_lower=lp.row_lower[keep_rows], row_upper=lp.row_upper[keep_rows],
        )

    def compress(self, primal: np.ndarray, duals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A point of the original LP as a point of the presolved one."""
        if self.lp is self.original:
            return primal, duals
        return primal[self.keep_columns], duals[self.keep_rows]

    def expand(self, primal: np.ndarray, duals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A point of the presolved LP as a point of the original one (see the class note)."""
        if self.lp is self.original:
            return primal, duals
        lp = self.original
        full_primal = np.zeros(lp.shape[1])
        full_primal[self.keep_columns] = primal
        flows = full_primal[lp.num_free + self.edges]
        full_primal[lp.num_free + lp.num_priced + lp.priced_colour[self.edges]] = flows
        full_duals = np.zeros(lp.shape[0])
        full_duals[self.keep_rows] = duals
        # The edge's capacity dual -mu_e may be anything from the budget dual -lambda down to
        # -(lambda + the edge's saving); the bound is the same throughout. The saving end gives
        # the colour its full Lagrangian price, which price rounding and the full-graph
        # certification read; the lambda end would price a useful colour at 0 when the budget
        # is slack.
        # The budget row is a <= row: a positive dual there counts as 0 (bound.project_duals).
        signed = duals.copy()
        signed[-1] = min(signed[-1], 0.0)
        columns = lp.num_free + self.edges
        reduced = self.lp.objective[columns] - self.lp.matrix[:, columns].T @ signed
        full_duals[lp.num_flow_rows + self.edges] = signed[-1] + np.minimum(reduced, 0.0)
        return full_primal, full_duals


def _residuals(lp: LinearProgram, primal: np.ndarray) -> dict[str, float]:
    """Largest violation of a row bound and of the [0, 1] box by the primal point."""
    activity = lp.matrix @ primal
    row = np.maximum(lp.row_lower - activity, activity - lp.row_upper)
    box = np.maximum(-primal, primal - 1.0)
    return {
        "primal_row": float(max(row.max(initial=0.0), 0.0)),
        "primal_box": float(max(box.max(initial=0.0), 0.0)),
    }


def _solve_highs(lp, backend, time_limit, tolerance, threads, progress) -> Solution:
    import highspy

    highs = highspy.Highs()
    highs.setOptionValue("output_flag", bool(progress))
    highs.setOptionValue("solver", {"highs": "simplex", "highs-ipm": "ipm", "highs-pdlp": "pdlp"}[backend])
    if backend == "highs-ipm":
        highs.setOptionValue("run_crossover", "off")
        highs.setOptionValue("ipm_optimality_tolerance", tolerance)
    if backend == "highs-pdlp":
        highs.setOptionValue("pdlp_optimality_tolerance", tolerance)
    if time_limit is not None:
        highs.setOptionValue("time_limit", float(time_limit))
    if threads is not None:
        highs.setOptionValue("threads", int(threads))
    _pass_to_highs(highs, lp)
    highs.run()
    status = highs.modelStatusToString(highs.getModelStatus())
    solution = highs.getSolution()
    primal = np.asarray(solution.col_value, dtype=np.float64)
    duals = np.asarray(solution.row_dual, dtype=np.float64)
    if len(duals) != lp.shape[0]:
        raise SolverError(f"HiGHS ({backend}) returned no dual solution: {status}")
    info = highs.getInfo()
    iterations = int(info.simplex_iteration_count + max(info.ipm_iteration_count, 0) + max(info.pdlp_iteration_count, 0))
    return Solution(primal, duals, float(info.objective_function_value) + lp.constant, status,
                    backend, 0.0, iterations, _residuals(lp, primal))


def _pass_to_highs(highs, lp: LinearProgram, integer_columns: slice | None = None) -> None:
    import highspy

    model = highspy.HighsLp()
    rows, columns = lp.shape
    model.num_col_ = columns
    model.num_row_ = rows
    model.col_cost_ = lp.objective
    model.col_lower_ = np.zeros(columns)
    model.col_upper_ = np.ones(columns)
    infinity = highspy.kHighsInf
    model.row_lower_ = np.where(np.isfinite(lp.row_lower), lp.row_lower, -infinity)
    model.row_upper_ = np.where(np.isfinite(lp.row_upper), lp.row_upper, infinity)
    csc = lp.matrix.tocsc()
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = csc.indptr.astype(np.int32)
    model.a_matrix_.index_ = csc.indices.astype(np.int32)
    model.a_matrix_.value_ = csc.data
    if integer_columns is not None:
        kinds = [highspy.HighsVarType.kContinuous] * columns
        for j in range(*integer_columns.indices(columns)):
            kinds[j] = highspy.HighsVarType.kInteger
        model.integrality_ = kinds
    highs.passModel(model)


def solve_integer(lp: LinearProgram, time_limit: float | None = None) -> float:
    """The exact integer optimum (colours integral) by HiGHS branch and bound; small LPs only.
    With c integral, p <= c deletes edges and the flow polytope is integral, so integrality of
    the colours suffices."""
    import highspy

    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    if time_limit is not None:
        highs.setOptionValue("time_limit", float(time_limit))
    _pass_to_highs(highs, lp, integer_columns=lp.colour_columns)
    highs.run()
    status = highs.modelStatusToString(highs.getModelStatus())
    if status != "Optimal":
        raise SolverError(f"HiGHS MIP did not reach optimality: {status}")
    return float(highs.getInfo().objective_function_value) + lp.constant


def _solve_pdlp(lp, time_limit, tolerance, threads, progress, warm_start=None) -> Solution:
    from ortools.pdlp import solve_log_pb2, solvers_pb2
    from ortools.pdlp.python import pdlp

    rows, columns = lp.shape
    program = pdlp.QuadraticProgram()
    program.objective_vector = lp.objective
    program.constraint_matrix = lp.matrix.tocsc()
    program.constraint_lower_bounds = lp.row_lower
    program.constraint_upper_bounds = lp.row_upper
    program.variable_lower_bounds = np.zeros(columns)
    program.variable_upper_bounds = np.ones(columns)
    params = solvers_pb2.PrimalDualHybridGradientParams()
    criteria = params.termination_criteria.simple_optimality_criteria
    criteria.eps_optimal_relative = tolerance
    criteria.eps_optimal_absolute = tolerance
    if time_limit is not None:
        params.termination_criteria.time_sec_limit = float(time_limit)
    params.num_threads = int(threads or min(4, os.cpu_count() or 1))
    # A fixed shard count fixes the order of every sharded sum, so the iterates (and the
    # vocabulary rounded from them) are the same whatever the number of threads.
    params.num_shards = PDLP_SHARDS
    params.verbosity_level = 2 if progress else 0
    initial = None
    if warm_start is not None:
        initial = pdlp.PrimalAndDualSolution()
        initial.primal_solution = np.ascontiguousarray(warm_start[0], dtype=np.float64)
        initial.dual_solution = np.ascontiguousarray(warm_start[1], dtype=np.float64)
    result = pdlp.primal_dual_hybrid_gradient(program, params, initial)
    log = result.solve_log
    status = solve_log_pb2.TerminationReason.Name(log.termination_reason).removeprefix("TERMINATION_REASON_")
    primal = np.asarray(result.primal_solution, dtype=np.float64)
    duals = np.asarray(result.dual_solution, dtype=np.float64)
    residuals = _residuals(lp, primal) if len(primal) == columns else {}
    objective = float("nan")
    for stats in log.solution_stats.convergence_information:
        residuals["primal_l_inf"] = float(stats.l_inf_primal_residual)
        residuals["dual_l_inf"] = float(stats.l_inf_dual_residual)
        residuals["pdlp_gap"] = float(abs(stats.primal_objective - stats.dual_objective))
        objective = float(stats.primal_objective) + lp.constant
        break
    return Solution(primal, duals, objective, status, "pdlp", 0.0, int(log.iteration_count), residuals,
                    warm_started=initial is not None)


def _solve_cuopt(lp, time_limit, tolerance, progress) -> Solution:
    from cuopt.linear_programming import data_model, solver, solver_settings

    rows, columns = lp.shape
    model = data_model.DataModel()
    csr = lp.matrix.tocsr()
    model.set_csr_constraint_matrix(csr.data, csr.indices.astype(np.int32), csr.indptr.astype(np.int32))
    model.set_constraint_lower_bounds(lp.row_lower)
    model.set_constraint_upper_bounds(lp.row_upper)
    model.set_objective_coefficients(lp.objective)
    model.set_variable_lower_bounds(np.zeros(columns))
    model.set_variable_upper_bounds(np.ones(columns))
    settings = solver_settings.SolverSettings()
    settings.set_optimality_tolerance(tolerance)
    if time_limit is not None:
        settings.set_parameter("time_limit", float(time_limit))
    settings.set_parameter("log_to_console", bool(progress))
    result = solver.Solve(model, settings)
    primal = np.asarray(result.get_primal_solution(), dtype=np.float64)
    duals = np.asarray(result.get_dual_solution(), dtype=np.float64)
    status = str(result.get_termination_reason())
    objective = float(result.get_primal_objective()) + lp.constant
    return Solution(primal, duals, objective, status, "cuopt", 0.0, 0, _residuals(lp, primal))
