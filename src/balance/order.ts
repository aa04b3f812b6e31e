// Node-seeded order: the order in which one node adds a virtual server's real servers. The kernel
// puts each new real server at the head of its list and the schedulers favour the head, so every
// node adding the same sorted list herds onto one backend; rotating the sorted list by a hash of
// the node's name and the service spreads the first choices. The order is made only when real
// servers are added (a restart re-adds nothing). docs/balance.md ("Node-seeded order") has the
// kernel details and the lab figures. pure: no I/O.

/** The first byte's marker of a UTF-8 sequence, by how many bytes follow it. */
const UTF8_LEAD = [0, 0xc0, 0xe0, 0xf0];

/**
 * 32-bit FNV-1a of the UTF-8 bytes of `s` (a lone surrogate as U+FFFD, as Buffer.from writes it):
 * stable across processes, versions and platforms. Encoded here, not by Buffer.from: a Buffer per
 * virtual server was 5% of a first sync's build in the lab VM (docs/performance.md).
 */
export function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      h = Math.imul(h ^ c, 0x01000193);
      continue;
    }
    let n: number; // the bytes after the first
    if (c < 0x800) n = 1;
    else if (c < 0xd800 || c > 0xdfff) n = 2;
    else {
      const d = c <= 0xdbff && i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
        n = 3;
      } else {
        c = 0xfffd;
        n = 2;
      }
    }
    h = Math.imul(h ^ (UTF8_LEAD[n]! | (c >> (6 * n))), 0x01000193);
    for (let k = n - 1; k >= 0; k--) h = Math.imul(h ^ (0x80 | ((c >> (6 * k)) & 0x3f)), 0x01000193);
  }
  return h >>> 0;
}

/** Where the node's preference order starts in a list of `n` items (0 when n is 0). */
export function seedOffset(nodeName: string, serviceKey: string, n: number): number {
  return n === 0 ? 0 : fnv1a32(`${nodeName}\u0000${serviceKey}`) % n;
}

/**
 * The node's preference order of `sorted` (already in a stable, node-independent order): the
 * same list rotated to start at seedOffset. Its first item is the one this node should pick first.
 */
export function preferenceOrder<T>(sorted: readonly T[], nodeName: string, serviceKey: string): T[] {
  const k = seedOffset(nodeName, serviceKey, sorted.length);
  return sorted.slice(k).concat(sorted.slice(0, k)); // exact length: a spread leaves room for 18 more
}

/**
 * The order to add `sorted` to a new kernel service so that the kernel's list reads in
 * preferenceOrder: reversed, because the kernel puts each added real server at the list's head.
 */
export function addOrder<T>(sorted: readonly T[], nodeName: string, serviceKey: string): T[] {
  return preferenceOrder(sorted, nodeName, serviceKey).reverse();
}

/** The annotation choosing the order: `node-seeded` (the default) or `sorted` (every node alike). */
export const ENDPOINT_ORDER_ANNOTATION = 'ipvs-operator.io/endpoint-order';

/** The orders a Service may ask for, the first the default. */
export const ENDPOINT_ORDERS = ['node-seeded', 'sorted'] as const;
/** A Service's endpoint order. */
export type EndpointOrder = (typeof ENDPOINT_ORDERS)[number];

/**
 * The order the Service's annotations ask for: `node-seeded` when absent or empty; any other value
 * but `sorted` (surrounding blanks ignored) is an InvalidEndpointOrder problem and `node-seeded`.
 */
export function chooseEndpointOrder(serviceId: string, annotations: Record<string, unknown> | undefined,
  problems: { service: string; reason: string; message: string }[]): EndpointOrder {
  const raw = annotations?.[ENDPOINT_ORDER_ANNOTATION];
  if (raw === undefined || raw === null) return 'node-seeded';
  const value = typeof raw === 'string' ? raw.trim() : undefined;
  if (value === '') return 'node-seeded';
  if (value !== undefined && (ENDPOINT_ORDERS as readonly string[]).includes(value)) return value as EndpointOrder;
  problems.push({ service: serviceId, reason: 'InvalidEndpointOrder',
    message: `${ENDPOINT_ORDER_ANNOTATION}: ${JSON.stringify(raw)} is not one of ${ENDPOINT_ORDERS.join(', ')}; ` +
      `using node-seeded` });
  return 'node-seeded';
}
