// The lab API server's HTTP side: one request from the socket to its answer. Reads the body
// (JSON or YAML, protobuf refused), authenticates the bearer token and authorizes with RBAC,
// routes (health, /version, discovery, OpenAPI, resources and their status subresource), answers
// injected faults, then lists (selectors, pages, Tables), watches, creates, updates, patches and
// deletes through the server's core. Errors are answered as Status objects (status.ts).
import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import { PROJECT_CRDS, readCrd } from '../../src/config/load.js';
import type { Fault, LabApiServerOptions, Obj, RecordedRequest } from './api-types.js';
import { objectKey } from './objects.js';
import { type Definitions, type FieldValidation, OpenApiDocuments, buildDefinitions, definitionOf, unknownFields } from './openapi.js';
import { type LogQuery, parseLogQuery, podLogPath, selectLog } from './podlog.js';
import { type RbacPolicy, type RequestAttributes, type UserInfo, authorize, forbiddenMessage, userGroups } from './rbac.js';
import { HttpError, STATUS_REASONS, conflict, send, sendStatus, sendText } from './status.js';
import {
  RESOURCES, type Requirement, type ResourceInfo, type ResourceName, apiVersionOf, discovery, jsonPatch, mergePatch,
  parseFieldSelector, parseLabelSelector, parseResourcePath, resourceAt, strategicMergePatch,
} from './store.js';
import { tableOf, wantsTable } from './tables.js';
import { scaleOf } from './workloads.js';
import { type Filter, type WatchHub, matches } from './watch.js';

const MAX_BODY = 4 << 20;

/** What a request is served from: the server's store, watches, admission and test controls. */
export interface ApiCore {
  readonly opts: LabApiServerOptions;
  readonly requests: RecordedRequest[];
  readonly faults: Faults;
  readonly watches: WatchHub;
  readonly resourceVersion: number;
  get(resource: ResourceName, name: string, namespace?: string): Obj | undefined;
  list(resource: ResourceName): Obj[];
  /** A write as stored (watches and controllers follow). */
  put(resource: ResourceName, object: object): Obj;
  /** Defaulting and validation of a create or update (the identity without the lab). */
  admit(resource: ResourceName, o: Obj, old: Obj | undefined): Obj;
  /** A DELETE, `asked` its grace period: returns the object to answer with. */
  delete(resource: ResourceName, current: Obj, asked: string | number | null | undefined): Obj;
  policy(): RbacPolicy;
  /** Run before each request (Event expiry). */
  beforeRequest(): void;
}

/** Injected faults, each answering its matching requests until its count runs out. */
export class Faults {
  private faults: Array<Fault & { left: number }> = [];

  add(fault: Fault): void {
    this.faults.push({ ...fault, left: fault.times ?? Infinity });
  }

  clear(): void {
    this.faults = [];
  }

  /** The fault answering this request, its count taken; undefined: none. */
  take(resource: ResourceName, verb: 'list' | 'watch' | 'other'): Fault | undefined {
    const f = this.faults.find((x) => x.left > 0 && (x.resource ?? resource) === resource && (x.verb ?? verb) === verb);
    if (f) f.left--;
    return f;
  }
}

/** Serves one request; errors inside become Status answers, anything else a 500. */
export async function handleRequest(core: ApiCore, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://x');
  const method = req.method ?? 'GET';
  let body: unknown;
  try {
    body = await readBody(req, req.headers['content-type'] ?? '');
  } catch (e) {
    const err = e instanceof HttpError ? e : new HttpError(400, 'BadRequest', `the request body is invalid: ${(e as Error).message}`);
    return sendStatus(res, err.code, err.reason, err.message);
  }
  const rec: RecordedRequest = { method, path: url.pathname, query: url.search, ...(body !== undefined ? { body } : {}) };
  core.requests.push(rec);
  core.beforeRequest();
  try {
    await serve(core, req, res, url, method, body, rec);
  } catch (e) {
    if (!(e instanceof HttpError)) throw e;
    rec.status = e.code;
    sendStatus(res, e.code, e.reason, e.message);
  }
}

