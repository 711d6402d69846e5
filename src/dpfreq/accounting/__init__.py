"""Privacy accounting: every privacy-loss notion of dpfreq, its conversions and its composition.

One place owns how privacy loss is stated, converted and added up, with certified arithmetic
(fractions; transcendental functions rounded outward), so that no ε is ever rounded the wrong
way on its way from a noise parameter to a ledger:

* :mod:`~dpfreq.accounting.losses`, :mod:`~dpfreq.accounting.mechanisms` — losses as values:
  pure ε, (ε, δ), ρ-zCDP, the discrete Laplace and discrete Gaussian mechanisms, partition
  selection, compositions;
* :mod:`~dpfreq.accounting.renyi`, :mod:`~dpfreq.accounting.zcdp`,
  :mod:`~dpfreq.accounting.composition` — Rényi divergences, zCDP, basic and advanced
  composition and group privacy, and the conversions to (ε, δ);
* :mod:`~dpfreq.accounting.pld` — privacy loss distributions, composed exactly for batches
  declared in advance (:mod:`~dpfreq.accounting.plans`);
* :mod:`~dpfreq.accounting.rules`, :mod:`~dpfreq.accounting.book` — the ``basic`` and ``tight``
  rules (a privacy filter for releases chosen adaptively) shared by
  :class:`dpfreq.budget.Accountant` and :class:`dpfreq.ledger.Ledger`.

``docs/composition.md`` explains the rules and their references.
"""

from dpfreq.accounting.book import Spending
from dpfreq.accounting.composition import advanced_epsilon, group_delta, pieces_epsilon
from dpfreq.accounting.losses import (
    ApproximateDP,
    Composed,
    PrivacyLoss,
    PureDP,
    ZeroConcentratedDP,
)
from dpfreq.accounting.mechanisms import DiscreteGaussian, DiscreteLaplace, PartitionSelection
from dpfreq.accounting.numbers import exact_fraction, float_at_least, float_at_most
from dpfreq.accounting.plans import (
    BudgetShare,
    declared_epsilon,
    required_epsilon,
    with_budget_share,
)
from dpfreq.accounting.pld import PrivacyLossDistribution
from dpfreq.accounting.renyi import randomized_response_renyi, renyi_epsilon
from dpfreq.accounting.rules import COMPOSITIONS, Rule
from dpfreq.accounting.serial import loss_from_dict, stated_loss
from dpfreq.accounting.zcdp import (
    gaussian_sigma2_at_least,
    log_inverse_upper,
    pure_epsilon_for_rho,
    zcdp_epsilon,
    zcdp_rho,
    zcdp_rho_at_most,
)

__all__ = [
    "COMPOSITIONS",
    "ApproximateDP",
    "BudgetShare",
    "Composed",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "PartitionSelection",
    "PrivacyLoss",
    "PrivacyLossDistribution",
    "PureDP",
    "Rule",
    "Spending",
    "ZeroConcentratedDP",
    "advanced_epsilon",
    "declared_epsilon",
    "exact_fraction",
    "float_at_least",
    "float_at_most",
    "gaussian_sigma2_at_least",
    "group_delta",
    "log_inverse_upper",
    "loss_from_dict",
    "pieces_epsilon",
    "pure_epsilon_for_rho",
    "randomized_response_renyi",
    "renyi_epsilon",
    "required_epsilon",
    "stated_loss",
    "with_budget_share",
    "zcdp_epsilon",
    "zcdp_rho",
    "zcdp_rho_at_most",
]
