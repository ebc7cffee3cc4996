#!/usr/bin/env bash
# Rebuild the scramjet wheel from a local checkout and reinstall it on the instance.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bin/aws/_common.sh
. "$here/_common.sh"

usage() {
  cat <<'TXT'
usage: update_package.sh (--address HOST | --instance-id ID) [--source DIR]
                         [--ssh-key KEY] [--user ubuntu] [--region R] [--dry-run]
  --source DIR  the scramjet checkout to build (default: this script's repository)
  --dry-run     print the commands instead of running them
TXT
}

SOURCE=$(cd "$here/../.." && pwd)
while [ $# -gt 0 ]; do
  parse_common "$1" "${2:-}"
  if [ "$USED" -gt 0 ]; then shift "$USED"; continue; fi
  case "$1" in
    -s|--source) need "$1" "${2:-}"; SOURCE=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option: $1" ;;
  esac
done
[ -f "$SOURCE/pyproject.toml" ] || die "--source $SOURCE has no pyproject.toml"

resolve_address
ssh_opts
dist="$SOURCE/dist/aws-update"
remote="$AWS_USER@$ADDRESS"
run rm -rf "$dist"
run python3 -m pip wheel --no-deps --wheel-dir "$dist" "$SOURCE"
if [ "$DRY_RUN" = 1 ]; then
  wheel="$dist/scramjet-<version>-py3-none-any.whl"
else
  wheel=$(ls "$dist"/scramjet-*.whl | head -n 1)
fi
run scp "${SSH_OPTS[@]}" "$wheel" "$remote:/tmp/"
run ssh "${SSH_OPTS[@]}" "$remote" \
  "python3 -m pip install --force-reinstall --no-deps /tmp/$(basename "$wheel") && rm -f /tmp/$(basename "$wheel")"
