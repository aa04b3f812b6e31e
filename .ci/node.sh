#!/usr/bin/env bash
# Makes the project's Node.js (24 LTS) available under .cache/node and prints its bin directory.
# The npm registry's node-linux-<arch> package carries the official runtime binary, so the
# machine's own npm (any node >= 14) installs it and nothing is downloaded outside the registry.
# Idempotent: a present binary of the pinned version is kept. Never touches the system's node.
#
#   PATH="$(bash .ci/node.sh):$PATH"     # every later command (and the lab VM: vm.ts puts the
#                                        # running node's directory first on the guest's PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_VERSION=24.21.0
prefix=.cache/node
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) echo "ci/node.sh: no node-linux package for $(uname -m)" >&2; exit 1 ;;
esac
bin="$PWD/$prefix/node_modules/node-linux-$arch/bin"
if [ "$("$bin/node" --version 2>/dev/null || true)" != "v$NODE_VERSION" ]; then
  echo "ci/node.sh: installing node-linux-$arch@$NODE_VERSION into $prefix" >&2
  rm -rf "$prefix"
  # --prefix with no package.json there: npm would otherwise climb to the project's own.
  mkdir -p "$prefix" && echo '{"private":true}' > "$prefix/package.json"
  npm install --prefix "$prefix" --no-audit --no-fund --no-save --no-package-lock \
    "node-linux-$arch@$NODE_VERSION" >&2
  [ "$("$bin/node" --version)" = "v$NODE_VERSION" ]
fi
echo "$bin"
