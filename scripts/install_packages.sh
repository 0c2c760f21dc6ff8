#!/usr/bin/env bash
# Sourced by setup.sh and fuzz.sh: install_packages NAME PACKAGE... installs the Debian packages
# that are missing (apt-get update, then apt-get install; sudo when not root), doing nothing when
# all are present; KILN_OFFLINE=1 only says what is missing. NAME prefixes the messages.
install_packages() {
  local name=$1
  shift
  local missing=() package
  for package in "$@"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "${KILN_OFFLINE:-0}" = 1 ]; then
    echo "$name: KILN_OFFLINE=1, not installing ${missing[*]}" >&2
    return 0
  fi
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "$name: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
