"""Top-down images of rope configurations with MuJoCo's renderer.

Headless machines need an off-screen OpenGL: set ``MUJOCO_GL=egl`` before
MuJoCo is imported (``osmesa`` where EGL is missing). The camera is
orthographic and looks straight down on the rope's centre, so the image is
the projection the knot oracle reads (image right = +x, image up = +y, a
strand nearer the camera hides the one below). The rope is drawn as
low-polygon capsules coloured along its length (bead 0 white), which is
several times faster on a software renderer than MuJoCo's own flex drawing.
"""

from __future__ import annotations

import mujoco
import numpy as np

from simpatterns.simulators.mujoco.rope import RopeWorld, bead_colors

_OFF = ("mjRND_SHADOW", "mjRND_REFLECTION", "mjRND_SKYBOX", "mjRND_FOG", "mjRND_HAZE")


class RopeRenderer:
    """Renders bead positions ``[beads, 3]`` of ``world``'s rope as ``[height, width, 3]`` uint8."""

    def __init__(self, world: RopeWorld, width: int = 128, height: int = 128):
        self.world = world
        m = world.model
        self.width, self.height = int(width), int(height)
        try:
            self._renderer = mujoco.Renderer(m, self.height, self.width)
        except Exception as exc:  # no OpenGL: say how to get one instead of a GLFW trace
            raise RuntimeError(
                f"MuJoCo cannot render ({type(exc).__name__}: {exc}); on a machine without a display set "
                "MUJOCO_GL=egl (or osmesa) before mujoco is first imported"
            ) from exc
        for flag in _OFF:
            self._renderer.scene.flags[getattr(mujoco.mjtRndFlag, flag)] = 0
        self._option = mujoco.MjvOption()
        self._option.flexgroup[:] = 0  # the rope is drawn as coloured capsules instead
        self._camera = mujoco.MjvCamera()
        self._camera.type = int(mujoco.mjtCamera.mjCAMERA_FREE)
        self._camera.orthographic = 1
        self._camera.elevation = -90.0
        self._camera.azimuth = 90.0
        self._camera.distance = 1.0
        self._colors = bead_colors(world.num_beads)
        self._scratch = mujoco.MjData(m)
        mujoco.mj_forward(m, self._scratch)
        self._radius = world.config.radius

    def render(self, positions: np.ndarray | None = None) -> np.ndarray:
        """The top view of ``positions`` (default: the world's current beads)."""
        p = self.world.positions() if positions is None else np.asarray(positions, dtype=np.float64)
        self._camera.lookat[:] = p.mean(axis=0)
        r = self._renderer
        r.update_scene(self._scratch, camera=self._camera, scene_option=self._option)
        scn = r.scene
        n = p.shape[0]
        room = scn.maxgeom - scn.ngeom
        if room < n:
            raise RuntimeError(f"the scene has room for {room} more geoms, the rope needs {n}")
        nxt = np.roll(p, -1, axis=0)
        start = scn.ngeom
        eye = np.eye(3).ravel()
        zero = np.zeros(3)
        for k in range(n):
            g = scn.geoms[start + k]
            mujoco.mjv_initGeom(g, mujoco.mjtGeom.mjGEOM_CAPSULE, zero, zero, eye, self._colors[k])
            mujoco.mjv_connector(g, mujoco.mjtGeom.mjGEOM_CAPSULE, self._radius, p[k], nxt[k])
        scn.ngeom = start + n
        return r.render().copy()

    def close(self) -> None:
        self._renderer.close()
