// The lab API server's persistent store: Debian's etcd 3.4 (`etcd-server`, a host package,
// lab/host.ts), spoken to through its JSON gRPC gateway over HTTP (/v3/kv/range, put,
// deleterange, compaction, /v3/watch; keys and values base64), so no gRPC library is needed.
//
// The API server keeps its objects in memory (objects.ts) and writes every change through to
// etcd, one etcd write per change and in order, so that etcd's revision after a change is the
// resourceVersion the change was given: resourceVersion = etcd mod_revision, as kube-apiserver has
// it. At start it loads the objects (range), etcd's compacted revision and the history since it
// (a watch from the first kept revision with prev_kv, read up to the current revision) - what
// a watch from an old resourceVersion replays after a restart, and what gets 410 Gone.
//
// Layout: key `/registry/<resource>/<namespace>/<name>` (cluster-scoped: `/registry/<resource>/<name>`),
// value `{"written": <ms>, "object": {...}}` - the write time is what Event expiry (--event-ttl)
// is counted from after a restart (kube-apiserver puts Events on an etcd lease instead; a lease
// deleting keys by itself would make revisions the server did not count).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { Agent, request } from 'node:http';
import type { Change, Obj } from './api-types.js';
import { RESOURCES, type ResourceName } from './store.js';
import { stopChild } from '../proc.js';

const PREFIX = '/registry/';

/** One stored object as loaded: its resource, the object (resourceVersion = its mod_revision), when it was last written. */
export interface StoredObject { resource: ResourceName; object: Obj; written: number }

/** What the store holds at start. */
export interface StoredState {
  /** etcd's current revision: the resourceVersion the next change follows. */
  revision: number;
  /** The compacted revision (0: never compacted): watches from before it get 410 Gone. */
  compacted: number;
  objects: StoredObject[];
  /** The changes after `compacted`, oldest first. */
  history: Change[];
}

/** Where a store writes its changes, in order; a change's rv must be the revision its write makes. */
export interface StoreSink {
  write(c: Change, written: number): void;
  compact(rv: number): void;
}

/** The etcd key of an object. pure. */
export function etcdKey(resource: ResourceName, namespace: string | undefined, name: string): string {
  return `${PREFIX}${resource}/${namespace ? `${namespace}/` : ''}${name}`;
}

/** The resource of an etcd key, or undefined for a key that is not an object of a served resource. pure. */
export function resourceOfKey(key: string): ResourceName | undefined {
  if (!key.startsWith(PREFIX)) return undefined;
  const r = key.slice(PREFIX.length).split('/')[0]!;
  return r in RESOURCES ? r as ResourceName : undefined;
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string | undefined) => Buffer.from(s ?? '', 'base64').toString('utf8');
/** The key just after every key with `prefix` (etcd's range_end for a prefix). */
const prefixEnd = (prefix: string) => b64(prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1));

interface Kv { key?: string; value?: string; mod_revision?: string; create_revision?: string; version?: string }
interface Header { revision?: string }
interface WatchMessage { result?: { header?: Header; created?: boolean; canceled?: boolean; compact_revision?: string; cancel_reason?: string; events?: Array<{ type?: 'PUT' | 'DELETE'; kv?: Kv; prev_kv?: Kv }> }; error?: { message?: string } }

/** The object of a stored value, its resourceVersion set to `revision`; undefined when the value is not ours. pure. */
export function decodeValue(value: string | undefined, revision: number): { object: Obj; written: number } | undefined {
  try {
    const v = JSON.parse(unb64(value)) as { written?: number; object?: Obj };
    if (!v.object?.metadata) return undefined;
    v.object.metadata.resourceVersion = String(revision);
    return { object: v.object, written: v.written ?? 0 };
  } catch {
    return undefined;
  }
}

/** An etcd watch event as the API server's change (PUT: ADDED at version 1, else MODIFIED; DELETE: the previous object). pure. */
export function changeOfEvent(e: { type?: 'PUT' | 'DELETE'; kv?: Kv; prev_kv?: Kv }): Change | undefined {
  const resource = resourceOfKey(unb64(e.kv?.key));
  const rv = Number(e.kv?.mod_revision);
  if (!resource || !rv) return undefined;
  if (e.type === 'DELETE') {
    const prev = decodeValue(e.prev_kv?.value, rv);
    return prev ? { rv, resource, type: 'DELETED', object: prev.object } : undefined;
  }
  const cur = decodeValue(e.kv?.value, rv);
  return cur ? { rv, resource, type: e.kv?.version === '1' ? 'ADDED' : 'MODIFIED', object: cur.object } : undefined;
}

