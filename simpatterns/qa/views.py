"""What a question may show: the trace up to its cut, and the annotation of only some patterns.

`truncate` is the no-leakage rule of prediction questions: the model sees
the trace up to the cut frame (arrays, contacts and raw simulator events of
later frames removed, and the outcome taken out of ``meta``), and the
annotation it reads is recomputed on that truncated trace, so a detector
that looks ahead cannot reveal what happens next.

`restrict` shows the events of a chosen set of patterns (the library-size
curve and leave-one-out studies): detectors are deterministic and read only
the events of their declared dependencies, so the events of a pattern are
the same whether its library holds other patterns or not; annotating once
with the full library and filtering equals annotating with each smaller
library.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from simpatterns.annotate import Annotation
from simpatterns.trace import Trace

# meta keys that tell how the whole rollout ended
OUTCOME_KEYS = ("success", "solved_frame", "settled_frame", "steps")


def truncate(trace: Trace, frame: int) -> Trace:
    """The trace up to and including ``frame``; nothing of later frames is left."""
    if not 0 <= frame < trace.num_frames:
        raise ValueError(f"cut frame {frame} outside [0, {trace.num_frames})")
    keep = trace.contact_frame <= frame
    meta = {k: v for k, v in trace.meta.items() if k not in OUTCOME_KEYS}
    meta["truncated_at_frame"] = int(frame)
    return replace(
        trace,
        time=trace.time[: frame + 1].copy(),
        position=trace.position[: frame + 1].copy(),
        angle=trace.angle[: frame + 1].copy(),
        velocity=trace.velocity[: frame + 1].copy(),
        angular_velocity=trace.angular_velocity[: frame + 1].copy(),
        contact_frame=trace.contact_frame[keep].copy(),
        contact_a=trace.contact_a[keep].copy(),
        contact_b=trace.contact_b[keep].copy(),
        contact_point=trace.contact_point[keep].copy(),
        contact_normal=trace.contact_normal[keep].copy(),
        contact_impulse=trace.contact_impulse[keep].copy(),
        events=[e for e in trace.events if e.frame <= frame],
        meta=meta,
        quaternion=None if trace.quaternion is None else trace.quaternion[: frame + 1].copy(),
    )


def restrict(annotation: Annotation, labels: Iterable[str] | None) -> Annotation:
    """The annotation with only the events (and pattern list, and errors) of ``labels``;
    ``None`` keeps everything."""
    if labels is None:
        return annotation
    keep = set(labels)
    return Annotation(
        pattern_events={p: annotation.events_of(p) for p in annotation.pattern_events if p in keep},
        num_frames=annotation.num_frames,
        patterns=[p for p in annotation.patterns if p in keep],
        dt=annotation.dt,
        trace_id=annotation.trace_id,
        timings={k: v for k, v in annotation.timings.items() if k in keep},
        errors={k: v for k, v in annotation.errors.items() if k in keep},
    )
