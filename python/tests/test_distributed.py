"""smelt.distributed from Python: jobs of 1, 2 and 3 ranks (scripts/mpirun.sh), each rank running
distributed_worker.py; and the single process outside mpirun."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = os.path.join(HERE, "..", "..", "scripts", "mpirun.sh")
WORKER = os.path.join(HERE, "distributed_worker.py")


def job(ranks, mode, limit=240):
    return subprocess.run(["bash", MPIRUN, str(ranks), sys.executable, WORKER, mode], capture_output=True,
                          text=True, timeout=limit, env=dict(os.environ, OMP_NUM_THREADS="1"))


pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed")


@pytest.mark.parametrize("ranks", [2, 3])
def test_data_parallel_training_matches_one_process(ranks):
    r = job(ranks, "train")
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(ranks):
        assert f"rank {rank} of {ranks}: ok" in r.stdout, r.stdout + r.stderr


def test_one_process_without_mpirun():
    r = subprocess.run([sys.executable, WORKER, "train"], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0 of 1: ok" in r.stdout


def test_an_exception_on_one_rank_stops_every_rank():
    r = job(3, "throw", limit=60)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "RuntimeError: python boom" in out, out
    for rank in (0, 2):
        assert f"rank {rank} stops: rank 1 failed: RuntimeError: python boom" in out, out
