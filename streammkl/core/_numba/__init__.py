"""Every compiled hot loop of the core, as plain functions over arrays, one module per thing
computed:

- ``codes``: the integer codes option objects map to (kernels, maps, losses, prox, schedules,
  budget policies);
- ``kernels``: kernel values, masked dot products, Gram matrices;
- ``losses``: loss values and step directions;
- ``prox``: proximity operators on the block norms, step-size schedules;
- ``features``: explicit feature maps and the vector loops over them;
- ``scores``: block scores (explicit dot products, kernel expansions);
- ``budget``: support-set budget maintenance with exact norms (``merge``: merging two pairs,
  ``projection``: projecting a pair onto the others); ``support``: a whole support set at
  once (exact norms from the Gram form, the budget applied until it fits: merged support sets);
- ``averages``: predictions from averaged iterates (exponential averages, follow the leader);
- ``pack``: the round's arrays packed into one compiled argument (a structref built on demand);
- ``rounds``: one round of Alg. 1 / 3 on a pack, its compiled loop, prediction;
- ``known``: a record of known inputs in one call (scattered to its columns, checked,
  standardised, then the explicit round or the prediction), and the standardisation of rows;
- ``chains`` and ``sequences``: sequence decoders and the sequence learner's position loops;
- ``draws``: an input's random draws (a counter-based generator, Philox4x32-10 with
  Box-Muller) and numpy's seeding of a generator (``SeedSequence``, older models' draws), compiled;
- ``place``: a record's new inputs laid out in every block of a bank in one call (their draws
  made where they go);
- ``wide``: the round of explicit FTRL banks on wide sparse records (lazy block factors: a cost
  linear in the record's non-zeros, the dense round's numbers);
- ``sparse``: the sparse path of explicit blocks (steps, exact norms, rescaling, averaging that
  touch only the written coordinates);
- ``arcs`` and ``arborescence``: the dependency parser's hashed arc features and scores, and its
  maximum spanning arborescence decoder (Chu-Liu-Edmonds).

Each function is written undecorated (``_name``) and compiled once as
``name = njit(**JIT)(_name)``; the Python originals stay importable so
``tests/test_numba_parity.py`` compares every kernel with its ``.py_func``. Python callers
validate inputs and map option objects to the integer codes. This package re-exports every name,
so callers write ``from streammkl.core import _numba as nb; nb.learn_round(...)``.

Model layout (see ``state.py``): ``M`` blocks, ``K`` outputs (1 for binary/regression, number of
classes for multiclass losses). Block ``m`` is either *explicit* — weights ``W[:, a:b]`` over the
feature map ``phi[a:b]`` — or *implicit* —
``theta_m = scale_m * sum_s coef[m, s] phi_m(x_s) (x) v_s`` over a support set shared by all
implicit blocks. Every block carries a lazy ``scale`` (so the prox rescale is O(1)) and its exact
norm ``block_norms[m] = ||theta_m||``.

numba's on-disk cache checks only the source file of the function it compiled, not the files of
the helpers it inlined: ``_cache_guard`` first drops this package's cache whenever any of its
sources changed, so a change to a helper can never leave stale machine code in another module.
"""

from __future__ import annotations

from streammkl.core._jit import cache_guard as _cache_guard

_cache_guard(__file__)

