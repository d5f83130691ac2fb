#!/usr/bin/env bash
# Install headless Chromium (the Debian/Ubuntu package) for the HTML report's browser test, where
# this machine allows it: as root with apt-get. Never fails: without it the browser test skips.
#   tools/install_browser.sh          (make test runs it)
set -uo pipefail

say() { printf '[install_browser] %s\n' "$*"; }

for exe in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$exe" >/dev/null 2>&1; then
    exit 0
  fi
done
if [[ "${SYSID_NO_BROWSER_INSTALL:-}" == 1 ]]; then
  say "SYSID_NO_BROWSER_INSTALL=1: not installing Chromium; the report's browser test will skip"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || [[ "$(id -u)" != 0 ]]; then
  say "no Chromium and no root apt-get here: the report's browser test will skip" \
      "(install the 'chromium' package to run it)"
  exit 0
fi
say "installing the Debian package chromium (once; for the report's browser test)"
log="$(mktemp)"
if { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
     >"$log" 2>&1; then
  say "installed $(command -v chromium)"
else
  say "apt-get could not install chromium (the report's browser test will skip); last lines:"
  tail -n 5 "$log" >&2
fi
rm -f "$log"
exit 0
