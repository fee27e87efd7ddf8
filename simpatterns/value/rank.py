"""Ranking candidate actions of a scene with a trained value model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simpatterns.value.scene import scene_image
from simpatterns.value.train import load_model


class Ranker:
    """A trained model that scores actions on scenes (each scene encoded once per call)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.net = load_model(self.path)

    def scores(self, scene: Any, actions: Sequence[Sequence[float]]) -> np.ndarray:
        """Logits, one per action (higher: more likely to succeed)."""
        image = torch.from_numpy(scene_image(scene, self.net.config.resolution))
        acts = torch.as_tensor(np.asarray(actions, np.float32).reshape(-1, 3))
        return self.net.rank_scores(image, acts).numpy()

    def order(self, scene: Any, actions: Sequence[Sequence[float]]) -> list[int]:
        """Indices of ``actions`` from the best score down (ties: earlier first)."""
        return np.argsort(-self.scores(scene, actions), kind="stable").tolist()