# ruff: noqa: E402, F401, I001  (re-exports, after the cache guard)
from streammkl.core._numba.codes import (
    _PRUNE_MARGIN, _SCALE_FLOOR, B_MERGE, B_OLDEST, B_PROJECT, B_SMALLEST,
    K_B1, K_LINEAR, K_POLY, K_RBF,
    L_EPS, L_HINGE, L_HUBER, L_LOGISTIC, L_MC_HINGE, L_SOFTMAX, L_SQUARED,
    MAP_ADDITIVE, MAP_BINNING, MAP_GATHER, MAP_LANDMARK, MAP_LINEAR, MAP_RFF, MAP_STUMPS,
    P_BALL, P_BLOCKSOFT, P_ENET, P_GROUP,
    P_GROUPLQ, P_L1, P_L1BALL, P_L2, P_SQGROUP, S_ADAGRAD, S_CONSTANT, S_FTRL, S_INVSQRT, S_INVT,
)  # fmt: skip
from streammkl.core._numba.kernels import (
    EXP_FLOOR, exp_many, exp_reduced, fast_exp, gram, kernel_value, view_dot,
)  # fmt: skip
from streammkl.core._numba.losses import loss_grad, loss_values
from streammkl.core._numba.prox import (
    ball_multiplier, blockwise, decreasing_root, gather, prox_blockwise, prox_blockwise_steps,
    prox_norm_step, prox_norm_step_into, prox_power, prox_squared_l1,
    project_l1_ball, scatter, schedule_eta, secular_root, uniform, weighted_l1_ball,
    squared_l1_norms, weighted_squared_l1,
)  # fmt: skip
from streammkl.core._numba.features import (
    FAST_COS_LIMIT, MAP_COS_ERROR, absmax, axpby_sqnorm, axpby_sqnorm_row, axpy_sqnorm, cos_of,
    cosines, dot4, dot4_pair, dot4_row, dot4_row_sq, dot4_rows, dot4_rows_sq, explicit_phi,
    explicit_phi_of, binning_column, binning_hash, fast_cos, map_cos, negate_row,
    rows_dot4,
)  # fmt: skip
from streammkl.core._numba.scores import (
    block_scores, dots_expansion, explicit_scores, explicit_sqnorm, implicit_scores, kernel_row,
    support_dots, support_expansion, zero_or_fold_block,
)  # fmt: skip
from streammkl.core._numba.merge import (
    best_merge_point, direction_cosine, merge_energy, merge_loss_table, merge_partner,
    merge_plan, segment_kernels, table_loss, top_direction,
)  # fmt: skip
from streammkl.core._numba.projection import (
    cheapest_projection, gram_border, gram_insert, loaded, project_out, refresh_inverse,
    solve_projection,
)  # fmt: skip
from streammkl.core._numba.budget import (
    add_pair, budget_step, make_room, merge_pairs, remove_pair, shift_scores, smallest_pair,
    weighted_sum,
)  # fmt: skip
from streammkl.core._numba.support import move_pair, pair_views, shrink_support, support_sqnorms
from streammkl.core._numba.averages import (
    LEAD_TOLERANCE, all_average_scores, average_scores, leader, track_averages, update_averages,
)  # fmt: skip
from streammkl.core._numba.rounds import (
    BAD_X, BAD_Y, MAX_ABS_INPUT, NEW_CLASS, apply_prox_steps, apply_prox_steps_into,
    average_explicit, block_steps,
    check_example, check_target, decision, decision_explicit, decision_many, decision_many_explicit,
    decision_total, explicit_decision, explicit_front, explicit_md_round, explicit_round,
    explicit_step, ftrl_explicit, ftrl_mixed, ftrl_scales, ftrl_store, learn_many,
    learn_many_explicit, learn_predict, learn_predict_explicit, learn_predict_md, learn_round,
    rescale_block, round_body, support_step, with_kernelized_scores,
)  # fmt: skip
from streammkl.core._numba.pack import RoundPack, borrowed_view, explicit_view, field, new_pack
from streammkl.core._numba.known import (
    TINY_VAR, decide_at, learn_at, learn_predict_at, learn_values, predict_values,
    scatter_record,
    standardize_one, standardize_row, standardize_rows,
)  # fmt: skip
from streammkl.core._numba.record import (
    RecordPack, learn_record, learn_record_at, learn_record_softmax2_at, new_record,
    predict_record, predict_record_at, record_address,
)  # fmt: skip
from streammkl.core._numba.chains import (
    forward_backward, logsumexp_row, viterbi, viterbi_cost, viterbi_hamming,
)  # fmt: skip
from streammkl.core._numba.sequences import (
    b1_pruned_expansion, pair_kernel, sequence_scores, sequence_step,
)  # fmt: skip
from streammkl.core._numba.sparse import (
    AVERAGE_FLOOR, block_sqnorm, exact_norms, sparse_rescale, sparse_step, zero_entries,
)  # fmt: skip
from streammkl.core._numba.landmarks import nearest_sq
from streammkl.core._numba.draws import crc32, draw_row, draw_rows, philox, seed_state, unit_pair
from streammkl.core._numba.place import (
    PLACE_ADDITIVE, PLACE_LINEAR, PLACE_MASK, PLACE_NONE, PLACE_QUADRATURE, PLACE_RFF, PLACE_STUMPS,
    PLACE_ZERO, place_inputs,
)  # fmt: skip
from streammkl.core._numba.wide import (
    SPARSE_SHARE, add_run, block_sq, decision_sparse_wide, decision_wide, dot_avg,
    learn_predict_wide, learn_sparse_wide, per_input, project_rows, remember_sparse,
    scatter_sparse, settle,
    settle_block, sparse_cached, step_run, wide_average_scores, wide_averages, wide_decision,
    wide_features, wide_plan, wide_round, wide_route, wide_scores, wide_store,
)  # fmt: skip
from streammkl.core._numba.arcs import (
    A_BETWEEN, A_DIR, A_DIST, A_HEAD, A_MOD, PAD, arc_features, arc_key, arc_scores, atom_value,
    distance_bucket, finish, head_prefix, mix,
)  # fmt: skip
from streammkl.core._numba.arborescence import find_cycle, greedy_heads, max_arborescence
