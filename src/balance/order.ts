// Node-seeded order: the order in which one node adds a virtual server's real servers. The kernel
// puts each new real server at the head of its list and the schedulers favour the head, so every
// node adding the same sorted list herds onto one backend; rotating the sorted list by a hash of
// the node's name and the service spreads the first choices. The order is made only when real
// servers are added (a restart re-adds nothing). docs/balance.md ("Node-seeded order") has the
// kernel details and the lab figures. pure: no I/O.

/** 32-bit FNV-1a of the UTF-8 bytes of `s`: stable across processes, versions and platforms. */
export function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(s, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
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
