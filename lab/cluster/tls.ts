// A self-signed serving certificate for the lab API server, made with the host's openssl (what
// client-node's in-cluster config and kubectl verify against: ca.crt is the certificate itself).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/** Paths of a certificate and its key. */
export interface CertFiles { cert: string; key: string }

/**
 * Writes `cert.pem` and `key.pem` (RSA 2048, valid `days`) into `dir` for the given IP and DNS
 * subject alternative names; throws when openssl is missing or fails.
 */
export function makeSelfSignedCert(dir: string, sans: { ips?: string[]; dns?: string[] } = { ips: ['127.0.0.1'] }, days = 7): CertFiles {
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  const alt = [...(sans.ips ?? []).map((i) => `IP:${i}`), ...(sans.dns ?? []).map((d) => `DNS:${d}`)].join(',');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', String(days),
    '-subj', '/CN=lab-apiserver', ...(alt ? ['-addext', `subjectAltName=${alt}`] : [])], { stdio: ['ignore', 'ignore', 'pipe'] });
  return { cert, key };
}
