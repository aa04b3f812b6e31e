// node:http and node:https, loaded with require(). An ES module `import` of node:http makes Node
// build its ESM facade, which reads every export, and the lazy ones (WebSocket, EventSource) load
// undici: 90-200 ms on the host at every start, seconds under qemu TCG, for a client the operator
// never uses (its API client is on http.request: src/kube/transport.ts). Types: `import type`.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export const http = require('node:http') as typeof import('node:http');
export const https = require('node:https') as typeof import('node:https');
