#!/usr/bin/env bash
# Installs the Debian packages that some tests drive for real: headless Chromium (the
# HTML report is opened and screenshotted) and tmux (the dashboard runs in a real
# terminal). Skipped when already present; needs root (as on CI machines) otherwise.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "system-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
