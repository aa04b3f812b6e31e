// The lab API server's answers: Status objects and errors as kube-apiserver writes them, and the
// plain senders every room of the server answers with.
import type { ServerResponse } from 'node:http';

/** Thrown inside request handling: answered as a Status. */
export class HttpError extends Error {
  constructor(readonly code: number, readonly reason: string, message: string) {
    super(message);
  }
}

/** The Status body of an error. */
export function statusObject(code: number, reason: string, message: string) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

/** The reason kube-apiserver names for a status code. */
export const STATUS_REASONS: Record<number, string> = {
  401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout',
};

/** A 409 for a write carrying a stale metadata.resourceVersion. */
export function conflict(resource: string, name: string): HttpError {
  return new HttpError(409, 'Conflict', `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`);
}

export function send(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(code, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

export function sendText(res: ServerResponse, code: number, text: string): void {
  res.writeHead(code, { 'content-type': 'text/plain' });
  res.end(text);
}

export function sendStatus(res: ServerResponse, code: number, reason: string, message: string, headers: Record<string, string> = {}): void {
  send(res, code, statusObject(code, reason, message), headers);
}
