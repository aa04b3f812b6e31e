#!/usr/bin/python3
# SCTP for the lab cluster's pods and clients (Node.js has no SCTP sockets; Debian's python3 does).
#   python3 sctp.py serve --name POD --port 9999
#     one-to-one SCTP echo on every address (IPv4 and IPv6): each association gets back one
#     {"pod","peer","data"} message, like pod.ts's UDP echo; prints "ready" once it listens.
#   python3 sctp.py query --host 10.200.1.37 --port 9999 --count 6 [--timeout 10]
#     one association per query, one message each way; prints {"ok","errors","errorKinds",
#     "byPod","byPeer"} (the shape of udp-query.ts) and "slow": [query, seconds] past 1 s.
#     The timeout outlasts SCTP's first INIT retransmission (net.sctp.rto_initial, 3 s): a lost
#     INIT is recovered so, as a real client's is (docs/testing.md, "SCTP: a lost INIT").
import argparse
import json
import signal
import socket
import sys
import time


def serve(name: str, port: int) -> None:
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_SCTP)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('::', port))
    s.listen(64)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print('ready', flush=True)
    while True:
        c, addr = s.accept()
        try:
            c.settimeout(5)
            data = c.recv(4096)
            peer = addr[0][7:] if addr[0].startswith('::ffff:') else addr[0]
            c.sendall(json.dumps({'pod': name, 'peer': f'{peer}:{addr[1]}', 'data': data.decode('utf-8', 'replace')}).encode())
        except OSError:
            pass
        finally:
            c.close()


def query(host: str, port: int, count: int, timeout: float) -> None:
    r = {'ok': 0, 'errors': 0, 'errorKinds': {}, 'byPod': {}, 'byPeer': {}, 'slow': []}
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    for i in range(count):
        s = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_SCTP)
        s.settimeout(timeout)
        t0 = time.monotonic()
        try:
            s.connect((host, port))
            s.sendall(f'query {i}'.encode())
            answer = json.loads(s.recv(4096).decode())
            r['ok'] += 1
            r['byPod'][answer['pod']] = r['byPod'].get(answer['pod'], 0) + 1
            peer = answer['peer'].rsplit(':', 1)[0]
            r['byPeer'][peer] = r['byPeer'].get(peer, 0) + 1
        except (OSError, ValueError, KeyError) as e:
            kind = type(e).__name__ if not getattr(e, 'errno', None) else f'errno {e.errno}'
            r['errors'] += 1
            r['errorKinds'][kind] = r['errorKinds'].get(kind, 0) + 1
        finally:
            s.close()
            took = time.monotonic() - t0
            if took > 1:
                r['slow'].append([i, round(took, 3)])
    print(json.dumps(r), flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument('mode', choices=['serve', 'query'])
    p.add_argument('--name')
    p.add_argument('--host')
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--count', type=int, default=1)
    p.add_argument('--timeout', type=float, default=10)
    a = p.parse_args()
    if a.mode == 'serve':
        if not a.name:
            p.error('serve needs --name')
        serve(a.name, a.port)
    else:
        if not a.host:
            p.error('query needs --host')
        query(a.host, a.port, a.count, a.timeout)


main()
