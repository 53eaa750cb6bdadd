#!/usr/bin/env sh
# Installs the Debian chromium used by tests/test_report_browser.py (Playwright drives it through
# executable_path, so `playwright install` and its browser download are never needed).
set -eu
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
test -x /usr/bin/chromium
