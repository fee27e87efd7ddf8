"""Training a value network: balanced batches, Adam with a cosine schedule, atomic
checkpoints, exact resume, Ctrl-C.

Each step draws ``batch`` rows, half of them positive (label >= 0.5) when both
kinds exist, from a seeded `torch.Generator`, and minimises binary
cross-entropy of the logit against the label (a dense label is a soft target).
The learning rate follows ``lr * (1 + cos(pi * step / steps)) / 2``, computed
from the step, so a resumed run follows the same schedule. Every
``checkpoint_every`` steps, on Ctrl-C (SIGINT) or SIGTERM, and at the end,
``OUT/checkpoint.pt`` is replaced atomically with the weights, the optimizer,
the sampler's generator and the history; a run started again with the same
data and settings continues from it and ends with the same weights as an
uninterrupted run. ``OUT/model.pt`` is written at the end.
"""

from __future__ import annotations

import io
import math
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simpatterns.files import atomic_write
from simpatterns.value.data import task_scene
from simpatterns.value.model import FiLMValueNet, NetConfig
from simpatterns.value.scene import scene_image

CHECKPOINT, MODEL = "checkpoint.pt", "model.pt"


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000
    batch: int = 64
    lr: float = 3e-4
    seed: int = 0
    checkpoint_every: int = 100
    log_every: int = 50
    net: NetConfig = field(default_factory=NetConfig)

    def __post_init__(self) -> None:
        for name in ("steps", "batch", "checkpoint_every", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Examples:
    """Rows of a dataset with each task's scene image encoded once."""

    images: torch.Tensor  # (T, 7, R, R) uint8
    scene: torch.Tensor  # (N,) index into images
    actions: torch.Tensor  # (N, 3) float32
    labels: torch.Tensor  # (N,) float32
    tasks: list[str]

    @classmethod
    def from_columns(cls, cols: dict[str, Any], resolution: int, images: dict[str, np.ndarray] | None = None
                     ) -> Examples:
        tasks = list(dict.fromkeys(cols["task"]))
        cache = images if images is not None else {}
        for t in tasks:
            if t not in cache:
                cache[t] = scene_image(task_scene(t), resolution)
        pos = {t: k for k, t in enumerate(tasks)}
        return cls(
            torch.from_numpy(np.stack([cache[t] for t in tasks])) if tasks else torch.zeros((0, 7, resolution,
                                                                                           resolution), dtype=torch.uint8),
            torch.tensor([pos[t] for t in cols["task"]], dtype=torch.long),
            torch.from_numpy(np.stack([np.asarray(cols[c], np.float32) for c in ("x", "y", "r")], axis=1)),
            torch.from_numpy(np.asarray(cols["label"], np.float32)),
            tasks,
        )

    def subset(self, rows: np.ndarray) -> Examples:
        idx = torch.from_numpy(np.asarray(rows, np.int64))
        return Examples(self.images, self.scene[idx], self.actions[idx], self.labels[idx], self.tasks)

    def __len__(self) -> int:
        return len(self.labels)


def split_by_task(cols: dict[str, Any], val_fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (train, validation), whole tasks held out for validation."""
    tasks = sorted(set(cols["task"]))
    rng = np.random.default_rng(seed)
    n_val = round(val_fraction * len(tasks)) if len(tasks) > 1 else 0
    val = set(rng.permutation(tasks)[:n_val].tolist())
    is_val = np.array([t in val for t in cols["task"]])
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a positive outranks a negative (ties count half); nan without both."""
    pos, neg = scores[labels >= 0.5], scores[labels < 0.5]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="stable")
    ranks = np.empty(len(order))
    allv = np.concatenate([pos, neg])[order]
    ranks[order] = _tied_ranks(allv)
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def _tied_ranks(sorted_values: np.ndarray) -> np.ndarray:
    _, first, counts = np.unique(sorted_values, return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0
    return np.repeat(avg, counts)


@torch.no_grad()
def predict(net: FiLMValueNet, ex: Examples, batch: int = 1024) -> np.ndarray:
    was = net.training
    net.eval()
    feats = net.encode(ex.images)
    out = [net.head(feats[ex.scene[k:k + batch]], ex.actions[k:k + batch]).numpy()
           for k in range(0, len(ex), batch)]
    net.train(was)
    return np.concatenate(out) if out else np.zeros(0, np.float32)


@dataclass
class TrainResult:
    net: FiLMValueNet
    step: int
    stopped: bool
    history: list[dict[str, float]]


def _state_bytes(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def save_model(path: str | Path, net: FiLMValueNet, extra: dict[str, Any] | None = None) -> Path:
    return atomic_write(path, _state_bytes({"net": net.config.to_json(), "state": net.state_dict(),
                                            **(extra or {})}))


def load_model(path: str | Path) -> FiLMValueNet:
    """A trained network (eval mode) from ``model.pt`` or ``checkpoint.pt``."""
    try:
        blob = torch.load(path, map_location="cpu", weights_only=False)
        net = FiLMValueNet(NetConfig(**blob["net"]))
        net.load_state_dict(blob["state"])
    except (OSError, KeyError, RuntimeError, TypeError) as e:
        raise ValueError(f"{path}: not a value model ({e})") from None
    return net.eval()


def _balanced_batch(labels: torch.Tensor, batch: int, gen: torch.Generator) -> torch.Tensor:
    pos = torch.nonzero(labels >= 0.5).squeeze(1)
    neg = torch.nonzero(labels < 0.5).squeeze(1)
    if len(pos) == 0 or len(neg) == 0:
        return torch.randint(len(labels), (batch,), generator=gen)
    half = batch // 2
    return torch.cat([pos[torch.randint(len(pos), (half,), generator=gen)],
                      neg[torch.randint(len(neg), (batch - half,), generator=gen)]])


class _StopFlag:
    """Ctrl-C / SIGTERM set a flag the loop reads after the current step."""

    def __init__(self) -> None:
        self.hit = False
        self.old: dict[int, Any] = {}

    def __enter__(self) -> _StopFlag:  # noqa: PYI034 - used only in this module
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self.old[sig] = signal.signal(sig, self._set)
            except ValueError:  # not the main thread: no handler, no prompt stop
                pass
        return self

    def _set(self, signum: int, frame: Any) -> None:
        self.hit = True

    def __exit__(self, *exc: object) -> None:
        for sig, h in self.old.items():
            signal.signal(sig, h)


def train(train_ex: Examples, out: str | Path, config: TrainConfig = TrainConfig(), *,
          val_ex: Examples | None = None, log: Callable[[str], None] = lambda s: None,
          on_log: Callable[[int, FiLMValueNet], None] | None = None,
          time_limit_s: float | None = None) -> TrainResult:
    """Train (or resume, from ``OUT/checkpoint.pt`` of the same config) and write ``OUT/model.pt``.
    ``on_log(step, net)`` runs at each progress line (e.g. a held-out evaluation; it must
    leave the network as it found it). ``time_limit_s`` stops like Ctrl-C once that much
    wall time has passed (a checkpoint, ``stopped=True``, no ``model.pt``)."""
    if len(train_ex) == 0:
        raise ValueError("no training rows")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(config.seed)
    net = FiLMValueNet(config.net)
    opt = torch.optim.Adam(net.parameters(), lr=config.lr)
    gen = torch.Generator().manual_seed(config.seed)
    step, history = 0, []
    ck = out / CHECKPOINT
    if ck.exists():
        blob = torch.load(ck, map_location="cpu", weights_only=False)
        if blob.get("train") != config.to_json():
            raise ValueError(f"{ck} was written with other settings; use another output folder or delete it")
        net.load_state_dict(blob["state"])
        opt.load_state_dict(blob["optimizer"])
        gen.set_state(blob["generator"])
        step, history = int(blob["step"]), list(blob["history"])
        log(f"resuming from step {step}")

    def save_checkpoint() -> None:
        atomic_write(ck, _state_bytes({"net": config.net.to_json(), "train": config.to_json(),
                                       "state": net.state_dict(), "optimizer": opt.state_dict(),
                                       "generator": gen.get_state(), "step": step, "history": history}))

    loss_fn = torch.nn.BCEWithLogitsLoss()
    net.train()
    feats_all = train_ex.images.float()
    stopped = False
    end = None if time_limit_s is None else time.monotonic() + time_limit_s
    with _StopFlag() as flag:
        while step < config.steps:
            if flag.hit or (end is not None and time.monotonic() > end):
                stopped = True
                break
            lr = config.lr * 0.5 * (1.0 + math.cos(math.pi * step / config.steps))
            for g in opt.param_groups:
                g["lr"] = lr
            rows = _balanced_batch(train_ex.labels, config.batch, gen)
            logits = net(feats_all[train_ex.scene[rows]], train_ex.actions[rows])
            loss = loss_fn(logits, train_ex.labels[rows])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % config.log_every == 0 or step == config.steps:
                rec = {"step": step, "loss": loss.item()}
                line = f"step {step}/{config.steps}  loss {rec['loss']:.4f}"
                if val_ex is not None and len(val_ex):
                    rec["val_auc"] = auc(predict(net, val_ex), val_ex.labels.numpy())
                    line += f"  val AUC {rec['val_auc']:.3f}"
                history.append(rec)
                log(line)
                if on_log is not None:
                    on_log(step, net)
                    net.train()
            if step % config.checkpoint_every == 0:
                save_checkpoint()
        save_checkpoint()
    if stopped:
        log(f"stopped at step {step}; {ck} holds it, run again to resume")
    else:
        save_model(out / MODEL, net, {"train": config.to_json(), "history": history})
    return TrainResult(net.eval(), step, stopped, history)


def examples_for(cols: dict[str, Any], resolution: int, rows: Sequence[int] | None = None) -> Examples:
    ex = Examples.from_columns(cols, resolution)
    return ex if rows is None else ex.subset(np.asarray(rows))
