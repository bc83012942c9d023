#!/usr/bin/env bash
# Installs Debian's chromium package for the web UI's browser test
# (ui_browser_test.go drives /usr/bin/chromium through chromedp) when it is
# missing. `make test` runs it first, so a fresh machine gets the browser.
# CHROMIUM (also read by the test) names another browser binary: it must
# exist, nothing is installed for it.
set -euo pipefail
cd "$(dirname "$0")"

if [ -n "${CHROMIUM:-}" ]; then
	if [ -x "$CHROMIUM" ]; then
		exit 0
	fi
	echo "scripts/chromium.sh: CHROMIUM=$CHROMIUM is not an executable file" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	exit 0
fi
./debian-package.sh "web UI browser test" "test -x /usr/bin/chromium" chromium fonts-liberation
