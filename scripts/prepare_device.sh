#!/usr/bin/env bash
# Prepares a GPU run, on this machine: the GPU machine has neither a network nor the Debian -dev
# packages kiln builds against, and a data set outside the working tree does not travel there.
# Downloads those packages (apt-get download, no install) and unpacks them into .device/ (ignored
# by git), and copies WikiText-2 ($KILN_DATA, else datasets/wikitext-2, else
# ../shared/data/wikitext-2) and the PyTorch reference trainer (bench/torch_ref.py) beside them.
# Carry .device to the GPU machine and run scripts/gpu_check.sh there, in two calls of at most
# ten minutes each:
#   run(command="scripts/gpu_check.sh tests", carry=[".device"], timeout_s=600)
#   run(command="scripts/gpu_check.sh bench", carry=[".device"], timeout_s=600)
# The working tree and .device travel together and must stay under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."

device=.device
data=${KILN_DATA:-}
if [ -z "$data" ]; then
  for candidate in datasets/wikitext-2 ../shared/data/wikitext-2; do
    [ -f "$candidate/train.txt" ] && { data=$candidate; break; }
  done
fi
packages=(libeigen3-dev libfmt-dev libfmt9 catch2 nlohmann-json3-dev libcli11-dev)

[ -n "$data" ] && [ -f "$data/train.txt" ] || {
  echo "prepare_device: no WikiText-2 (scripts/get_wikitext2.sh datasets/wikitext-2, or set KILN_DATA)" >&2
  exit 1
}

rm -rf "$device"
mkdir -p "$device/debs"
echo "prepare_device: downloading ${packages[*]}"
# As root, apt would warn that its sandbox user cannot write here; the download is the same.
sandbox=()
[ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)
if ! (cd "$device/debs" && apt-get download -qq "${sandbox[@]}" "${packages[@]}"); then
  echo "prepare_device: refreshing the package lists and trying again"
  apt-get update -qq
  (cd "$device/debs" && apt-get download -qq "${sandbox[@]}" "${packages[@]}")
fi
for deb in "$device"/debs/*.deb; do dpkg -x "$deb" "$device"; done
# Only headers, libraries and CMake files travel: the .deb files and documentation stay here.
rm -rf "$device/debs" "$device/usr/share/doc" "$device/usr/share/man"
# Symbolic links may not survive the trip (libfmt.so.9 -> libfmt.so.9.1.0): copy their targets.
find "$device" -type l | while read -r link; do
  target=$(readlink -f "$link")
  rm "$link"
  cp "$target" "$link"
done

mkdir -p "$device/wikitext-2"
cp "$data"/{train,valid,test}.txt "$device/wikitext-2/"
cp bench/torch_ref.py "$device/torch_ref.py"
echo "prepare_device: $(du -sh "$device" | cut -f1) in $device (with the working tree: at most 64 MiB):"
ls "$device" "$device/usr/lib/x86_64-linux-gnu" 2>/dev/null | sed 's/^/  /'
