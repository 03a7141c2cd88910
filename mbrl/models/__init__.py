"""Dynamics models: the flow ensemble (default) and MBPO's Gaussian ensemble, and their fitting."""

from mbrl.models.dynamics import DynamicsModel, build_density
from mbrl.models.gaussian import GaussianEnsemble
from mbrl.models.normalizer import Normalizer
from mbrl.models.training import ModelTrainer

__all__ = ["DynamicsModel", "GaussianEnsemble", "ModelTrainer", "Normalizer", "build_density"]
