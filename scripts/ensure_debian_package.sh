#!/usr/bin/env bash
# Installs one Debian package for a test when the command it provides is missing, as root
# and where apt-get exists; otherwise says the one command that installs it. The tests
# that need it report themselves skipped without it, which fails under CI=true.
#
#   bash scripts/ensure_debian_package.sh LABEL COMMAND PACKAGE PURPOSE
#
# e.g. `... mpi mpirun openmpi-bin "the mpirun test"`; COMMAND may be a path
# (/usr/bin/chromium: Playwright drives that binary and never downloads a browser).
set -euo pipefail
if [ "$#" -ne 4 ]; then
  echo "usage: bash scripts/ensure_debian_package.sh LABEL COMMAND PACKAGE PURPOSE" >&2
  exit 2
fi
label=$1 command=$2 package=$3 purpose=$4
if command -v "$command" >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "$label: installing Debian's $package for $purpose" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
  exit 0
fi
echo "$label: $command is missing and cannot be installed here (not root);" \
     "run: sudo apt-get install $package" >&2
