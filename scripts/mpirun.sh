#!/usr/bin/env bash
# Runs a program on N local processes with OpenMPI's mpirun, as the tests and `make demo-dp` do:
#   scripts/mpirun.sh 2 build/examples/train_digits_ddp
# --oversubscribe: more ranks than cores is fine here (a 2-core machine runs 3 ranks);
# --bind-to none: each rank's communication thread may run on any core. One compute thread per
# rank unless OMP_NUM_THREADS says otherwise. Root (containers, CI) must be allowed explicitly.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 NUM_PROCESSES PROGRAM [ARGS...]" >&2; exit 2; }
np=$1; shift
command -v mpirun >/dev/null || { echo "mpirun not found: run scripts/install-deps.sh (openmpi-bin)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
forward=(-x OMP_NUM_THREADS)
[ -n "${SMELT_DISTRIBUTED_TIMEOUT:-}" ] && forward+=(-x SMELT_DISTRIBUTED_TIMEOUT)
exec mpirun -np "$np" --oversubscribe --bind-to none "${forward[@]}" "$@"
