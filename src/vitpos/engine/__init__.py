"""Training and evaluation: ``train(model_cfg, train_cfg, data)``, ``evaluate(model, dataset)``, checkpoints."""

from .checkpoint import Checkpoint, CheckpointError, find_checkpoint, load_training_checkpoint
from .config import TrainConfig
from .evaluate import evaluate, evaluate_resolutions, resolution_table
from .setup import RunRequest, fit_model_to_data
from .train import TrainResult, train

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "RunRequest",
    "TrainConfig",
    "TrainResult",
    "evaluate",
    "evaluate_resolutions",
    "find_checkpoint",
    "fit_model_to_data",
    "load_training_checkpoint",
    "resolution_table",
    "train",
]
