#!/usr/bin/env bash
# Shared by the scripts in bin/aws: option parsing helpers and the dry-run switch.
# Sourced, never run. Every remote action goes through `run`, which prints the exact
# command line (shell-quoted) with --dry-run and executes it otherwise.

set -euo pipefail

DRY_RUN=0
AWS_USER=ubuntu
SSH_KEY=""
ADDRESS=""
INSTANCE_ID=""
REGION=""

die() { # message: print to stderr with the usage, exit 2
  echo "$(basename "$0"): $1" >&2
  usage >&2
  exit 2
}

need() { # option value: fail when an option that needs a value has none
  [ -n "${2:-}" ] && [ "${2#--}" = "$2" ] || die "option $1 needs a value"
}

run() { # command...: print it (dry run) or execute it
  if [ "$DRY_RUN" = 1 ]; then
    printf '%q' "$1"; shift
    for arg in "$@"; do printf ' %q' "$arg"; done
    printf '\n'
  else
    "$@"
  fi
}

parse_common() { # option value: handle the options every script takes; sets USED (0, 1 or 2)
  USED=0
  case "$1" in
    --dry-run) DRY_RUN=1; USED=1 ;;
    -k|--ssh-key) need "$1" "${2:-}"; SSH_KEY=$2; USED=2 ;;
    -a|--address) need "$1" "${2:-}"; ADDRESS=$2; USED=2 ;;
    -i|--instance-id) need "$1" "${2:-}"; INSTANCE_ID=$2; USED=2 ;;
    -u|--user) need "$1" "${2:-}"; AWS_USER=$2; USED=2 ;;
    --region) need "$1" "${2:-}"; REGION=$2; USED=2 ;;
  esac
}

aws_cli() { # args...: the AWS CLI, with --region when one was given
  if [ -n "$REGION" ]; then run aws --region "$REGION" "$@"; else run aws "$@"; fi
}

resolve_address() { # sets ADDRESS from --instance-id when --address was not given
  if [ -n "$ADDRESS" ]; then return; fi
  [ -n "$INSTANCE_ID" ] || die "give the instance: --address HOST or --instance-id ID"
  local query=(ec2 describe-instances --instance-ids "$INSTANCE_ID"
    --query 'Reservations[0].Instances[0].PublicDnsName' --output text)
  if [ "$DRY_RUN" = 1 ]; then
    aws_cli "${query[@]}"
    ADDRESS="<public-dns-of-$INSTANCE_ID>"
  else
    ADDRESS=$(aws_cli "${query[@]}")
  fi
}

ssh_opts() { # the ssh/scp options: key (if any) and no interactive host-key prompt
  SSH_OPTS=(-o StrictHostKeyChecking=accept-new)
  if [ -n "$SSH_KEY" ]; then SSH_OPTS=(-i "$SSH_KEY" "${SSH_OPTS[@]}"); fi
}
