#!/usr/bin/env bash
# Installs a Java runtime for the Nu Html Checker (node_modules/vnu-jar) when `java` is
# missing; Debian's default-jre-headless is Java 17 on bookworm, which vnu needs.
set -euo pipefail
if command -v java >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "java: installing Debian's default-jre-headless for the HTML checker" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null
  exit 0
fi
# Not root: the HTML test will report itself skipped, which fails under CI=true.
echo "java: java is missing and cannot be installed here (not root);" \
     "run: sudo apt-get install default-jre-headless" >&2
