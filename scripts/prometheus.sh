#!/usr/bin/env bash
# Installs Debian's prometheus package for promtool when it is missing.
# The deploy tests run `promtool check rules`, `promtool test rules` and
# `promtool check config` on deploy/prometheus/, and `promtool check
# metrics` on a live node's scrape; `make test` runs this script first so
# that a fresh machine has the tool. As root it runs apt-get itself;
# otherwise through password-less sudo. The package's server is not
# started (policy-rc.d refuses it; only promtool is wanted).
# When it cannot install, it says so and fails in CI (CI=1), where those
# tests fail too; elsewhere it only warns (the tests then skip and say why).
set -euo pipefail

cannot() {
	echo "scripts/prometheus.sh: $*" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	echo "scripts/prometheus.sh: the promtool checks will be skipped (CI=1 makes this an error)" >&2
	exit 0
}

if command -v promtool >/dev/null 2>&1; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	cannot "promtool is missing and apt-get is not available: install Prometheus's promtool and put it on PATH"
fi
if [ "$(id -u)" -eq 0 ]; then
	SUDO=(env DEBIAN_FRONTEND=noninteractive)
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)
else
	cannot "promtool is missing and neither root nor password-less sudo is available: sudo apt-get install prometheus"
fi

echo "scripts/prometheus.sh: installing Debian's prometheus package (for promtool)" >&2
# Keep the package's service from starting where it installs (exit 101:
# "action forbidden" to invoke-rc.d), and put the policy back after.
policy=/usr/sbin/policy-rc.d
restore=""
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
	"${SUDO[@]}" chmod 755 "$policy"
	restore=1
fi
trap '[ -n "$restore" ] && "${SUDO[@]}" rm -f "$policy"' EXIT
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends prometheus
promtool --version
