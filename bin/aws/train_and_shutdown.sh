#!/usr/bin/env bash
# Run the training command on the instance, then stop (or terminate) the instance when
# the command ends, whether it succeeded or failed. The exit status is the command's.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bin/aws/_common.sh
. "$here/_common.sh"

usage() {
  cat <<'TXT'
usage: train_and_shutdown.sh --instance-id ID [--address HOST] --project NAME
                             [--ssh-key KEY] [--user ubuntu] [--region R]
                             [--terminate] [--dry-run] -- COMMAND [ARGS...]
  --project NAME  folder on the instance (under ~) the command runs in
  --terminate     terminate the instance instead of stopping it
  --dry-run       print the commands instead of running them
  COMMAND         the training command, e.g. -- python3 train.py --epochs 10
TXT
}

PROJECT=""; ACTION=stop-instances; COMMAND=()
while [ $# -gt 0 ]; do
  parse_common "$1" "${2:-}"
  if [ "$USED" -gt 0 ]; then shift "$USED"; continue; fi
  case "$1" in
    -p|--project) need "$1" "${2:-}"; PROJECT=$2; shift 2 ;;
    --terminate) ACTION=terminate-instances; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; COMMAND=("$@"); break ;;
    *) die "unknown option: $1 (put the training command after --)" ;;
  esac
done
[ -n "$INSTANCE_ID" ] || die "--instance-id ID is required (it is the instance stopped at the end)"
[ -n "$PROJECT" ] || die "--project NAME is required"
[ ${#COMMAND[@]} -gt 0 ] || die "give the training command after --"

resolve_address
ssh_opts
remote_cmd="cd $(printf '%q' "$PROJECT") &&"
for arg in "${COMMAND[@]}"; do remote_cmd="$remote_cmd $(printf '%q' "$arg")"; done
status=0
run ssh "${SSH_OPTS[@]}" "$AWS_USER@$ADDRESS" "$remote_cmd" || status=$?
aws_cli ec2 "$ACTION" --instance-ids "$INSTANCE_ID"
exit "$status"
