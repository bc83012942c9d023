#!/usr/bin/env bash
# Installs Debian packages that tests need, when they are missing:
#   scripts/debian-package.sh "WHAT FOR" "CHECK" PACKAGE...
# CHECK is a shell command that succeeds when the packages are there (for
# example "test -x /usr/bin/chromium" or "perl -MNet::SMPP -e 1"). As root
# it runs apt-get itself; otherwise through password-less sudo. When it
# cannot install, it says so and fails in CI (CI=1), where the tests that
# need the packages would fail too; elsewhere it only warns (those tests
# then skip and say why).
set -euo pipefail

what=$1 check=$2
shift 2

cannot() {
	echo "scripts/debian-package.sh: $*" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	echo "scripts/debian-package.sh: the $what will be skipped (CI=1 makes this an error)" >&2
	exit 0
}

if bash -c "$check" >/dev/null 2>&1; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	cannot "$* missing for the $what and apt-get is not available: install them"
fi
if [ "$(id -u)" -eq 0 ]; then
	SUDO=(env DEBIAN_FRONTEND=noninteractive)
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	SUDO=(sudo -n env DEBIAN_FRONTEND=noninteractive)
else
	cannot "$* missing for the $what and neither root nor password-less sudo is available: sudo apt-get install $*"
fi

echo "scripts/debian-package.sh: installing Debian's $* (for the $what)" >&2
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "$@"
bash -c "$check" || cannot "$* installed, but \`$check\` still fails"