async function serve(core: ApiCore, req: IncomingMessage, res: ServerResponse, url: URL, method: string, body: unknown, rec: RecordedRequest): Promise<void> {
  const path = url.pathname;
  if (['/healthz', '/readyz', '/livez'].includes(path)) return sendText(res, 200, 'ok');
  if (path === '/version') {
    return send(res, 200, { major: '1', minor: '32', gitVersion: 'v1.32.0-ipvs-operator-lab', platform: `${process.platform}/${process.arch}` });
  }
  const user = authenticate(core.opts, req);
  if (user) rec.user = user.name;
  if (method === 'GET' && path.startsWith('/openapi/')) {
    const doc = openApi().document(path);
    if (doc === undefined) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${method} ${path})`);
    res.writeHead(200, { 'content-type': 'application/json' });
    return void res.end(doc);
  }
  const route = parseResourcePath(path);
  if (!route) {
    const doc = method === 'GET' ? discovery(path) : undefined;
    if (doc) return send(res, 200, doc);
    throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${method} ${path})`);
  }
  const isWatch = !route.name && method === 'GET' && ['true', '1'].includes(url.searchParams.get('watch') ?? '');
  const verb = method === 'GET' ? (route.name ? 'get' : isWatch ? 'watch' : 'list') : ({ POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: route.name ? 'delete' : 'deletecollection' } as Record<string, string>)[method];
  if (!verb) throw new HttpError(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource (${method})`);
  let fields: Requirement[];
  let labels: Requirement[];
  try {
    fields = parseFieldSelector(url.searchParams.get('fieldSelector'));
    labels = parseLabelSelector(url.searchParams.get('labelSelector'));
  } catch (e) {
    throw new HttpError(400, 'BadRequest', (e as Error).message);
  }
  const nameForAuthz = route.name ?? (['list', 'watch'].includes(verb) ? fields.find((f) => f.key === 'metadata.name' && f.op === '=')?.values[0] : undefined);
  const attrs: RequestAttributes = { verb, group: route.group, resource: route.plural, ...(route.subresource ? { subresource: route.subresource } : {}),
    ...(route.namespace ? { namespace: route.namespace } : {}), ...(nameForAuthz ? { name: nameForAuthz } : {}) };
  if (user && !authorize(core.policy(), user, attrs)) throw new HttpError(403, 'Forbidden', forbiddenMessage(user, attrs));

  const resource = resourceAt(route.group, route.version, route.plural);
  if (!resource || core.opts.notServed?.includes(resource)) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${method} ${path})`);
  const info: ResourceInfo = RESOURCES[resource];
  if (resource === 'pods' && route.subresource === 'log' && verb === 'get') return sendLog(core, res, route.namespace ?? 'default', route.name!, url.searchParams);
  // pods/exec is served on the upgrade (exec.ts); a plain request gets kube-apiserver's answer.
  if (resource === 'pods' && route.subresource === 'exec') throw new HttpError(400, 'BadRequest', 'Upgrade request required');
  if (route.subresource === 'scale' && info.scale && ['get', 'update', 'patch'].includes(verb)) {
    return sendScale(core, req, res, resource, route.namespace ?? 'default', route.name!, verb, body);
  }
  if (route.subresource && !(route.subresource === 'status' && info.status)) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${method} ${path})`);
  const namespace = info.namespaced ? route.namespace : undefined;
  const faultVerb = verb === 'watch' ? 'watch' : verb === 'list' ? 'list' : 'other';
  const fault = core.faults.take(resource, faultVerb);
  if (fault) {
    if (fault.status === 0) return;
    const reason = STATUS_REASONS[fault.status] ?? 'InternalError';
    return sendStatus(res, fault.status, reason, fault.message ?? `${reason}: injected for ${faultVerb} ${resource}`,
      fault.retryAfterSeconds !== undefined ? { 'retry-after': String(fault.retryAfterSeconds) } : {});
  }
  const filter: Filter = { resource, ...(namespace ? { namespace } : {}), fields, labels };
  if (verb === 'watch') {
    const timeout = Number(url.searchParams.get('timeoutSeconds') ?? 0);
    return core.watches.serve(res, filter, wantsTable(req.headers.accept), url.searchParams.get('resourceVersion') ?? '', timeout > 0 ? timeout : undefined);
  }
  if (verb === 'list') return sendList(core, req, res, url, filter);
  const checkFields = (o: unknown) => validateFields(res, resource, o, url.searchParams.get('fieldValidation'));
  if (verb === 'create') {
    checkFields(body);
    return send(res, 201, createFrom(core, resource, namespace, body));
  }
  if (verb === 'deletecollection') throw new HttpError(405, 'MethodNotAllowed', 'deletecollection is not supported by the lab API server');
  const name = route.name!;
  const current = core.get(resource, name, namespace);
  const isApply = verb === 'patch' && String(req.headers['content-type']).startsWith('application/apply-patch');
  if (!current && isApply && !route.subresource) {
    checkFields(body);
    return send(res, 201, createFrom(core, resource, namespace, { ...(body as object), metadata: { ...(body as Obj).metadata, name } }));
  }
  if (!current) throw new HttpError(404, 'NotFound', `${resource} "${name}" not found`);
  if (verb === 'get') return wantsTable(req.headers.accept) ? send(res, 200, tableOf(resource, [current], true)) : send(res, 200, current);
  if (verb === 'delete') {
    const asked = url.searchParams.get('gracePeriodSeconds') ?? (body as { gracePeriodSeconds?: number } | undefined)?.gracePeriodSeconds;
    return send(res, 200, core.delete(resource, current, asked));
  }
  let next: Obj;
  if (verb === 'update') {
    next = asObject(body);
    const rv = next.metadata?.resourceVersion;
    if (rv && rv !== current.metadata.resourceVersion) throw conflict(resource, name);
  } else {
    next = patched(current, body, String(req.headers['content-type'] ?? ''));
    const rv = (body as Obj | undefined)?.metadata?.resourceVersion;
    if (!Array.isArray(body) && rv && rv !== current.metadata.resourceVersion) throw conflict(resource, name);
  }
  // The status subresource changes only status; the main resource never changes status.
  // Clients never set or clear deletionTimestamp themselves (the real server ignores them too).
  const deletion = { deletionTimestamp: current.metadata.deletionTimestamp, deletionGracePeriodSeconds: current.metadata.deletionGracePeriodSeconds };
  next = route.subresource === 'status' ? { ...structuredClone(current), status: next.status }
    : { ...next, metadata: { ...next.metadata, ...dropUndefined(deletion), name, ...(namespace ? { namespace } : {}) }, status: current.status };
  if (!deletion.deletionTimestamp) delete next.metadata.deletionTimestamp;
  checkFields(next);
  if (!route.subresource) next = core.admit(resource, next, current);
  return send(res, 200, core.put(resource, next));
}

/**
 * GET pods/NAME/log (`kubectl logs`): the plain text of the container's current run, or with
 * previous=true the run before it, as the lab's kubelet wrote it (podlog.ts); tailLines and
 * limitBytes as the kubelet applies them. follow, sinceSeconds and timestamps are not served:
 * the answer is what the file holds now. kube-apiserver's messages for a missing container name,
 * a wrong one, and a run with no log.
 */
function sendLog(core: ApiCore, res: ServerResponse, namespace: string, name: string, query: URLSearchParams): void {
  const pod = core.get('pods', name, namespace);
  if (!pod) throw new HttpError(404, 'NotFound', `pods "${name}" not found`);
  let q: LogQuery;
  try {
    q = parseLogQuery(query);
  } catch (e) {
    throw new HttpError(400, 'BadRequest', (e as Error).message);
  }
  const containers = ((pod.spec as { containers?: Array<{ name?: string }> } | undefined)?.containers ?? []).map((c) => String(c.name));
  const container = q.container ?? (containers.length === 1 ? containers[0] : undefined);
  if (container === undefined) throw new HttpError(400, 'BadRequest', `a container name must be specified for pod ${name}, choose one of: [${containers.join(' ')}]`);
  if (!containers.includes(container)) throw new HttpError(400, 'BadRequest', `container ${container} is not valid for pod ${name}`);
  const status = (pod.status as { containerStatuses?: Array<{ name?: string; restartCount?: number }> } | undefined)?.containerStatuses?.find((c) => c.name === container);
  const run = (status?.restartCount ?? 0) - (q.previous ? 1 : 0);
  const dir = core.opts.podLogDir;
  const file = dir && status && run >= 0 ? podLogPath(dir, { namespace, name, uid: pod.metadata.uid ?? '' }, container, run) : undefined;
  if (!file || !existsSync(file)) {
    throw new HttpError(400, 'BadRequest', q.previous ? `previous terminated container "${container}" in pod "${name}" not found`
      : `container "${container}" in pod "${name}" is waiting to start: ContainerCreating`);
  }
  sendText(res, 200, selectLog(readFileSync(file, 'utf8'), q));
}

/**
 * The autoscaling/v1 Scale subresource of a Deployment or ReplicaSet (`kubectl scale` PATCHes it
 * with a merge patch, or GETs and PUTs it with --current-replicas): spec.replicas read from and
 * written to the object; 409 on a stale resourceVersion, 422 on a replica count that is not a
 * whole number >= 0.
 */
function sendScale(core: ApiCore, req: IncomingMessage, res: ServerResponse, resource: ResourceName, namespace: string, name: string, verb: string, body: unknown): void {
  const current = core.get(resource, name, namespace);
  if (!current) throw new HttpError(404, 'NotFound', `${resource} "${name}" not found`);
  const scale = scaleOf(current);
  if (verb === 'get') return send(res, 200, scale);
  const next = verb === 'update' ? asObject(body) : patched(scale as unknown as Obj, body, String(req.headers['content-type'] ?? ''));
  const rv = (Array.isArray(body) ? undefined : (body as Obj | undefined)?.metadata?.resourceVersion);
  if (rv && rv !== current.metadata.resourceVersion) throw conflict(resource, name);
  const replicas = (next.spec as { replicas?: unknown } | undefined)?.replicas;
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0) {
    throw new HttpError(422, 'Invalid', `Scale.autoscaling "${name}" is invalid: spec.replicas: Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`);
  }
  const updated = structuredClone(current);
  updated.spec = { ...(updated.spec as object), replicas };
  send(res, 200, scaleOf(core.put(resource, core.admit(resource, updated, current))));
}

/** Creates an object from a request body as a POST does (namespace, generateName, 409 when it exists, admission). */
export function createFrom(core: ApiCore, resource: ResourceName, namespace: string | undefined, body: unknown): Obj {
  const o = asObject(body);
  const info: ResourceInfo = RESOURCES[resource];
  if (info.namespaced) {
    if (o.metadata.namespace && namespace && o.metadata.namespace !== namespace) {
      throw new HttpError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
    }
    o.metadata.namespace = namespace ?? o.metadata.namespace ?? 'default';
  } else {
    delete o.metadata.namespace;
  }
  if (!o.metadata.name && o.metadata.generateName) o.metadata.name = `${o.metadata.generateName}${Math.random().toString(36).slice(2, 7)}`;
  if (!o.metadata.name) throw new HttpError(422, 'Invalid', `${info.kind} "" is invalid: metadata.name: Required value: name or generateName is required`);
  if (core.get(resource, o.metadata.name, o.metadata.namespace)) throw new HttpError(409, 'AlreadyExists', `${resource} "${o.metadata.name}" already exists`);
  delete o.metadata.resourceVersion;
  return core.put(resource, core.admit(resource, o, undefined));
}

/** The user of a request's bearer token (undefined without `auth`); throws a 401 HttpError for a missing or unknown token. */
export function authenticate(opts: LabApiServerOptions, req: IncomingMessage): UserInfo | undefined {
  if (!opts.auth) return undefined;
  const m = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  const user = m ? opts.auth.tokens.get(m[1]!) : undefined;
  if (!user) throw new HttpError(401, 'Unauthorized', 'Unauthorized');
  return userGroups(user);
}

function sendList(core: ApiCore, req: IncomingMessage, res: ServerResponse, url: URL, filter: Filter): void {
  const { resource } = filter;
  const items = core.list(resource).filter((o) => matches(filter, resource, o))
    .sort((a, b) => objectKey(a.metadata.namespace, a.metadata.name).localeCompare(objectKey(b.metadata.namespace, b.metadata.name)));
  const limit = Number(url.searchParams.get('limit') ?? 0);
  const token = url.searchParams.get('continue');
  let from = { offset: 0, rv: core.resourceVersion };
  if (token) {
    try {
      from = JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as { offset: number; rv: number };
    } catch {
      throw new HttpError(400, 'BadRequest', 'continue key is not valid');
    }
  }
  const page = limit > 0 ? items.slice(from.offset, from.offset + limit) : items.slice(from.offset);
  const more = limit > 0 && from.offset + limit < items.length;
  const next = more ? Buffer.from(JSON.stringify({ offset: from.offset + limit, rv: from.rv })).toString('base64') : undefined;
  const meta = { resourceVersion: String(from.rv), ...(next ? { continue: next } : {}) };
  if (wantsTable(req.headers.accept)) return send(res, 200, { ...tableOf(resource, page, url.searchParams.get('includeObject') !== 'None'), metadata: meta });
  const info: ResourceInfo = RESOURCES[resource];
  send(res, 200, { apiVersion: apiVersionOf(info), kind: `${info.kind}List`, metadata: meta, items: page });
}

function patched(current: Obj, body: unknown, contentType: string): Obj {
  const base = structuredClone(current);
  try {
    if (contentType.startsWith('application/json-patch+json')) {
      if (!Array.isArray(body)) throw new HttpError(400, 'BadRequest', 'a JSON patch must be a list of operations');
      return asObject(jsonPatch(base, body));
    }
    if (contentType.startsWith('application/strategic-merge-patch+json')) return asObject(strategicMergePatch(base, body));
    if (contentType.startsWith('application/merge-patch+json') || contentType.startsWith('application/apply-patch')) return asObject(mergePatch(base, body));
  } catch (e) {
    if (e instanceof HttpError) throw e;
    throw new HttpError(422, 'Invalid', `the patch could not be applied: ${(e as Error).message}`);
  }
  throw new HttpError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json`);
}

