// What the files source (files.ts) keeps of a file once it is parsed: per document, the digest of
// its text and its objects in the form they are sent. Services and EndpointSlices are trimmed as
// the kube source keeps them (trim.ts); the Node and the config are kept whole. Nothing else of
// the file stays: not its text, not the parsed YAML, not a fingerprint per object (whether a
// re-parsed object says something new is asked of the object itself: sameContent). pure: no I/O.
import { createHash } from 'node:crypto';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { trimEndpointSlice, trimService } from './trim.js';
import { type Manifest, type ManifestKind, parseManifests, splitDocuments } from './manifests.js';

/** One object of a file, as the source sends it. */
export interface Entry {
  readonly kind: ManifestKind;
  /** kind/namespace/name, as Manifest.key. */
  readonly key: string;
  /** The digest of the text of the document it came from ('' when the file was parsed whole). */
  readonly digest: string;
  /**
   * The object, holding no part of the file's text. The source replaces it with the copy it sent
   * (its own resourceVersion), so that what it sent and what it keeps are one object.
   */
  object: Record<string, unknown>;
}

/** What one document of a file gave, and the digest of the document's text ('' when the file was parsed whole). */
export interface DocEntry {
  readonly digest: string;
  readonly objects: readonly Entry[];
  /** `Kind/name` of objects of kinds not read. */
  readonly skipped: readonly string[];
}

/**
 * A document as kept: the entry of its object when it gave exactly one and skipped nothing (a
 * file of 100 Services and their slices: 200 such documents), else its DocEntry. A document's
 * wrapper and list would cost about 100 bytes, as much as the rest of what is kept per object.
 */
export type Doc = Entry | DocEntry;

/** The objects a document gave. */
export const docObjects = (d: Doc): readonly Entry[] => ('objects' in d ? d.objects : [d]);

/** A file's documents as parsed, or the errors that make it unusable (then `docs` is empty). */
export interface ParsedEntries {
  errors: string[];
  docs: Doc[];
  /** `Kind/name` of every skipped object of the file, for a debug log. */
  skipped: string[];
}

/**
 * A digest of a text or of bytes (SHA-1, base64): identity of file and document texts. A text is
 * hashed as its UTF-8 bytes, so a file's digest is the same from its text or from its bytes.
 */
export const digestOf = (text: string | Uint8Array): string => createHash('sha1').update(text).digest('base64');

/**
 * A copy of a JSON value that shares no string with the original. V8 keeps a string cut from a
 * longer one (13 characters or more, such as an EndpointSlice's "discovery.k8s.io/v1") as a view
 * into it, so one value kept as the YAML parser returned it keeps its whole file's text alive
 * (about 270 KB a file of 100 Services and their slices).
 */
const detach = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

const NONE: readonly string[] = Object.freeze([]);

/** The entry of one parsed object of the document `digest`: copied (detach), then trimmed. */
export function buildEntry(m: Manifest, digest: string): Entry {
  const copy = detach(m.object);
  const object = m.kind === 'Service' ? trimService(copy as unknown as V1Service)
    : m.kind === 'EndpointSlice' ? trimEndpointSlice(copy as unknown as V1EndpointSlice)
      : copy;
  return { kind: m.kind, key: detach(m.key), digest, object: object as Record<string, unknown> };
}

/** An object as kept, as JSON without its resourceVersion (the sent copy carries the source's own). */
function contentOf(o: Record<string, unknown>): string {
  const meta = o.metadata;
  const plainMeta = typeof meta === 'object' && meta !== null && !Array.isArray(meta);
  return JSON.stringify(plainMeta ? { ...o, metadata: { ...meta, resourceVersion: undefined } } : o);
}

/**
 * Whether two objects as kept say the same, resourceVersions aside: a document whose text changed
 * only in comments, or in a field the source does not keep, gives the same object again.
 */
export function sameContent(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  return a === b || contentOf(a) === contentOf(b);
}

/** The identity of a config object for the config gate: its content, resourceVersion aside. */
export const configIdentity = (o: Record<string, unknown>): string => contentOf(o);

function buildDoc(digest: string, manifests: readonly Manifest[], skipped: readonly string[]): Doc {
  if (manifests.length === 1 && skipped.length === 0) return buildEntry(manifests[0]!, digest);
  return { digest, objects: manifests.map((m) => buildEntry(m, digest)),
    skipped: skipped.length ? detach(skipped) : NONE };
}

const skippedOf = (d: Doc): readonly string[] => ('objects' in d ? d.skipped : NONE);

/**
 * Parses a file's text into its documents' entries, reusing the entries in `previous` of
 * documents whose text is unchanged: an edit of one document parses that document only. Any
 * error makes the whole file unusable; errors name documents as they are numbered in the file.
 */
export function parseEntries(text: string, previous: readonly Doc[] | undefined): ParsedEntries {
  const chunks = splitDocuments(text);
  if (chunks) {
    const known = new Map<string, Doc>();
    for (const d of previous ?? []) if (d.digest) known.set(d.digest, d);
    const docs: Doc[] = [];
    let failed = false;
    for (const chunk of chunks) {
      const digest = digestOf(chunk);
      let d = known.get(digest);
      if (!d) {
        const r = parseManifests(chunk);
        // An error is reported from the whole text below: its document numbers are the file's.
        if (r.errors.length) { failed = true; break; }
        known.set(digest, (d = buildDoc(digest, r.manifests, r.skipped)));
      }
      docs.push(d);
    }
    if (!failed) return { errors: [], docs, skipped: docs.flatMap(skippedOf) };
  }
  const r = parseManifests(text);
  if (r.errors.length) return { errors: r.errors, docs: [], skipped: r.skipped };
  return { errors: [], docs: [buildDoc('', r.manifests, r.skipped)], skipped: r.skipped };
}
