"""World models and their fitting. Importing this package registers the built-in models
(``model=flow``, ``gaussian``, ``deterministic``) with hydra; a model of your own registers
itself with :func:`register_model` (docs/model.md)."""

from mbrl.models.deterministic import DeterministicConfig, DeterministicEnsemble
from mbrl.models.dynamics import DynamicsModel
from mbrl.models.flow import FlowModel, FlowModelConfig
from mbrl.models.gaussian import GaussianConfig, GaussianEnsemble
from mbrl.models.model_registry import MODELS, build_model, model_config, register_model
from mbrl.models.normalizer import Normalizer
from mbrl.models.protocol import WorldModel
from mbrl.models.scores import density_score, weighted_mean
from mbrl.models.training import ModelTrainer

__all__ = [
    "MODELS",
    "DeterministicConfig",
    "DeterministicEnsemble",
    "DynamicsModel",
    "FlowModel",
    "FlowModelConfig",
    "GaussianConfig",
    "GaussianEnsemble",
    "ModelTrainer",
    "Normalizer",
    "WorldModel",
    "build_model",
    "density_score",
    "model_config",
    "register_model",
    "weighted_mean",
]
