# syntax=docker/dockerfile:1
# ipvs-operator's image. Two stages: the build stage compiles the TypeScript and keeps only the
# production dependencies; the runtime stage holds node, the compiled operator (src/ and plugins/:
# the lab, compare and demo code lives in lab/, which is not copied in; the import-graph test
# keeps the operator's commands off it), production node_modules, crds/ (the operator validates
# its configuration with the CRD's own schema, read at run time) and the host tools the operator
# and a person debugging a node use: iptables (both the nft and legacy backends; the operator
# picks the node's), ipset, ipvsadm, kmod (modprobe, when the pod may load modules) and iproute2.
# No shell tricks at run time: the entry point is the CLI.
#
#   docker build -t ipvs-operator:dev .                     # Node.js images from a registry
#   npm run image -- build                                  # the same with docker or podman
#   npm run image -- build --local-base                     # no registry: a Debian base made here
#
# BUILD_IMAGE and RUNTIME_IMAGE may be any Debian-based images. The operator runs on Node.js 24
# LTS (NODE_VERSION): where the build image's node is another version (a minimal Debian base made
# with debootstrap has none; the build stage then installs Debian's nodejs and npm only to run
# npm), the build stage installs the runtime from the npm registry's node-linux-<arch> package,
# and the runtime stage always takes its node binary from the build stage (needs only libc and
# libstdc++, which any Debian base has). The netlink addon is an N-API prebuild: no compiler is
# needed in either stage.
ARG BUILD_IMAGE=node:24-bookworm
ARG RUNTIME_IMAGE=node:24-bookworm-slim

FROM ${BUILD_IMAGE} AS build
# Behind a TLS-intercepting proxy the build must trust the host's CA bundle: the build script
# mounts it and passes its path here. Build stage only: never in the shipped stage.
ARG NODE_EXTRA_CA_CERTS
WORKDIR /src
ARG NODE_VERSION=24.21.0
RUN command -v npm >/dev/null 2>&1 || { apt-get update && apt-get install -y --no-install-recommends nodejs npm ca-certificates && rm -rf /var/lib/apt/lists/*; }
# /opt/node/bin/node: the node the image ships, of NODE_VERSION, first on the PATH from here on.
RUN mkdir -p /opt/node/bin \
 && if [ "$(node --version)" = "v${NODE_VERSION}" ]; then cp "$(readlink -f "$(command -v node)")" /opt/node/bin/node; \
    else case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) echo "no node-linux for $(uname -m)"; exit 1 ;; esac \
      && mkdir /tmp/node && echo '{"private":true}' > /tmp/node/package.json \
      && npm install --prefix /tmp/node --no-audit --no-fund --no-save --no-package-lock "node-linux-${arch}@${NODE_VERSION}" \
      && cp "/tmp/node/node_modules/node-linux-${arch}/bin/node" /opt/node/bin/node && rm -rf /tmp/node; fi \
 && /opt/node/bin/node --version | grep -qx "v${NODE_VERSION}"
ENV PATH=/opt/node/bin:$PATH
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.base.json ./
COPY src ./src
COPY plugins ./plugins
COPY crds ./crds
# The operator's project alone (src/tsconfig.json: src/ and plugins/), without the .d.ts files
# that the other projects of a checkout's build read (tsconfig.json).
RUN npx tsc -p src/tsconfig.json --composite false --declaration false \
 && npm prune --omit=dev --no-audit --no-fund \
 && find node_modules -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.md' \) -delete

FROM ${RUNTIME_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables ipset ipvsadm kmod iproute2 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /usr/share/doc/* /usr/share/man/* /usr/share/locale/*
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/dist/plugins ./dist/plugins
COPY --from=build /src/crds ./crds
# The build stage's Node.js 24, ahead of any node the runtime base has (node:24-*-slim: the same).
COPY --from=build /opt/node/bin/node /usr/local/bin/node
# `ipvs-operator <command>` on the PATH, for the DaemonSet and for `kubectl exec ... ipvs-operator status`.
# A wrapper, not a symlink: main.js runs main() only when process.argv[1] is main.js itself, and
# through a symlink argv[1] is the link's path. The --help run checks the image at build time.
# --optimize-for-size: V8 grows the heap less eagerly and gives memory back sooner (at 10 000
# Services x 10 endpoints, 227 MB RSS after the first sync instead of 276 MB; README
# "Performance"). A command-line flag: Node refuses it in NODE_OPTIONS (exit 9).
RUN printf '#!/bin/sh\nexec node --optimize-for-size /app/dist/src/cli/main.js "$@"\n' > /usr/local/bin/ipvs-operator \
 && chmod 0755 /usr/local/bin/ipvs-operator \
 && ipvs-operator --help | grep -q '^usage: ipvs-operator'
ENTRYPOINT ["ipvs-operator"]
CMD ["run"]
