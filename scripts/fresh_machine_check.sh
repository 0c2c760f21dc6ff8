#!/usr/bin/env bash
# The fresh-machine check: builds a clean Debian 12 root with debootstrap, puts a clone of this
# checkout's HEAD and the WikiText-2 data in it, and runs the README's two commands inside with
# chroot, as a new user on a new machine would: scripts/test.sh (which installs what it needs),
# then scripts/train.sh for a few steps. Prints what the build found (CMake's "kiln:" lines),
# the programs' environment line, the test summary and each phase's wall time. A green run on a
# machine where someone once installed a package by hand can hide a missing install step; this
# cannot.
#
#   scripts/fresh_machine_check.sh [--root DIR] [--keep] [--steps N]
#
# Needs root (debootstrap, chroot, mounts) and Debian's package mirror. DIR defaults to
# /var/tmp/kiln-fresh-root and is removed at the end unless --keep. Data: $KILN_DATA, else
# ../shared/data/wikitext-2, else datasets/wikitext-2.
set -euo pipefail
cd "$(dirname "$0")/.."
root=/var/tmp/kiln-fresh-root
keep=0
steps=20
while [ $# -gt 0 ]; do
  case $1 in
    --root) root=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "fresh_machine_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "fresh_machine_check: run as root (debootstrap, chroot)" >&2; exit 1; }
data=${KILN_DATA:-}
[ -n "$data" ] || for candidate in ../shared/data/wikitext-2 datasets/wikitext-2; do
  [ -f "$candidate/train.txt" ] && { data=$candidate; break; }
done
[ -n "$data" ] && [ -f "$data/train.txt" ] ||
  { echo "fresh_machine_check: no WikiText-2 (set KILN_DATA)" >&2; exit 1; }
source scripts/install_packages.sh
install_packages fresh_machine_check debootstrap

start=$SECONDS
phase_start=$SECONDS
phase() { echo "fresh_machine_check: $1: $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }

unmount() {
  for mount in dev/pts dev proc sys; do
    mountpoint -q "$root/$mount" && umount -l "$root/$mount"
  done
  return 0
}
cleanup() {
  unmount
  [ "$keep" = 1 ] || rm -rf "$root"
}
trap cleanup EXIT

unmount
rm -rf "$root"
mkdir -p "$root"
echo "fresh_machine_check: debootstrap bookworm into $root"
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$root.debootstrap.log" 2>&1 ||
  { tail -20 "$root.debootstrap.log" >&2; exit 1; }
rm -f "$root.debootstrap.log"
phase "clean Debian 12 root"

# What a new machine has and a chroot lacks: name resolution, /proc, /sys, /dev.
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
# The checkout as a clean clone would have it (committed files only, as CI sees them), and git,
# which the build uses to name its commit.
mkdir -p "$root/kiln" "$root/data"
git archive --format=tar HEAD | tar -x -C "$root/kiln"
cp -r "$data" "$root/data/wikitext-2"
phase "checkout and data copied"

inside() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  LANG=C.UTF-8 KILN_DATA=/data/wikitext-2 /bin/bash -c "cd /kiln && $1"; }
# run_inside NAME COMMAND: COMMAND in the root, its output in $root/NAME.log; fails with its tail.
run_inside() {
  echo "fresh_machine_check: $2 (log: $root/$1.log)"
  if ! inside "$2" >"$root/$1.log" 2>&1; then
    echo "fresh_machine_check: $2 failed:" >&2
    tail -40 "$root/$1.log" >&2
    exit 1
  fi
}
run_inside test "scripts/test.sh"
grep -E '^-- kiln:|tests passed|tests failed' "$root/test.log" | sed 's/^/  /'
phase "scripts/test.sh"
run_inside train "scripts/train.sh --steps $steps --time-budget 0 --eval-every $steps"
grep -E '^kiln |valid ppl|test ppl|^RESULT' "$root/train.log" | sed 's/^/  /'
phase "scripts/train.sh ($steps steps)"
if grep -q '| gemm eigen' "$root/train.log"; then
  echo "fresh_machine_check: train_lm runs Eigen's GEMM on a fresh machine" >&2
  exit 1
fi
echo "fresh_machine_check: passed in $((SECONDS - start)) s"
