"""``simpatterns env list|check``."""

from typer.testing import CliRunner

from simpatterns.cli import app


def test_env_list_and_check():
    runner = CliRunner()
    out = runner.invoke(app, ["env", "list"])
    assert out.exit_code == 0, out.output
    assert "simpatterns/PhyreOneBall-v0" in out.output and "semantic" in out.output
    assert "simpatterns/KnotRope-v0" in out.output and "unknot, tie, convert" in out.output
    assert out.output.count("reward=score|success|gain") == 3
    assert max(map(len, out.output.splitlines())) <= 80  # read in an 80-column terminal
    out = runner.invoke(app, ["env", "check", "--template", "00000", "--max-steps", "30"])
    assert out.exit_code == 0, out.output
    assert out.output.count("ok ") == 14 and "FAIL" not in out.output  # 2 x 6 PHYRE + 2 rope configurations
    assert "KnotRope-v0 obs_mode=rgb" in out.output and "KnotRope-v0 obs_mode=state" in out.output
