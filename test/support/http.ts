// One HTTP GET through a given agent, for the kernel tests that need to know which pod answered
// and over which socket (keep-alive: the same socket means the same connection, across changes).
import { type Agent, request } from 'node:http';
import type { Socket } from 'node:net';

/** One GET over `agent`; the answering pod (the lab pod server's `{ pod }` body) and the socket used. */
export function getPod(url: string, agent: Agent, timeoutMs = 5000): Promise<{ pod: string; socket: Socket }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; }).on('end', () => {
        resolve({ pod: (JSON.parse(body) as { pod: string }).pod, socket: req.socket as Socket });
      });
    });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout')));
    req.end();
  });
}
