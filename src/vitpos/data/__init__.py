"""Data sets (synthetic red-green tasks, image folders, CIFAR, digits) and batch transforms."""

from .catalog import DATA_FORMS, open_data
from .dataset import SPLITS, DataInfo, DataSplits, ImageDataset, TensorImages
from .synthetic import TASKS, SyntheticTask

__all__ = [
    "DATA_FORMS",
    "SPLITS",
    "TASKS",
    "DataInfo",
    "DataSplits",
    "ImageDataset",
    "SyntheticTask",
    "TensorImages",
    "open_data",
]
