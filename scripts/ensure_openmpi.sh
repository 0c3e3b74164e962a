#!/usr/bin/env bash
# Installs Debian's Open MPI (openmpi-bin: mpirun) for the launcher tests when it is
# missing: tests/test_launchers.py runs the four ranks under mpirun on loopback.
set -euo pipefail
if command -v mpirun >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "mpi: installing Debian's openmpi-bin for the mpirun test" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin >/dev/null
  exit 0
fi
# Not root: the mpirun tests will report themselves skipped, which fails under CI=true.
echo "mpi: mpirun is missing and cannot be installed here (not root);" \
     "run: sudo apt-get install openmpi-bin" >&2
