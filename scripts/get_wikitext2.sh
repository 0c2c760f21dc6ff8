#!/usr/bin/env bash
# Puts WikiText-2 (word level, "wikitext-2-v1") into DIR as train.txt, valid.txt and test.txt,
# and checks their sha256 sums (those of ../shared/data/wikitext-2/SHA256SUMS).
#
#   scripts/get_wikitext2.sh DIR [SOURCE]
#
# SOURCE, or $KILN_DATA when no SOURCE is given, is a local folder holding either train.txt,
# valid.txt and test.txt, or the original release's wiki.train.tokens, wiki.valid.tokens and
# wiki.test.tokens (renamed on the way). Without a local copy it downloads the official archive,
# then falls back to pytorch/examples' copy. DIR is left untouched unless all three files check
# out; files already in DIR with the right sums are kept. Exits non-zero, saying why, on failure.
# The data is CC BY-SA (Merity et al., 2016); never commit it.
set -euo pipefail

declare -A SHA256=(
  [train]=9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f
  [valid]=f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8
  [test]=d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0
)
SPLITS=(train valid test)
ARCHIVES=(https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip
          https://wikitext.smerity.com/wikitext-2-v1.zip)
RAW=https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/data/wikitext-2

say() { echo "get_wikitext2: $*" >&2; }
die() {
  say "$*"
  exit 1
}

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ -z "$1" ]; then
  echo "usage: $0 DIR [SOURCE]   (SOURCE defaults to \$KILN_DATA; else downloads)" >&2
  exit 2
fi
dest=$1
explicit_source=${2:-}
source=${explicit_source:-${KILN_DATA:-}}

# Whether folder $1 holds the three files with the right sums. On failure, bad names the first
# bad file, as coming from $2.
check_sums() {
  local split file actual
  for split in "${SPLITS[@]}"; do
    file=$1/$split.txt
    if [ ! -f "$file" ]; then
      bad="$split.txt from $2 is missing"
      return 1
    fi
    actual=$(sha256sum "$file" | cut -d' ' -f1)
    if [ "$actual" != "${SHA256[$split]}" ]; then
      bad="$split.txt from $2 has sha256 $actual, expected ${SHA256[$split]} (not WikiText-2 v1, or damaged)"
      return 1
    fi
  done
}

bad=""
origin=""
if check_sums "$dest" "$dest"; then
  echo "get_wikitext2: $dest already holds WikiText-2 (sha256 sums match)"
  exit 0
fi

created=""
[ -d "$dest" ] || created=1
mkdir -p "$dest" || die "cannot create $dest"
stage=$(mktemp -d "$dest/.get_wikitext2.XXXXXX") || die "cannot write into $dest"
# Leave no trace: the staging folder goes, and on failure so does DIR if this run made it.
cleanup() {
  local status=$?
  rm -rf "$stage"
  if [ "$status" -ne 0 ] && [ -n "$created" ]; then rmdir "$dest" 2>/dev/null || true; fi
  exit "$status"
}
trap cleanup EXIT

# Copies the three splits from folder $1 into the staging folder, under either naming.
copy_from() {
  local split
  for split in "${SPLITS[@]}"; do
    if [ -f "$1/$split.txt" ]; then
      cp "$1/$split.txt" "$stage/$split.txt" || { bad="cannot copy $1/$split.txt"; return 1; }
    elif [ -f "$1/wiki.$split.tokens" ]; then
      cp "$1/wiki.$split.tokens" "$stage/$split.txt" ||
        { bad="cannot copy $1/wiki.$split.tokens"; return 1; }
    else
      bad="$1 has neither $split.txt nor wiki.$split.tokens"
      return 1
    fi
  done
}

# Downloads URL $1 to file $2 with curl or wget.
fetch() {
  if command -v curl >/dev/null; then
    curl -fsSL --retry 2 --connect-timeout 20 -o "$2" "$1"
  elif command -v wget >/dev/null; then
    wget -q --tries=3 --timeout=20 -O "$2" "$1"
  else
    say "neither curl nor wget is installed"
    return 1
  fi
}

# Unpacks the official archive $1 (wikitext-2/wiki.{train,valid,test}.tokens) into the stage.
unpack() {
  mkdir -p "$stage/zip"
  if command -v unzip >/dev/null; then
    unzip -q -o "$1" -d "$stage/zip"
  else
    python3 -m zipfile -e "$1" "$stage/zip"
  fi && copy_from "$stage/zip/wikitext-2"
}

download() {
  local url split
  for url in "${ARCHIVES[@]}"; do
    say "downloading $url"
    if fetch "$url" "$stage/wikitext-2-v1.zip" && unpack "$stage/wikitext-2-v1.zip"; then
      origin=$url
      return 0
    fi
    say "could not get WikiText-2 from $url"
  done
  say "trying pytorch/examples: $RAW"
  for split in "${SPLITS[@]}"; do
    fetch "$RAW/$split.txt" "$stage/$split.txt" || return 1
  done
  origin=$RAW
}

if [ -n "$source" ] && [ -d "$source" ] && ! [ "$source" -ef "$dest" ]; then
  say "copying from $source"
  origin=$source
  if ! copy_from "$source"; then
    [ -n "$explicit_source" ] && die "$bad"
    say "$bad (from \$KILN_DATA); downloading instead"
    download || die "download failed; with no network, give a local copy: $0 $dest SOURCE"
  fi
elif [ -n "$explicit_source" ]; then
  die "SOURCE $explicit_source is not a folder, or is DIR itself"
else
  download || die "download failed; with no network, give a local copy: $0 $dest SOURCE"
fi

check_sums "$stage" "$origin" || die "$bad; $dest left unchanged"
for split in "${SPLITS[@]}"; do
  mv -f "$stage/$split.txt" "$dest/$split.txt"
done
echo "get_wikitext2: WikiText-2 is in $dest (train.txt, valid.txt, test.txt; sha256 sums match)"
