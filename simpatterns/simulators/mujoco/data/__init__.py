"""Shipped rope start/goal configurations (rope_train.npz, rope_eval.npz); see scripts/build_rope_configs.py."""
