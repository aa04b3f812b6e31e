// kube-proxy's iptables-mode chain names (pkg/proxy/iptables: servicePortChainName and
// servicePortEndpointChainName), for `explain` and for the kube-proxy rules `lab compare` installs
// beside the operator. Not names of ours: the iptables path never creates these. pure: no I/O.
import { createHash } from 'node:crypto';

/** kube-proxy's chain name: prefix + first 16 chars of base32(sha256(servicePortName + protocol [+ endpoint])). */
export function kubeProxyChain(
  prefix: 'KUBE-SVC-' | 'KUBE-SEP-', servicePortName: string, protocol: string, endpoint = '',
): string {
  const sum = createHash('sha256').update(servicePortName + protocol.toLowerCase() + endpoint).digest();
  return prefix + base32(sum).slice(0, 16);
}

function base32(b: Buffer): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of b) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}
