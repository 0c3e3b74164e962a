#!/usr/bin/env bash
# Installs Debian's chromium for the browser test when it is missing. Playwright drives
# this binary (executable_path=/usr/bin/chromium); it never downloads a browser of its own.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "browser: installing Debian's chromium for the browser test" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  exit 0
fi
# Not root: the browser test will report itself skipped, which fails under CI=true.
echo "browser: /usr/bin/chromium is missing and cannot be installed here (not root);" \
     "run: sudo apt-get install chromium" >&2
