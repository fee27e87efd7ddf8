"""The programs database: clusters, sampling, resets by count, stale and duplicate drops, JSON."""

import numpy as np
import pytest

from simpatterns.sandbox import reasons as R
from simpatterns.evolve.database import DatabaseConfig, DetectorProgram, ProgramsDatabase


def prog(fitness, sig=(0.1,), h=None, lines=10):
    return DetectorProgram(id=-1, source=f"# {fitness} {h}", fitness=fitness, signature=tuple(sig),
                   events_hash=h or f"h{fitness}{sig}", lines=lines)


def test_seed_once_in_every_island():
    db = ProgramsDatabase(DatabaseConfig(num_islands=3))
    db.seed(prog(0.0, h="seed"))
    assert [isl.num_programs for isl in db.islands] == [1, 1, 1]
    with pytest.raises(RuntimeError):
        db.seed(prog(0.0, h="seed"))


def test_register_stays_in_its_island_and_drops_duplicates():
    db = ProgramsDatabase(DatabaseConfig(num_islands=3, reset_period=100))
    db.seed(prog(0.0, h="seed"))
    assert db.register(prog(0.5, h="a"), island=1, epoch=0) is None
    assert [isl.num_programs for isl in db.islands] == [1, 2, 1]
    assert db.register(prog(0.6, h="a"), island=1, epoch=0).code == R.DUPLICATE
    assert db.register(prog(0.6, h="a"), island=2, epoch=0) is None  # islands dedupe independently
    assert db.register(prog(0.1, h="seed"), island=0, epoch=0).code == R.DUPLICATE


def test_clusters_by_signature_and_ascending_versions():
    db = ProgramsDatabase(DatabaseConfig(num_islands=1, reset_period=100, functions_per_prompt=2))
    db.seed(prog(0.0, sig=(0.0,), h="seed"))
    db.register(prog(0.3, sig=(0.2,), h="a"), 0, 0)
    db.register(prog(0.2, sig=(0.2,), h="b"), 0, 0)
    assert len(db.islands[0].clusters) == 2
    for s in range(20):
        chosen = db.sample_programs(0, np.random.default_rng(s))
        assert len(chosen) == 2 and chosen[0].fitness <= chosen[1].fitness


def test_softmax_prefers_better_clusters_and_shorter_programs():
    db = ProgramsDatabase(DatabaseConfig(num_islands=1, reset_period=1000, functions_per_prompt=1,
                                         cluster_temperature_init=0.1))
    db.seed(prog(0.0, sig=(0.0,), h="seed"))
    db.register(prog(1.0, sig=(0.5,), h="long", lines=200), 0, 0)
    db.register(prog(1.0, sig=(0.5,), h="short", lines=10), 0, 0)
    picks = [db.sample_programs(0, np.random.default_rng(s))[0].events_hash for s in range(300)]
    assert picks.count("seed") < 15  # the best cluster dominates at a low temperature
    assert picks.count("short") > picks.count("long")


def test_reset_every_n_registrations_reseeds_from_a_survivor():
    db = ProgramsDatabase(DatabaseConfig(num_islands=4, reset_period=4))
    db.seed(prog(0.0, h="seed"))
    scores = [0.9, 0.1, 0.5, 0.2]
    for i, s in enumerate(scores[:3]):
        assert db.register(prog(s, h=f"p{i}"), island=i, epoch=0) is None
    assert db.resets == 0
    db.register(prog(scores[3], h="p3"), island=3, epoch=0, reset_rng=np.random.default_rng(0))
    assert db.resets == 1
    # the weaker half (islands 1 and 3) was emptied and reseeded with a survivor's best
    assert [isl.epoch for isl in db.islands] == [0, 1, 0, 1]
    for i in (1, 3):
        best = db.islands[i].best
        assert db.islands[i].num_programs == 1 and best.fitness in (0.9, 0.5)
    # a sample prompted from island 1 before the reset is dropped
    assert db.register(prog(5.0, h="late"), island=1, epoch=0).code == R.STALE_ISLAND
    assert db.register(prog(5.0, h="late"), island=1, epoch=1) is None


def test_json_round_trip_continues_identically():
    cfg = DatabaseConfig(num_islands=3, reset_period=5)
    a = ProgramsDatabase(cfg)
    a.seed(prog(0.0, h="seed"))
    rng = np.random.default_rng(3)
    for i in range(7):
        a.register(prog(float(rng.random()), sig=(round(float(rng.random()), 1),), h=f"x{i}"),
                   int(rng.integers(3)), a.epoch(0), np.random.default_rng(i))
    b = ProgramsDatabase.from_json(a.to_json())
    assert b.to_json() == a.to_json()
    for s in range(5):
        pa = a.sample_programs(s % 3, np.random.default_rng(s))
        pb = b.sample_programs(s % 3, np.random.default_rng(s))
        assert [p.id for p in pa] == [p.id for p in pb]
