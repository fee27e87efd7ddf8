"""Menus, the attempt loop's rules, and the agents without a language model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agent_tasks import ADDED, BINS, SOLVABLE
from simpatterns.agents.baselines import AnnealAgent, MemoryAgent, OracleAgent, RandomAgent, train_memory
from simpatterns.agents.episode import Agent, Proposal, TaskContext, run_episode
from simpatterns.agents.menu import NOT_SOLVED, SOLVED, Choice, Menu, MenuStore, build_menu
from simpatterns.agents.metrics import expected_random_curve
from simpatterns.agents.tasks import Task, TaskError, parse_task_id, task_id
from simpatterns.simulators.phyre import check_action, quantize_action, simulate


def ctx(menu, budget=100, seed=0, task=SOLVABLE):
    return TaskContext(Task.from_id(task), menu, budget, seed, np.random.default_rng(seed))


# ------------------------------------------------------------------ tasks and menus
def test_task_ids():
    assert task_id(7, 42) == "00007:042" and parse_task_id("7:42") == ("00007", 42)
    with pytest.raises(TaskError, match="template 00007 has variants 0..99"):
        parse_task_id("00007:100")
    with pytest.raises(TaskError, match="not TEMPLATE:VARIANT"):
        parse_task_id("seven")


def test_menu_is_the_valid_grid_with_verified_outcomes(store):
    menu = store.get(SOLVABLE)
    task = Task.from_id(SOLVABLE)
    valid = [c for c in range(BINS**3) if check_action(task.scene, quantize_action(c, BINS)) is None]
    assert [c.cell for c in menu.choices] == valid and [c.id for c in menu.choices] == [f"A{k + 1}" for k in range(len(valid))]
    assert menu.known and not menu.added_solution and menu.solving
    for k in (menu.solving[0], next(k for k in range(len(menu)) if menu.status(k) == NOT_SOLVED)):
        assert simulate(task.scene, menu.choices[k].action).success == (menu.status(k) == SOLVED)
    x, y, r = menu.choices[0].action
    assert menu.choices[0].text() == f"A1: x={x * 255:.0f} y={y * 255:.0f} r={2 + 30 * r:.0f}"
    assert menu.index("a1") == menu.index("1") == 0 and menu.index("A999") is None


def test_stored_solution_is_added_when_no_cell_solves(store):
    menu = store.get(ADDED)
    task = Task.from_id(ADDED)
    assert menu.added_solution and menu.solving == [len(menu) - 1]
    last = menu.choices[-1]
    assert last.cell is None and list(last.action) == task.stored_solution
    assert simulate(task.scene, last.action).success
    assert all(menu.status(k) == NOT_SOLVED for k in range(len(menu) - 1))


def test_menu_cache_is_reused_and_invalidated(tmp_path):
    s = MenuStore(tmp_path, bins=2)
    m = s.get(SOLVABLE)
    path = s.path(Task.from_id(SOLVABLE))
    stamp = path.stat().st_mtime_ns
    again = s.get(SOLVABLE)
    assert path.stat().st_mtime_ns == stamp and again.to_json() == m.to_json()
    data = json.loads(path.read_text())
    data["key"] = "stale"
    path.write_text(json.dumps(data))
    assert s.cached(SOLVABLE) is None  # a different scene or grid: rebuilt, not trusted
    path.write_text('{"format": "simpatterns-menu", "cells": [')  # torn
    assert s.cached(SOLVABLE) is None and s.get(SOLVABLE).to_json() == m.to_json()


def test_first_scan_stops_at_a_solution():
    m = build_menu(SOLVABLE, BINS, scan="first")
    assert len(m.solving) == 1 and not m.known and m.simulations <= len(m)


# ------------------------------------------------------------------ the loop
class Scripted(Agent):
    """Proposes a fixed list."""

    name = "scripted"

    def __init__(self, proposals):
        self.proposals = list(proposals)
        self.seen = []

    def propose(self):
        return self.proposals.pop(0) if self.proposals else None

    def observe(self, attempt):
        self.seen.append(attempt.status)


def test_loop_rules(store):
    menu = store.get(SOLVABLE)
    fail = next(c for k, c in enumerate(menu.choices) if menu.status(k) == NOT_SOLVED)
    win = menu.choices[menu.solving[0]]
    overlapping = [0.5, 0.0, 1.0]  # a big ball on the floor: outside the scene
    assert check_action(Task.from_id(SOLVABLE).scene, overlapping) is not None
    agent = Scripted([Proposal(action=overlapping), Proposal(choice=fail.id), Proposal(wasted="no answer"),
                      Proposal(action=list(fail.action)), Proposal(choice="A999"), Proposal(choice=win.id),
                      Proposal(choice=fail.id)])
    ep = run_episode(agent, ctx(menu))
    assert [a.status for a in ep.attempts] == ["invalid", "not_solved", "wasted", "wasted", "wasted", "solved"]
    assert [a.number for a in ep.attempts] == [None, 1, 2, 3, 4, 5]
    assert ep.attempts[3].repeat_of == 1 and ep.attempts[3].choice == fail.id  # the same action is the same choice
    assert ep.solved_at == 5 and ep.used == 5 and agent.seen == [a.status for a in ep.attempts]
    log = ep.phyre_log()
    assert [int(s) for _, s in log] == [0, -1, -1, -1, -1, 1]


def test_budget_and_giving_up(store):
    menu = store.get(SOLVABLE)
    fails = [c.id for k, c in enumerate(menu.choices) if menu.status(k) == NOT_SOLVED]
    ep = run_episode(Scripted([Proposal(choice=c) for c in fails]), ctx(menu, budget=3))
    assert ep.used == 3 and ep.solved_at is None and ep.stopped == ""
    ep = run_episode(Scripted([Proposal(choice=fails[0])]), ctx(menu, budget=3))
    assert ep.used == 1 and ep.stopped == "gave up"
    with pytest.raises(ValueError, match="PHYRE's cap"):
        run_episode(Scripted([]), ctx(menu, budget=101))


# ------------------------------------------------------------------ baselines
def test_oracle_and_random(store):
    menu = store.get(SOLVABLE)
    assert run_episode(OracleAgent(), ctx(menu)).solved_at == 1
    eps = [run_episode(RandomAgent(), ctx(menu, seed=s)) for s in range(3)]
    for e in eps:  # without replacement: every try is a new choice, and it ends at a solution
        chosen = [a.choice for a in e.attempts]
        assert len(set(chosen)) == len(chosen) and e.solved_at is not None
        assert e.attempts[-1].choice in {menu.choices[k].id for k in menu.solving}
    assert len({tuple(a.choice for a in e.attempts) for e in eps}) == 3  # the seed decides the order


def synthetic_menu(n, solving, task=SOLVABLE):
    """A menu with given outcomes (the loop reads outcomes from a full-scan menu, so nothing is simulated)."""
    choices = [Choice(f"A{k + 1}", (0.1 + 0.8 * k / n, 0.9, 0.1), k) for k in range(n)]
    solved = np.array([SOLVED if k in solving else NOT_SOLVED for k in range(n)], dtype=np.int8)
    return Menu(task, 9, "full", choices, solved, False, "synthetic", 729, 0)


def test_sampled_random_agent_matches_its_expectation():
    menu = synthetic_menu(30, {4, 17})
    firsts = np.array([run_episode(RandomAgent(), ctx(menu, budget=30, seed=s)).solved_at for s in range(600)])
    curve = expected_random_curve(30, 2, 30)
    empirical = np.array([np.mean(firsts <= k) for k in range(1, 31)])
    assert np.abs(empirical - curve).max() < 0.07  # 600 samples: a few standard errors
    assert firsts.mean() == pytest.approx(31 / 3, rel=0.1)  # E[first of 2 in 30] = (N+1)/(S+1)


def test_memory_ranks_cells_by_training_solve_rate():
    a = synthetic_menu(6, {2}, "00002:001")
    b = synthetic_menu(6, {2, 4}, "00002:003")
    c = synthetic_menu(6, {5}, "00006:001")
    table = train_memory([a, b, c])
    assert table.solved["*"][[2, 4, 5]].tolist() == [2, 1, 1] and table.failed["00002"][2] == 0
    assert table.ranking("*")[:3] == [2, 4, 5]  # 2/3 > 1/3 = 1/3; ties: lower cell first
    assert table.ranking("00006")[0] == 5
    test = synthetic_menu(6, {5}, "00006:003")
    per_template = MemoryAgent(table, test_templates=["00002", "00006"])
    assert per_template.per_template and run_episode(per_template, ctx(test, task="00006:003")).solved_at == 1
    pooled = MemoryAgent(table, template_aware=False)
    assert run_episode(pooled, ctx(test, task="00006:003")).solved_at == 3


def test_anneal_agent_logs_the_optimizers_samples_in_order(store):
    from simpatterns.envs.scenes import task_program_text
    from simpatterns.optimize import Objective, anneal
    from simpatterns.agents.baselines import task_success
    from simpatterns.agents.runner import episode_rng

    menu = store.get(SOLVABLE)
    context = ctx(menu, budget=40, seed=3)
    context.rng = episode_rng(3, SOLVABLE, "anneal")
    ep = run_episode(AnnealAgent(), context)
    # the same search, run directly: its samples are the attempts, up to the first task success
    scene = Task.from_id(SOLVABLE).scene
    seed = int(episode_rng(3, SOLVABLE, "anneal").integers(2**31))
    direct = anneal(Objective(scene, program=task_program_text(scene), goal=task_success, stop_when_settled=True),
                    40, seed=seed, bins=BINS, stop_on_success=False, stop_on_goal=True, keep_trace=False)
    assert [a.action for a in ep.attempts] == [e.action for e in direct.evaluations]
    assert ep.solved_at == next((k + 1 for k, e in enumerate(direct.evaluations) if e.goal_success), None)
    assert all(a.status != "invalid" for a in ep.attempts)  # the optimizer redraws invalid proposals itself
