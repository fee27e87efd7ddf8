"""The FiLM action-conditioned value network (PHYRE's DQN agent, scaled for a CPU).

A small ResNet over the 7-channel scene image: a 3x3 stem of ``width``
channels, then ``stages`` residual stages, each halving the resolution and
doubling the channels. The action (x, y, r) goes through an MLP to a
per-channel scale and shift (FiLM: ``features * scale + shift``, the scale
parameterised as ``1 + output`` so a fresh network starts near unconditioned)
applied before a stage: ``fusion="last"`` before the last stage (PHYRE's
default), ``"first"`` before the first, ``"all"`` before each. Everything
before the first fused stage depends on the scene only (`encode`), so ranking
many actions of one scene runs only the layers after it (`head`). The output is
one logit (max-pooled over space, then linear).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from simpatterns.value.scene import CHANNELS

FUSIONS = ("first", "last", "all")


@dataclass(frozen=True)
class NetConfig:
    resolution: int = 64
    width: int = 16
    stages: int = 4
    fusion: str = "last"
    action_hidden: int = 64

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {self.fusion!r}")
        if self.width < 1 or self.stages < 1 or self.action_hidden < 1:
            raise ValueError("width, stages and action_hidden must be >= 1")
        if self.resolution >> self.stages < 1:
            raise ValueError(f"{self.stages} stages halve a {self.resolution} px image to nothing")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def fused(self) -> list[int]:
        """Stages whose input is modulated by the action."""
        if self.fusion == "first":
            return [0]
        if self.fusion == "last":
            return [self.stages - 1]
        return list(range(self.stages))


class _Block(nn.Module):
    """A residual block that halves the resolution."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=2, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))


class FiLMValueNet(nn.Module):
    def __init__(self, config: NetConfig = NetConfig()):
        super().__init__()
        self.config = config
        w = config.width
        self.stem = nn.Sequential(nn.Conv2d(CHANNELS, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU())
        chans = [w * 2**k for k in range(config.stages + 1)]
        self.stages = nn.ModuleList(_Block(chans[k], chans[k + 1]) for k in range(config.stages))
        self.fused = config.fused()
        self.film = nn.ModuleDict({
            str(k): nn.Sequential(nn.Linear(3, config.action_hidden), nn.ReLU(),
                                  nn.Linear(config.action_hidden, 2 * chans[k]))
            for k in self.fused
        })
        self.out = nn.Linear(chans[-1], 1)

    def encode(self, scenes: torch.Tensor) -> torch.Tensor:
        """The action-free part: (S, 7, R, R) images -> features entering the first fused stage."""
        x = self.stem(scenes.float())
        for k in range(self.fused[0]):
            x = self.stages[k](x)
        return x

    def head(self, features: torch.Tensor, actions: torch.Tensor | None,
             film: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None) -> torch.Tensor:
        """Logits (N,) for features (N, ...) of each action's scene and actions (N, 3).
        ``actions=None`` runs the unconditioned network; ``film`` overrides the
        (scale, shift) of fused stages (for tests and analysis)."""
        x = features
        for k in range(self.fused[0], self.config.stages):
            if k in self.fused and (actions is not None or film is not None):
                if film is not None and k in film:
                    scale, shift = film[k]
                else:
                    gamma, shift = self.film[str(k)](actions.float()).chunk(2, dim=1)
                    scale = 1.0 + gamma
                x = x * scale[:, :, None, None] + shift[:, :, None, None]
            x = self.stages[k](x)
        return self.out(torch.amax(x, dim=(2, 3))).squeeze(1)

    def forward(self, scenes: torch.Tensor, actions: torch.Tensor | None) -> torch.Tensor:
        return self.head(self.encode(scenes), actions)

    @torch.no_grad()
    def rank_scores(self, scene: torch.Tensor, actions: torch.Tensor, batch: int = 4096) -> torch.Tensor:
        """Logits of many actions on one scene (7, R, R): encoded once, the head per batch."""
        was = self.training
        self.eval()
        feats = self.encode(scene[None])
        out = [self.head(feats.expand(len(a), *feats.shape[1:]), a) for a in actions.split(batch)]
        self.train(was)
        return torch.cat(out) if out else torch.zeros(0)
