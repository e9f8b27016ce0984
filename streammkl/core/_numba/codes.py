"""Integer codes shared by the Python edge and the compiled loops (option objects map to
these), and the numeric thresholds of the block state."""

from __future__ import annotations

# kernel kinds
K_LINEAR, K_POLY, K_RBF, K_B1 = 0, 1, 2, 3
# explicit feature-map kinds
MAP_GATHER, MAP_RFF, MAP_LINEAR = 0, 1, 2  # product map, random Fourier, plain gather
MAP_ADDITIVE = 3  # random Fourier components that each read one input (stored sparsely)
MAP_STUMPS = 4  # threshold indicators that each read one input (stored sparsely)
MAP_LANDMARK = 5  # normalised Gaussian profile over landmarks (a projection, like MAP_RFF)
MAP_BINNING = 6  # random binning: one hashed grid cell per grid (rows of draws like MAP_RFF)
# losses
L_HINGE, L_LOGISTIC, L_SQUARED, L_EPS, L_HUBER, L_MC_HINGE, L_SOFTMAX = 0, 1, 2, 3, 4, 5, 6
# prox steps
P_L2, P_L1, P_GROUP, P_SQGROUP, P_GROUPLQ, P_BALL, P_L1BALL, P_BLOCKSOFT, P_ENET = range(9)
# schedules
S_CONSTANT, S_INVSQRT, S_INVT = 0, 1, 2  # one step for every block
S_ADAGRAD, S_FTRL = 3, 4  # per-block steps (composite mirror descent; FTRL-proximal)
# budget policies
B_OLDEST, B_SMALLEST, B_MERGE, B_PROJECT = 0, 1, 2, 3

_SCALE_FLOOR = 1e-100  # below this a lazy scale is folded into the stored coefficients
_PRUNE_MARGIN = 1e-9  # relative slack of the B1 projection bound, far above rounding (~1e-15)