/**
 * The API server's store in etcd at `url` (see the file comment). Writes are queued and sent one
 * after the other; a failed write, or a revision other than the change's resourceVersion (another
 * writer), is reported to `onError` and the queue goes on.
 */
export class EtcdStore implements StoreSink {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1 });
  private tail: Promise<void> = Promise.resolve();
  private pending = 0;

  constructor(readonly url: string, private readonly onError: (message: string) => void = (m) => process.stderr.write(`etcd: ${m}\n`)) {}

  /** Reads what is stored: objects, revision, compacted revision and the history since it. */
  async load(): Promise<StoredState> {
    const range = await this.call<{ header?: Header; kvs?: Kv[] }>('/v3/kv/range', { key: b64(PREFIX), range_end: prefixEnd(PREFIX) });
    const revision = Number(range.header?.revision ?? 0);
    const objects: StoredObject[] = [];
    for (const kv of range.kvs ?? []) {
      const resource = resourceOfKey(unb64(kv.key));
      const v = resource && decodeValue(kv.value, Number(kv.mod_revision));
      if (resource && v) objects.push({ resource, ...v });
    }
    let compacted = 0;
    let history: Change[] = [];
    // Revision 1 is etcd's empty start; every later one is a change of ours (only this server
    // writes under the prefix), so the watch below reaches `revision`.
    for (let start = 2; start <= revision;) {
      const w = await this.history(start, revision);
      if (w.compacted === undefined) {
        history = w.changes;
        break;
      }
      compacted = w.compacted;
      start = compacted + 1;
    }
    return { revision, compacted, objects, history };
  }

  /** Queues the write of a change: a put, or a delete of its key. */
  write(c: Change, written: number): void {
    const key = b64(etcdKey(c.resource, c.object.metadata.namespace, c.object.metadata.name));
    const stored = structuredClone(c.object);
    delete stored.metadata.resourceVersion; // the revision is the resourceVersion
    this.enqueue(`${c.type} ${c.resource} rv ${c.rv}`, async () => {
      const r = c.type === 'DELETED'
        ? await this.call<{ header?: Header; deleted?: string }>('/v3/kv/deleterange', { key })
        : await this.call<{ header?: Header }>('/v3/kv/put', { key, value: b64(JSON.stringify({ written, object: stored })) });
      const rev = Number(r.header?.revision);
      if (rev !== c.rv) this.onError(`${c.type} ${c.resource} ${c.object.metadata.name}: etcd is at revision ${rev}, the change's resourceVersion is ${c.rv} (another writer?)`);
    });
  }

  /** Queues a compaction at `rv`: etcd forgets the revisions before it. */
  compact(rv: number): void {
    this.enqueue(`compaction at ${rv}`, async () => {
      await this.call('/v3/kv/compaction', { revision: String(rv), physical: true });
    });
  }

  /** Resolves once every queued write is done. */
  async flush(): Promise<void> {
    while (this.pending > 0) await this.tail;
  }

  /** Flushes, then closes the connection. */
  async close(): Promise<void> {
    await this.flush();
    this.agent.destroy();
  }

  private enqueue(what: string, op: () => Promise<void>): void {
    this.pending++;
    this.tail = this.tail.then(op).catch((e: unknown) => this.onError(`${what}: ${(e as Error).message}`)).finally(() => { this.pending--; });
  }

  /** The changes in revisions [start, end] (a watch with prev_kv read up to `end`), or the compacted revision when `start` is before it. */
  private history(start: number, end: number): Promise<{ changes: Change[]; compacted?: number }> {
    return new Promise((resolve, reject) => {
      const changes: Change[] = [];
      let buf = '';
      const req = request(`${this.url}/v3/watch`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return reject(new Error(`watch: HTTP ${res.statusCode}`));
        }
        res.setEncoding('utf8').on('data', (d: string) => {
          buf += d;
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (!line) continue;
            const m = JSON.parse(line) as WatchMessage;
            if (m.error) return done(new Error(`watch: ${m.error.message}`));
            const r = m.result ?? {};
            if (r.canceled) {
              return Number(r.compact_revision) > 0 ? done(undefined, Number(r.compact_revision)) : done(new Error(`watch canceled: ${r.cancel_reason ?? ''}`));
            }
            for (const e of r.events ?? []) {
              const c = changeOfEvent(e);
              if (c) changes.push(c);
              if (Number(e.kv?.mod_revision) >= end) return done();
            }
          }
        });
        res.on('error', (e) => done(e));
        res.on('end', () => done(new Error('watch: the stream ended early')));
      });
      let finished = false;
      const done = (err?: Error, compacted?: number) => {
        if (finished) return;
        finished = true;
        req.destroy();
        if (err) reject(err);
        else resolve(compacted !== undefined ? { changes, compacted } : { changes });
      };
      req.on('error', (e) => done(e));
      // Only the API server writes under the prefix, so the events reach `end`; a key written there by
      // someone else at the last revision would not show, and this ends the wait.
      const timer = setTimeout(() => done(new Error(`watch: revision ${end} not reached in 60 s`)), 60_000);
      req.on('close', () => clearTimeout(timer));
      req.end(JSON.stringify({ create_request: { key: b64(PREFIX), range_end: prefixEnd(PREFIX), start_revision: String(start), prev_kv: true } }));
    });
  }

  private call<T>(path: string, body: unknown): Promise<T> {
    return new Promise((resolve, reject) => {
      const req = request(`${this.url}${path}`, { method: 'POST', agent: this.agent, headers: { 'content-type': 'application/json' }, timeout: 30_000 }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => { text += d; });
        res.on('end', () => {
          let parsed: Record<string, unknown>;
          try {
            parsed = JSON.parse(text) as Record<string, unknown>;
          } catch {
            return reject(new Error(`${path}: HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
          }
          if (res.statusCode !== 200) reject(new Error(`${path}: HTTP ${res.statusCode}: ${String(parsed.error ?? parsed.message ?? text.slice(0, 200))}`));
          else resolve(parsed as T);
        });
      });
      req.on('timeout', () => req.destroy(new Error(`${path}: no answer in 30 s`)));
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  }
}

/** An etcd process (Debian's `etcd`), its client URL. */
export class EtcdProcess {
  private constructor(private readonly child: ChildProcess, readonly url: string) {}

  /**
   * Starts `etcd` with its data in `dir`, clients on `client` (http://host:port) and peers on
   * `peer`; resolves once it answers a range (rejects with its output when it exits). `netns`:
   * run it in that network namespace (ip netns exec).
   */
  static async start(o: { dir: string; client: string; peer: string; netns?: string; binary?: string }): Promise<EtcdProcess> {
    mkdirSync(o.dir, { recursive: true, mode: 0o700 });
    const argv = [o.binary ?? 'etcd', '--name', 'lab', '--data-dir', o.dir, '--listen-client-urls', o.client, '--advertise-client-urls', o.client,
      '--listen-peer-urls', o.peer, '--initial-advertise-peer-urls', o.peer, '--initial-cluster', `lab=${o.peer}`, '--log-level', 'error'];
    const child = o.netns ? spawn('ip', ['netns', 'exec', o.netns, ...argv], { stdio: ['ignore', 'ignore', 'pipe'] }) : spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { err = (err + d).slice(-4000); });
    const exited = new Promise<never>((_, reject) => {
      child.once('error', (e) => reject(new Error(`etcd did not start: ${e.message} (Debian's package: etcd-server, lab/host.ts installs it)`)));
      child.once('exit', (code) => reject(new Error(`etcd exited (${code}): ${err}`)));
    });
    exited.catch(() => undefined);
    const p = new EtcdProcess(child, o.client);
    const store = new EtcdStore(o.client, () => undefined);
    const deadline = Date.now() + 120_000;
    for (;;) {
      const up = await Promise.race([store.load().then(() => true, () => false), exited]);
      if (up) {
        await store.close();
        return p;
      }
      if (Date.now() > deadline) {
        await p.stop();
        throw new Error(`etcd is not ready after 120 s: ${err}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async stop(): Promise<void> {
    await stopChild(this.child, 10_000);
  }
}
