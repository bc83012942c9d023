#!/usr/bin/env bash
# Installs Debian's chromium package for the web UI's browser test
# (ui_browser_test.go drives /usr/bin/chromium through chromedp) when it is
# missing. `make test` runs it first, so a fresh machine gets the browser.
# As root it runs apt-get itself; otherwise through password-less sudo.
# When it cannot install, it says so and fails in CI (CI=1), where the
# browser test would fail too; elsewhere it only warns (the test then skips
# and says why).
set -euo pipefail

cannot() {
	echo "scripts/chromium.sh: $*" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	echo "scripts/chromium.sh: the web UI browser test will be skipped (CI=1 makes this an error)" >&2
	exit 0
}

# CHROMIUM (also read by the test) names another browser binary: it must
# exist, nothing is installed for it.
if [ -n "${CHROMIUM:-}" ]; then
	if [ -x "$CHROMIUM" ]; then
		exit 0
	fi
	cannot "CHROMIUM=$CHROMIUM is not an executable file"
fi
CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	cannot "$CHROMIUM is missing and apt-get is not available: install Chromium and set CHROMIUM to it"
fi
if [ "$(id -u)" -eq 0 ]; then
	SUDO=(env DEBIAN_FRONTEND=noninteractive)
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)
else
	cannot "$CHROMIUM is missing and neither root nor password-less sudo is available: sudo apt-get install chromium"
fi

echo "scripts/chromium.sh: installing Debian's chromium package (for the web UI browser test)" >&2
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends chromium fonts-liberation
"$CHROMIUM" --version
