// Loopback helpers shared by the tests.
import { createServer } from 'node:net';

/** A port free right now on 127.0.0.1 (bound, read, released). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}
