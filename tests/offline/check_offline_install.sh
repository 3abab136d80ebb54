#!/usr/bin/env bash
# The offline install, proven (issue 17): build the wheelhouse (needs network), then create a fresh venv and
# install the course from the wheelhouse alone with every network route closed (--no-index, a dead index URL
# and dead proxies: any download attempt fails), and run notebook 00 under nbval with that venv.
# Usage: tests/offline/check_offline_install.sh   (PYTHON=python3.X to choose the interpreter; WHEELHOUSE=DIR
# to build the wheelhouse in DIR instead of ./wheelhouse, e.g. an empty /tmp folder for a cold measurement)
# Not part of `make test`: it downloads ~150 MB the first time and takes minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
WHEELHOUSE=${WHEELHOUSE:-wheelhouse}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
seconds() { date +%s.%N; }

t0=$(seconds)
make --no-print-directory wheelhouse PYTHON="$PYTHON" WHEELHOUSE="$WHEELHOUSE"
t1=$(seconds)
echo "wheelhouse: $(ls "$WHEELHOUSE" | wc -l) files, $(du -sh "$WHEELHOUSE" | cut -f1)"
if ls "$WHEELHOUSE" | grep -v '\.whl$'; then
  echo "the wheelhouse holds source archives (above): an offline install would have to build them" >&2
  exit 1
fi

# No network from here on: pip may only read the wheelhouse (no pip.conf, no find-links or index from the
# environment; a dead index and dead proxies, so any attempt to download fails loudly).
env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null \
    PIP_INDEX_URL=http://127.0.0.1:9/simple \
    http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 \
    HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
    make --no-print-directory install OFFLINE=1 VENV="$WORK/venv" PYTHON="$PYTHON" WHEELHOUSE="$WHEELHOUSE"
t2=$(seconds)

"$WORK/venv/bin/python" -m pytest notebooks/00_setup_and_first_request.ipynb -p no:cacheprovider -q
t3=$(seconds)
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN {
  printf "offline check passed: wheelhouse %.0f s, offline install %.0f s, notebook 00 %.0f s, total %.0f s\n",
         b - a, c - b, d - c, d - a }'
