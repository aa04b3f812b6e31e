// Where the API server is and who we are, as client-go resolves it: the in-cluster service
// account, or a kubeconfig's current context read the way kubectl reads it. A kubeconfig that
// needs more (exec or auth-provider users, proxy-url) is refused with NeedsClientNode, and
// loadKubeClient (client.ts) hands it to client-node's KubeConfig.
import { closeSync, constants, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { parse as parseYaml } from 'yaml';

/** Where the server is and who we are, resolved from a kubeconfig or the service account. */
export interface Credentials {
  server: string;
  /** PEM text. */
  ca?: string;
  cert?: string;
  key?: string;
  insecureSkipTLSVerify?: boolean;
  tlsServerName?: string;
  token?: string;
  /** Re-read at most once a minute (client-go does the same for rotated service-account tokens). */
  tokenFile?: string;
  username?: string;
  password?: string;
}

/** Certificates, keys, tokens and kubeconfigs are small: a larger "file" is refused. */
const MAX_CREDENTIAL_BYTES = 1 << 20;

/** No kubeconfig was found and this is not a pod: the message names what was looked for. */
export class NoCredentialsError extends Error {
  override name = 'NoCredentialsError';
}

/**
 * A small regular file's text, read through one descriptor opened non-blocking (a FIFO in its
 * place never blocks start-up) and at most `max` bytes.
 */
export function readSmallFile(path: string, max = MAX_CREDENTIAL_BYTES): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`${path} is not a regular file`);
    const buf = Buffer.alloc(max + 1);
    let n = 0;
    for (let r = 1; r > 0 && n <= max; n += r) r = readSync(fd, buf, n, max + 1 - n, null);
    if (n > max) throw new Error(`${path} is larger than ${max} bytes`);
    return buf.subarray(0, n).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** Where a pod's service account is mounted. */
export const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The in-cluster service account's credentials (client-go's rest.InClusterConfig). */
export function inClusterCredentials(env: NodeJS.ProcessEnv = process.env, dir = SERVICE_ACCOUNT): Credentials {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new Error('not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set');
  }
  const tokenFile = join(dir, 'token');
  if (!existsSync(tokenFile)) throw new Error(`in-cluster configuration: no service account token at ${tokenFile}`);
  const caFile = join(dir, 'ca.crt');
  return {
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ...(existsSync(caFile) ? { ca: readSmallFile(caFile) } : {}),
    tokenFile,
  };
}

/** Thrown when a kubeconfig asks for what only client-node's KubeConfig does (the caller hands it over). */
export class NeedsClientNode extends Error {}

type Rec = Record<string, unknown>;
const rec = (v: unknown): Rec => (typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Rec : {});

/**
 * The current context's credentials from a kubeconfig's text (kubectl's rules: file paths are
 * relative to the kubeconfig's directory; `-data` fields are base64). Throws NeedsClientNode for
 * exec and auth-provider users and proxy-url clusters; a plain Error for a broken file.
 */
export function kubeconfigCredentials(text: string, file: string): Credentials {
  let doc: Rec;
  try {
    doc = rec(parseYaml(text));
  } catch (e) {
    throw new Error(`kubeconfig ${file}: not YAML: ${(e as Error).message.split('\n')[0]}`);
  }
  // A field of the wrong type is an error naming it, as kubectl refuses to unmarshal it; absent or "" is unset.
  const str = (v: unknown, field = ''): string | undefined => {
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') {
      throw new Error(`kubeconfig ${file}: ${field} must be a string, not ${JSON.stringify(v)}`);
    }
    return v;
  };
  const named = (list: unknown, name: string | undefined, what: string): Rec => {
    const found = Array.isArray(list) ? list.map(rec).find((e) => e.name === name) : undefined;
    if (!found) throw new Error(`kubeconfig ${file}: no ${what} named ${JSON.stringify(name ?? '')}`);
    return rec(found[what]);
  };
  const current = str(doc['current-context'], 'current-context');
  if (!current) throw new Error(`kubeconfig ${file}: no current-context`);
  const context = named(doc.contexts, current, 'context');
  const cluster = named(doc.clusters, str(context.cluster, 'context.cluster'), 'cluster');
  const userName = str(context.user, 'context.user');
  const user = userName ? named(doc.users, userName, 'user') : {};
  if (user.exec !== undefined || user['auth-provider'] !== undefined || cluster['proxy-url'] !== undefined) {
    throw new NeedsClientNode();
  }
  const server = str(cluster.server, 'cluster.server');
  if (!server) throw new Error(`kubeconfig ${file}: cluster ${JSON.stringify(context.cluster)} has no server`);
  const path = (p: string) => (isAbsolute(p) ? p : join(dirname(file), p));
  const pem = (data: unknown, fileField: unknown, what: string): string | undefined => {
    const d = str(data, `${what}-data`);
    if (d) return Buffer.from(d, 'base64').toString('utf8');
    const f = str(fileField, what);
    if (!f) return undefined;
    try {
      return readSmallFile(path(f));
    } catch (e) {
      throw new Error(`kubeconfig ${file}: reading ${what} ${f}: ${(e as Error).message}`);
    }
  };
  const insecure = cluster['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') {
    const got = JSON.stringify(insecure);
    throw new Error(`kubeconfig ${file}: insecure-skip-tls-verify must be true or false, not ${got}`);
  }
  const tokenFile = str(user.tokenFile, 'tokenFile');
  return {
    server,
    ca: pem(cluster['certificate-authority-data'], cluster['certificate-authority'], 'certificate-authority'),
    cert: pem(user['client-certificate-data'], user['client-certificate'], 'client-certificate'),
    key: pem(user['client-key-data'], user['client-key'], 'client-key'),
    insecureSkipTLSVerify: insecure === true,
    tlsServerName: str(cluster['tls-server-name'], 'tls-server-name'),
    token: str(user.token, 'token'),
    tokenFile: tokenFile ? path(tokenFile) : undefined,
    username: str(user.username, 'username'),
    password: str(user.password, 'password'),
  };
}
