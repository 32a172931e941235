#!/bin/sh
# The demo (`make demo`, after the dependencies are installed): build, then run it.
# For now: a producer process and a consumer process exchange counter readings through a
# lock-free shared-memory ring; the consumer prints what arrived and what was lost.
set -e
cd "$(dirname "$0")/.."
make -j"$(nproc)"
exec "${BUILD:-build}/examples/ring_demo"