let openApiDocs: OpenApiDocuments | undefined;

/** The OpenAPI documents (built on first use, the same for every server: the built-ins and crds/). */
function openApi(): OpenApiDocuments {
  openApiDocs ??= new OpenApiDocuments(buildDefinitions(PROJECT_CRDS.map((c) => readCrd(c))));
  return openApiDocs;
}

/**
 * Field validation of a written object as kube-apiserver does it for `directive` (openapi.ts):
 * Strict throws a 400 naming the unknown fields, Warn drops them with a Warning header each,
 * Ignore drops them; no directive: nothing.
 */
function validateFields(res: ServerResponse, resource: ResourceName, obj: unknown, directive: string | null): void {
  if (directive === null || directive === '') return;
  if (!['Strict', 'Warn', 'Ignore'].includes(directive)) throw new HttpError(400, 'BadRequest', `fieldValidation must be one of Ignore, Warn, Strict, got "${directive}"`);
  const info: ResourceInfo = RESOURCES[resource];
  const defs: Definitions = openApi().defs;
  const def = definitionOf(defs, info.group, info.version, info.kind);
  if (!def) return;
  const mode = directive as FieldValidation;
  const unknown = unknownFields(defs, def, obj, mode !== 'Strict');
  if (!unknown.length || mode === 'Ignore') return;
  const named = unknown.map((f) => `unknown field "${f}"`);
  if (mode === 'Strict') {
    throw new HttpError(400, 'BadRequest', `${info.kind} in version "${info.version}" cannot be handled as a ${info.kind}: strict decoding error: ${named.join(', ')}`);
  }
  res.setHeader('Warning', named.map((w) => `299 - ${JSON.stringify(w)}`));
}

