# syntax=docker/dockerfile:1
# ipvs-operator's image: built on Debian bookworm (the Node.js images' base), so the native
# netlink addon compiled in the build stage runs against the same glibc and Node ABI at runtime.
#   docker build -t ipvs-operator:dev .
# The runtime stage holds node, the compiled JavaScript, production node_modules, crds/ (the
# operator validates its configuration with the CRD's own schema, read at run time) and the host
# tools the operator and a person debugging a node use: iptables (both the nft and legacy
# backends; the operator picks the node's), ipset, ipvsadm, kmod (modprobe, when the pod may load
# modules) and iproute2. No shell tricks at run time: the entry point is the CLI itself.
ARG NODE_VERSION=20

FROM node:${NODE_VERSION}-bookworm AS build
WORKDIR /src
# The full image has python3, make and g++ for node-gyp (the netlink package builds an addon).
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY plugins ./plugins
COPY crds ./crds
# Only the operator ships: the lab VM, lab compare and the demo stay in the source checkout
# (test/unit/import-graph.test.ts checks that no operator command reaches them), and so do the
# dev dependencies (resvg renders compare's charts).
RUN npx tsc -p tsconfig.json \
 && rm -rf dist/src/lab dist/src/compare dist/src/demo \
 && npm prune --omit=dev --no-audit --no-fund

FROM node:${NODE_VERSION}-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables ipset ipvsadm kmod iproute2 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/dist/plugins ./dist/plugins
COPY --from=build /src/crds ./crds
# `ipvs-operator <command>` on the PATH, for the DaemonSet and for `kubectl exec ... ipvs-operator status`.
# A wrapper, not a symlink: main.js runs main() only when process.argv[1] is main.js itself, and
# through a symlink argv[1] is the link's path. The --help run checks the image at build time.
RUN printf '#!/bin/sh\nexec node /app/dist/src/cli/main.js "$@"\n' > /usr/local/bin/ipvs-operator \
 && chmod 0755 /usr/local/bin/ipvs-operator \
 && ipvs-operator --help | grep -q '^usage: ipvs-operator'
ENTRYPOINT ["ipvs-operator"]
CMD ["run"]
