"""Tasks and menu sizes the agent tests share (a module of its own: test folders each have a
conftest.py, so ``from conftest import`` would pick whichever folder was collected first)."""

# Small 3^3 grids keep menus cheap (about 25 valid cells, well under a second each).
# 00002:002 has solving cells (A7 and A15); 00000:000 has none, so its stored solution is added.
SOLVABLE = "00002:002"
ADDED = "00000:000"
BINS = 3
