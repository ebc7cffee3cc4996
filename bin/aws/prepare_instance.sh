#!/usr/bin/env bash
# Prepare a fresh GPU instance: copy the project folder and install scramjet and the
# project's requirements into the instance's Python.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bin/aws/_common.sh
. "$here/_common.sh"

usage() {
  cat <<'TXT'
usage: prepare_instance.sh (--address HOST | --instance-id ID) --project DIR
                           [--ssh-key KEY] [--user ubuntu] [--region R]
                           [--requirements FILE] [--package SPEC] [--dry-run]
  --project DIR        local project folder, copied to ~/<basename of DIR> on the instance
  --requirements FILE  requirements file inside the project to pip-install (optional)
  --package SPEC       what pip installs for scramjet (default: scramjet)
  --dry-run            print the commands instead of running them
TXT
}

PROJECT=""; REQUIREMENTS=""; PACKAGE=scramjet
while [ $# -gt 0 ]; do
  parse_common "$1" "${2:-}"
  if [ "$USED" -gt 0 ]; then shift "$USED"; continue; fi
  case "$1" in
    -p|--project) need "$1" "${2:-}"; PROJECT=$2; shift 2 ;;
    -r|--requirements) need "$1" "${2:-}"; REQUIREMENTS=$2; shift 2 ;;
    --package) need "$1" "${2:-}"; PACKAGE=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option: $1" ;;
  esac
done
[ -n "$PROJECT" ] || die "--project DIR is required"
[ -d "$PROJECT" ] || die "--project $PROJECT is not a folder"

resolve_address
ssh_opts
name=$(basename "$PROJECT")
remote="$AWS_USER@$ADDRESS"
run rsync -az --exclude .git --exclude .venv --exclude __pycache__ \
  -e "ssh ${SSH_OPTS[*]}" "${PROJECT%/}/" "$remote:$name/"
install="python3 -m pip install --upgrade pip && python3 -m pip install $PACKAGE"
if [ -n "$REQUIREMENTS" ]; then install="$install -r $name/$REQUIREMENTS"; fi
run ssh "${SSH_OPTS[@]}" "$remote" "$install"
