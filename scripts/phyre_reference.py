"""Dump PHYRE's own scene for given template parameters, as JSON.

Runs under the reference PHYRE install (Python 3.9), never under simpatterns:

    /tmp/phyre39/bin/python scripts/phyre_reference.py TEMPLATE_ID PARAMS_JSON_FILE > out.json

``PARAMS_JSON_FILE`` is a JSON list (``-`` reads stdin). Each item is either a
parameter dict, e.g. ``{"ball_x": 0.3, "ball_y": 10.0, "ball_r": 0.05, "left": true}``,
or ``{"params": {...}, "actions": [[x, y, r], ...]}`` to also simulate
one-ball actions in PHYRE's own simulator. The word ``grid`` instead of a
file name means every combination of the template's own grid.

Output: ``{"template", "phyre_version", "results": [...]}``; one result per
item with ``params``, ``skipped`` and, when built, ``goal`` (indices of the
two goal bodies), ``bodies`` and, when actions were given, ``outcomes``
("solved", "not_solved" or "invalid" per action). A body has ``object_type``
(PHYRE's: ball, bar, jar, bottom-wall, ...), ``color``, ``dynamic``,
``position``, ``angle`` (radians), ``shapes`` (circles: ``radius``;
polygons: local ``vertices``), ``world_polygons`` (vertices placed in the
scene) and ``bbox`` (left, right, bottom, top).
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from typing import Any

import numpy as np

import phyre
import phyre.action_mappers
import phyre.creator.creator as creator_mod
import phyre.creator.factories as factories
import phyre.loader
import phyre.simulator
from phyre.creator import constants


def plain(value: Any) -> Any:
    """numpy scalars to JSON-ready Python values."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def load_script(template_id: str):
    _, _, module = phyre.loader.load_task_script(template_id)
    return module.build_task  # a TempateTaskScript; .builder is the raw function


def grid_param_sets(script) -> list[dict[str, Any]]:
    keys = sorted(script.params)
    values = [list(script.params[k]) for k in keys]
    return [{k: plain(v) for k, v in zip(keys, combo)} for combo in itertools.product(*values)]


def build(script, params: dict[str, Any]) -> creator_mod.TaskCreator | None:
    creator = creator_mod.TaskCreator()
    try:
        script.builder(creator, **params)
    except factories.SkipTemplateParams:
        return None
    return creator


def body_record(body: creator_mod.Body) -> dict[str, Any]:
    tb = body._thrift_body
    x, y, angle = tb.position.x, tb.position.y, tb.angle
    c, s = math.cos(angle), math.sin(angle)
    shapes, world = [], []
    for shape in tb.shapes:
        if shape.circle:
            shapes.append({"kind": "circle", "radius": shape.circle.radius})
        else:
            verts = [[v.x, v.y] for v in shape.polygon.vertices]
            shapes.append({"kind": "polygon", "vertices": verts})
            world.append([[x + c * vx - s * vy, y + s * vx + c * vy] for vx, vy in verts])
    return {
        "object_type": body.object_type,
        "color": constants.color_to_name(tb.color),
        "dynamic": bool(body.dynamic),
        "position": [x, y],
        "angle": angle,
        "shapes": shapes,
        "world_polygons": world,
        "bbox": {"left": body.left, "right": body.right, "bottom": body.bottom, "top": body.top},
    }


def simulate(task, actions: list[list[float]]) -> list[str]:
    """Outcome of each one-ball action, as PHYRE's ActionSimulator decides it."""
    mapper = phyre.action_mappers.SingleBallActionMapper()
    serialized = phyre.simulator.serialize(task)
    out = []
    for action in actions:
        user_input, valid = mapper.action_to_user_input(action)
        if not valid or phyre.simulator.check_for_occlusions(
            serialized, user_input, keep_space_around_bodies=mapper.KEEP_SPACE_AROUND_BODIES
        ):
            out.append("invalid")
            continue
        solved, *_ = phyre.simulator.magic_ponies(
            serialized, user_input, stride=100000,
            keep_space_around_bodies=mapper.KEEP_SPACE_AROUND_BODIES,
        )
        out.append("solved" if solved else "not_solved")
    return out


def reference(template_id: str, items: list[dict[str, Any]], script=None) -> dict[str, Any]:
    script = script or load_script(template_id)
    results = []
    for item in items:
        params = item["params"] if "params" in item else item
        actions = item.get("actions") if "params" in item else None
        creator = build(script, params)
        result: dict[str, Any] = {"params": params, "skipped": creator is None}
        if creator is not None:
            task = creator.task
            result["goal"] = [task.bodyId1, task.bodyId2]
            result["bodies"] = [body_record(b) for b in creator.body_list]
            if actions is not None:
                result["outcomes"] = simulate(task, actions)
        results.append(result)
    return {"template": template_id, "phyre_version": getattr(phyre, "__version__", "?"), "results": results}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    template_id, source = argv[1], argv[2]
    script = load_script(template_id)
    if source == "grid":
        items = grid_param_sets(script)
    else:
        text = sys.stdin.read() if source == "-" else open(source).read()
        items = json.loads(text)
        if not isinstance(items, list):
            print(f"{source}: expected a JSON list of parameter dicts", file=sys.stderr)
            return 2
    json.dump(reference(template_id, items, script), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
