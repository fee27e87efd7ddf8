"""Action-conditioned value models of PHYRE scenes (paper §5.3), trained on reward-program labels.

`scene` (the 7-role image) and `data` (labelled action sets as Parquet) need no
torch; `model`, `train` and `rank` import it and need the ``value`` extra
(``pip install 'simpatterns[value]'``).
"""