async function readBody(req: IncomingMessage, contentType: string): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY) throw new HttpError(413, 'RequestEntityTooLarge', 'the request body is too large');
    chunks.push(c as Buffer);
  }
  if (!chunks.length) return undefined;
  if (contentType.includes('protobuf')) {
    // kubectl's typed generators (`kubectl create service ...`) send protobuf; only JSON and YAML are decoded here.
    throw new HttpError(415, 'UnsupportedMediaType', 'the lab API server decodes JSON and YAML bodies only, not protobuf (use kubectl create/apply -f)');
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text.trim()) return undefined;
  // Server-side apply bodies are YAML (JSON is YAML too); everything else is JSON.
  return contentType.startsWith('application/apply-patch+yaml') || contentType.startsWith('application/yaml') ? parseYaml(text) : JSON.parse(text);
}

/** The body as an object with metadata, or a 400. */
function asObject(body: unknown): Obj {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'BadRequest', 'the request body must be a JSON object');
  const o = body as Obj;
  if (o.metadata !== undefined && (typeof o.metadata !== 'object' || o.metadata === null || Array.isArray(o.metadata))) {
    throw new HttpError(400, 'BadRequest', 'metadata must be an object');
  }
  o.metadata ??= { name: '' };
  if (o.metadata.name !== undefined && typeof o.metadata.name !== 'string') throw new HttpError(400, 'BadRequest', 'metadata.name must be a string');
  return o;
}

function dropUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
