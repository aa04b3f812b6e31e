// The decisions of the files source (files.ts), apart from its reading and watching: what a file's
// text gives, which objects of the directory are used, and which events bring what was sent up to
// date. files.ts reads the directory and calls these. pure: no fs, no timers, no logging.
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { Problem } from '../desired/types.js';
import type { ConfigGate } from './config-gate.js';
import {
  type Doc, type Entry, configIdentity, digestOf, docObjects, parseEntries, sameContent,
} from './file-entries.js';
import type { Manifest } from './manifests.js';
import type { SourceEvent } from './types.js';

/** The key of the only IPVSProxyConfig read, "default". */
export const CONFIG_KEY = 'IPVSProxyConfig//default';

/**
 * A file's last good objects (file-entries.ts: per document, the objects as sent, nothing of the
 * text), and the digest of the bytes they were parsed from.
 */
export interface FileEntry { digest: string; docs: readonly Doc[] }

/** The object to send under one key, and the file it comes from. */
export interface Selected { file: string; entry: Entry }

/** Whether a file gave any object. */
export const hasObjects = (f: FileEntry | undefined): boolean => f?.docs.some((d) => docObjects(d).length > 0) ?? false;

/** Whether a directory entry name is one the source reads (not hidden, *.yaml / *.yml). */
export const isManifestName = (name: string): boolean => !name.startsWith('.') && /\.ya?ml$/.test(name);

/**
 * What a file's content (its bytes, or its text) gives against its last good objects `last`: the
 * same objects (the same bytes: nothing is decoded), new ones (with `Kind/name` of the objects
 * of kinds not read), or a problem, and then its last good objects stay: an empty file that had
 * objects (a save in two steps is never a delete) or one that does not parse. Bytes are read
 * here only: the caller may reuse their buffer once this returns.
 */
export function parseFile(name: string, content: string | Buffer, last: FileEntry | undefined):
  { same: true } | { entry: FileEntry; skipped: string[] } | { problem: Problem } {
  const digest = digestOf(content);
  if (last?.digest === digest) return { same: true }; // the same bytes: the same objects
  const text = typeof content === 'string' ? content : content.toString('utf8');
  if (text.trim() === '' && hasObjects(last)) {
    // An editor's save in two steps, or `cmd > file.yaml` before cmd wrote: never a delete.
    return { problem: { service: '', reason: 'EmptyManifestFile',
      message: `${name}: is empty (keeping its last good objects; delete the file to delete them)` } };
  }
  const parsed = parseEntries(text, last?.docs);
  if (parsed.errors.length) {
    return { problem: { service: '', reason: 'InvalidManifestFile',
      message: `${name}: ${parsed.errors.join('; ')}${last ? ' (keeping its last good objects)' : ''}` } };
  }
  return { entry: { digest, docs: parsed.docs }, skipped: parsed.skipped };
}

/** The problem of a file that could not be read (not one that is gone: that deletes its objects). */
export function unreadableFile(name: string, error: string, hasLast: boolean): Problem {
  return { service: '', reason: 'UnreadableManifestFile',
    message: `${name}: cannot be read: ${error}${hasLast ? ' (keeping its last good objects)' : ''}` };
}

/**
 * The objects to send, by key, from the files in name order: Nodes other than `nodeName` left
 * out; configs other than "default" and the second copy of an object left out with a problem.
 */
export function selectObjects(
  files: ReadonlyMap<string, FileEntry>, nodeName: string, problems: Problem[],
): Map<string, Selected> {
  const next = new Map<string, Selected>();
  for (const file of [...files.keys()].sort()) {
    for (const doc of files.get(file)!.docs) {
      for (const entry of docObjects(doc)) {
        const name = (entry.object.metadata as { name: string }).name;
        if (entry.kind === 'Node' && name !== nodeName) continue;
        if (entry.kind === 'IPVSProxyConfig' && entry.key !== CONFIG_KEY) {
          problems.push({ service: '', reason: 'IgnoredConfig',
            message: `${file}: IPVSProxyConfig ${name} is ignored: only the one named "default" is read` });
          continue;
        }
        const first = next.get(entry.key);
        if (first) {
          problems.push({ service: '', reason: 'DuplicateObject',
            message: `${file}: ${entry.key} is also in ${first.file}; using the one in ${first.file}` });
          continue;
        }
        next.set(entry.key, { file, entry });
      }
    }
  }
  return next;
}

/** What the source remembers of what it sent. */
export interface SentState {
  readonly gate: ConfigGate;
  /**
   * What was sent, by key: the entry whose object went out (entries of later reads share it while
   * they say the same).
   */
  readonly sent: Map<string, Entry>;
  /** The next of the source's own resourceVersions. */
  readonly nextVersion: () => number;
}

/**
 * The events that bring what was sent up to `next`, in order: the config (through the gate; an
 * invalid one is a problem), then upserts of new and changed objects, then deletes of vanished
 * ones. Updates `state` as if they were all sent.
 */
export function diffObjects(next: ReadonlyMap<string, Selected>, state: SentState, problems: Problem[]): SourceEvent[] {
  const events: SourceEvent[] = [];
  const config = next.get(CONFIG_KEY);
  if (config) {
    // The object's content tells configs apart: an edit of the file's config is sent.
    const v = state.gate.upsert(config.entry.object, configIdentity(config.entry.object));
    if (!v.ok) {
      problems.push({ service: '', reason: 'InvalidConfig',
        message: `${config.file}: IPVSProxyConfig default is invalid, the last valid configuration stays in force: `
          + `${v.errors}` });
    } else if (v.event) {
      events.push(v.event);
    }
  } else {
    const deleted = state.gate.delete();
    if (deleted) events.push(deleted);
  }
  for (const [key, { entry }] of next) {
    if (key === CONFIG_KEY) continue;
    const sent = state.sent.get(key);
    if (sent === entry) continue; // a document whose text did not change: its entry as sent
    if (sent && sameContent(sent.object, entry.object)) {
      // The same object again (a document re-parsed, another file's copy): keep one object.
      entry.object = sent.object;
      state.sent.set(key, entry);
      continue;
    }
    // A new top-level object and metadata (its own resourceVersion; the desired state tells
    // objects apart by identity and resourceVersion), sharing the rest with the entry's: one
    // copy of each object's contents, kept by the entry from now on. Nothing downstream
    // mutates objects.
    const o = entry.object as { metadata: Record<string, unknown> };
    entry.object = { ...o, metadata: { ...o.metadata, resourceVersion: `files-${state.nextVersion()}` } };
    state.sent.set(key, entry);
    events.push(toEvent(entry.kind, 'upsert', entry.object));
  }
  for (const [key, entry] of [...state.sent]) {
    if (next.has(key)) continue;
    state.sent.delete(key);
    events.push(toEvent(entry.kind, 'delete', entry.object));
  }
  return events;
}

function toEvent(kind: Manifest['kind'], type: 'upsert' | 'delete', object: object): SourceEvent {
  switch (kind) {
    case 'Service': return { kind: 'service', type, object: object as V1Service };
    case 'EndpointSlice': return { kind: 'endpointslice', type, object: object as V1EndpointSlice };
    case 'Node': return { kind: 'node', type, object: object as V1Node };
    case 'IPVSProxyConfig': throw new Error('configs are sent through the gate');
  }
}
