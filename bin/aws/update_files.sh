#!/usr/bin/env bash
# Send the project's changed files to the instance (rsync: only what changed travels).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bin/aws/_common.sh
. "$here/_common.sh"

usage() {
  cat <<'TXT'
usage: update_files.sh (--address HOST | --instance-id ID) --project DIR
                       [--ssh-key KEY] [--user ubuntu] [--region R] [--delete] [--dry-run]
  --project DIR  local project folder; the instance copy is ~/<basename of DIR>
  --delete       also remove files on the instance that no longer exist locally
  --dry-run      print the commands instead of running them
TXT
}

PROJECT=""; DELETE=()
while [ $# -gt 0 ]; do
  parse_common "$1" "${2:-}"
  if [ "$USED" -gt 0 ]; then shift "$USED"; continue; fi
  case "$1" in
    -p|--project) need "$1" "${2:-}"; PROJECT=$2; shift 2 ;;
    --delete) DELETE=(--delete); shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option: $1" ;;
  esac
done
[ -n "$PROJECT" ] || die "--project DIR is required"
[ -d "$PROJECT" ] || die "--project $PROJECT is not a folder"

resolve_address
ssh_opts
run rsync -az ${DELETE[@]+"${DELETE[@]}"} --exclude .git --exclude .venv --exclude __pycache__ \
  -e "ssh ${SSH_OPTS[*]}" "${PROJECT%/}/" "$AWS_USER@$ADDRESS:$(basename "$PROJECT")/"
