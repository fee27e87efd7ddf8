"""Paths the MuJoCo tests share (a module of its own: ``from conftest import`` would pick
whichever test folder's conftest.py was collected first)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE_XML = ROOT / "examples" / "mujoco" / "table_drop.xml"
