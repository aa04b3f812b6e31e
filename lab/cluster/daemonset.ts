// How the lab cluster's "kubelet" runs manifests/daemonset.yaml's container on a node, pure: the
// argv (command + args with `$(VAR)` expanded as the kubelet does), the environment (downward API
// fieldRefs, the in-cluster service-account variables), the volumes (hostPath from the node's own
// directory, emptyDir as a tmpfs) and the capabilities. cluster.ts turns a Launch into a process
// inside the node's netns and a private mount namespace. pure: no I/O.

/** What a node's operator process is made of. */
export interface Launch {
  /** The container's command + args, `$(VAR)` expanded; argv[0] is the image's program name. */
  argv: string[];
  env: Record<string, string>;
  /** hostPath volumes: `hostPath` is the path on the node, mounted at `mountPath` in the container. */
  hostPaths: Array<{ hostPath: string; mountPath: string; readOnly: boolean; type: string }>;
  /** emptyDir volumes (medium Memory): a tmpfs of `sizeLimit` (a Kubernetes quantity) or unbounded. */
  emptyDirs: Array<{ mountPath: string; sizeLimit?: string }>;
  /** Capabilities kept (lower case, without CAP_), after `drop: [ALL]`; undefined: all (privileged). */
  capabilities: string[] | undefined;
  readOnlyRootFilesystem: boolean;
  /** The port of the container's readinessProbe (httpGet). */
  readyPort: number | undefined;
  readyPath: string | undefined;
}

/** What the kubelet knows about the pod it starts. */
export interface PodFacts {
  nodeName: string;
  podName: string;
  namespace: string;
  /** hostNetwork: the node's address. */
  podIP: string;
  serviceAccountName: string;
  /** KUBERNETES_SERVICE_HOST/PORT: where the API server is reached from the node. */
  apiHost: string;
  apiPort: number;
}

type Rec = Record<string, unknown>;
const rec = (v: unknown): Rec => (typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Rec : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * Expands `$(VAR)` references as the kubelet does: defined variables are replaced, `$$` is a
 * literal `$`, an undefined reference is kept as written.
 */
export function expandVars(text: string, env: Readonly<Record<string, string>>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name: string | undefined) => {
    if (m === '$$') return '$';
    return name !== undefined && Object.hasOwn(env, name) ? env[name]! : m;
  });
}

function fieldRef(path: string, pod: PodFacts): string {
  switch (path) {
    case 'spec.nodeName': return pod.nodeName;
    case 'metadata.name': return pod.podName;
    case 'metadata.namespace': return pod.namespace;
    case 'status.podIP': case 'status.hostIP': return pod.podIP;
    case 'spec.serviceAccountName': return pod.serviceAccountName;
    default: throw new Error(`lab cluster: fieldRef ${path} is not supported by the lab kubelet`);
  }
}

/** The launch of the DaemonSet's first container for one node (throws on a shape the lab cannot run). */
export function launchFromDaemonSet(ds: unknown, pod: PodFacts): Launch {
  const d = rec(ds);
  if (d.kind !== 'DaemonSet') throw new Error(`lab cluster: expected a DaemonSet, got ${String(d.kind)}`);
  const spec = rec(rec(rec(d.spec).template).spec);
  const container = rec(arr(spec.containers)[0]);
  const command = arr(container.command).map(String);
  if (command.length === 0) throw new Error('lab cluster: the DaemonSet\'s container has no command');
  if (spec.hostNetwork !== true) throw new Error('lab cluster: the operator\'s DaemonSet must use hostNetwork');
  // The kubelet's environment: the service links of the `kubernetes` Service, then the container's env in order.
  const env: Record<string, string> = {
    KUBERNETES_SERVICE_HOST: pod.apiHost,
    KUBERNETES_SERVICE_PORT: String(pod.apiPort),
    KUBERNETES_SERVICE_PORT_HTTPS: String(pod.apiPort),
  };
  for (const e of arr(container.env).map(rec)) {
    const name = str(e.name);
    if (!name) continue;
    const ref = str(rec(rec(e.valueFrom).fieldRef).fieldPath);
    env[name] = ref !== undefined ? fieldRef(ref, pod) : expandVars(str(e.value) ?? '', env);
  }
  const argv = [...command, ...arr(container.args).map(String)].map((a) => expandVars(a, env));
  const volumes = new Map(arr(spec.volumes).map(rec).map((v) => [str(v.name) ?? '', v]));
  const hostPaths: Launch['hostPaths'] = [];
  const emptyDirs: Launch['emptyDirs'] = [];
  for (const m of arr(container.volumeMounts).map(rec)) {
    const v = volumes.get(str(m.name) ?? '');
    const mountPath = str(m.mountPath);
    if (!v || !mountPath) throw new Error(`lab cluster: volumeMount ${String(m.name)} has no volume or mountPath`);
    if (v.hostPath) {
      const hp = rec(v.hostPath);
      hostPaths.push({ hostPath: str(hp.path) ?? '', mountPath, readOnly: m.readOnly === true, type: str(hp.type) ?? '' });
    } else if (v.emptyDir) {
      const size = str(rec(v.emptyDir).sizeLimit);
      emptyDirs.push({ mountPath, ...(size ? { sizeLimit: size } : {}) });
    } else {
      throw new Error(`lab cluster: volume ${String(v.name)} is neither hostPath nor emptyDir`);
    }
  }
  const sc = rec(container.securityContext);
  const caps = rec(sc.capabilities);
  const dropsAll = arr(caps.drop).map(String).includes('ALL');
  const capabilities = sc.privileged === true || !dropsAll ? undefined
    : arr(caps.add).map((c) => String(c).toLowerCase().replace(/^cap_/, ''));
  const probe = rec(rec(container.readinessProbe).httpGet);
  const readyPort = typeof probe.port === 'number' ? probe.port : undefined;
  return {
    argv, env, hostPaths, emptyDirs, capabilities,
    readOnlyRootFilesystem: sc.readOnlyRootFilesystem === true,
    readyPort, readyPath: str(probe.path),
  };
}

/**
 * The Pod object of the DaemonSet's pod on a node, as its controller creates it (the template's
 * labels and spec, bound to the node) without a status, which the kubelet writes. Named
 * `pod.podName` (a real DaemonSet pod's name has a random suffix; the lab's is stable per node).
 */
export function podFromDaemonSet(ds: unknown, pod: PodFacts): { apiVersion: 'v1'; kind: 'Pod'; metadata: { name: string; namespace: string; labels: Record<string, string> }; spec: Record<string, unknown> } {
  const template = rec(rec(rec(ds).spec).template);
  const labels = Object.fromEntries(Object.entries(rec(rec(template.metadata).labels)).map(([k, v]) => [k, String(v)]));
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name: pod.podName, namespace: pod.namespace, labels },
    spec: { ...structuredClone(rec(template.spec)), nodeName: pod.nodeName, restartPolicy: 'Always' },
  };
}

/** The DaemonSet pod's terminationGracePeriodSeconds in ms (the API's default, 30 s, when unset). */
export function graceMsOf(ds: unknown): number {
  const g = rec(rec(rec(rec(ds).spec).template).spec).terminationGracePeriodSeconds;
  return (typeof g === 'number' ? g : 30) * 1000;
}

/** A Kubernetes memory quantity ("16Mi", "1G", "512") as a tmpfs size in bytes. */
export function quantityBytes(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|k|M|G)?$/.exec(q);
  if (!m) throw new Error(`lab cluster: bad quantity ${JSON.stringify(q)}`);
  const mult: Record<string, number> = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, k: 1e3, M: 1e6, G: 1e9 };
  return Number(m[1]) * (m[2] ? mult[m[2]]! : 1);
}

/** Where the in-cluster config looks for the service-account files. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The shell script (run by `ip netns exec <node> sh -c`, so already in a private mount namespace)
 * that builds the container's mounts from the node's directory and execs the program with only
 * the kept capabilities. `nodeRoot` stands for the node's `/`: hostPath P is nodeRoot + P.
 * `program` replaces argv[0] (the image's entry point); `serviceAccount` is a directory holding
 * token, ca.crt and namespace, mounted where client libraries look (undefined: none).
 * With `image`, the container's `/` is the image's filesystem (`image.rootfs`, e.g. unpacked by
 * `lab image export`) under a writable overlay in `image.dir`, as a container runtime gives it:
 * every mount goes under it, it gets its own /proc, /dev and /sys, and `program` is looked up
 * inside it (chroot); `files` (paths on the node) are then mounted at the same path inside it.
 * Without `image`, `keep` are node paths the program needs (the working tree) that stay visible
 * even under an emptyDir's mount path.
 */
export function containerScript(l: Launch, o: { nodeRoot: string; program: readonly string[]; serviceAccount?: string | undefined; image?: { rootfs: string; dir: string } | undefined; files?: readonly string[]; keep?: readonly string[] }): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const lines = ['set -e'];
  const root = o.image ? `${o.image.dir}/root` : '';
  // A mount target inside the image resolved as a runtime does (runc's securejoin): its symlinks
  // followed within the root, not on the node (Debian's /var/run is a link to /run, so
  // `<root>/var/run/...` would otherwise land on the node's own /run).
  const at = (path: string) => (o.image ? `"$(inroot ${q(path)})"` : q(path));
  if (o.image) {
    lines.push(`inroot() { printf '%s%s' ${q(root)} "$(chroot ${q(root)} realpath -m -- "$1")"; }`);
    const { rootfs, dir } = o.image;
    lines.push(`mkdir -p ${q(`${dir}/upper`)} ${q(`${dir}/work`)} ${q(root)}`,
      // (where overlayfs refuses the lower filesystem, a private copy does the same job, slower)
      `mount -t overlay overlay -o ${q(`lowerdir=${rootfs},upperdir=${dir}/upper,workdir=${dir}/work`)} ${q(root)} || cp -a ${q(`${rootfs}/.`)} ${q(root)}`,
      `mount -t proc proc ${q(`${root}/proc`)}`, `mount --rbind /dev ${q(`${root}/dev`)}`, `mount --rbind /sys ${q(`${root}/sys`)}`);
  }
  for (const h of l.hostPaths) {
    // The node's own copy of a hostPath, except read-only system paths every node shares (/lib/modules).
    const src = h.readOnly && h.type === 'Directory' ? h.hostPath : `${o.nodeRoot}${h.hostPath}`;
    const target = at(h.mountPath);
    if (h.type === 'FileOrCreate' || h.type === 'File') {
      lines.push(`mkdir -p "$(dirname ${q(src)})" "$(dirname ${target})"`, `touch ${q(src)} ${target}`);
    } else {
      lines.push(`mkdir -p ${q(src)} ${target}`);
    }
    lines.push(`mount --bind ${q(src)} ${target}`);
    if (h.readOnly) lines.push(`mount -o remount,bind,ro ${target}`);
  }
  l.emptyDirs.forEach((e, ei) => {
    const size = e.sizeLimit ? `,size=${quantityBytes(e.sizeLimit)}` : '';
    // From the working tree, the program lives on the node: a checkout under an emptyDir's path
    // (a clone in /tmp, the DaemonSet's emptyDir at /tmp) would be hidden by the tmpfs. It is
    // bound aside first and back inside the tmpfs after.
    const base = e.mountPath.replace(/\/+$/, '');
    const hidden = o.image ? [] : (o.keep ?? []).filter((k) => k === base || k.startsWith(`${base}/`));
    const aside = (i: number) => q(`${o.nodeRoot}/keep-${ei}-${i}`);
    hidden.forEach((k, i) => lines.push(`mkdir -p ${aside(i)}`, `mount --bind ${q(k)} ${aside(i)}`));
    lines.push(`mkdir -p ${at(e.mountPath)}`, `mount -t tmpfs -o mode=1777${size} emptydir ${at(e.mountPath)}`);
    hidden.forEach((k, i) => lines.push(`mkdir -p ${q(k)}`, `mount --bind ${aside(i)} ${q(k)}`));
  });
  if (o.serviceAccount) {
    const sa = o.image ? at(SERVICE_ACCOUNT_DIR) : SERVICE_ACCOUNT_DIR;
    lines.push(`mkdir -p ${sa}`, `mount --bind ${q(o.serviceAccount)} ${sa}`, `mount -o remount,bind,ro ${sa}`);
  }
  // Files the container reads at the node's own path (a lab kubeconfig), read-only.
  for (const f of o.image ? o.files ?? [] : []) {
    lines.push(`mkdir -p "$(dirname ${at(f)})"`, `touch ${at(f)}`, `mount --bind ${q(f)} ${at(f)}`, `mount -o remount,bind,ro ${at(f)}`);
  }
  // An unprivileged container sees /proc/sys read-only, even with hostNetwork.
  if (l.capabilities !== undefined) {
    const sys = o.image ? q(`${root}/proc/sys`) : '/proc/sys';
    lines.push(`mount --bind ${sys} ${sys}`, `mount -o remount,bind,ro ${sys}`);
  }
  const caps = l.capabilities === undefined ? [] : ['setpriv', `--bounding-set=-all${l.capabilities.map((c) => `,+${c}`).join('')}`,
    `--inh-caps=-all${l.capabilities.map((c) => `,+${c}`).join('')}`, '--no-new-privs'];
  const env = Object.entries(l.env).map(([k, v]) => `${k}=${q(v)}`);
  const chroot = o.image ? ['chroot', root] : [];
  lines.push(`exec ${[...chroot.map(q), 'env'].join(' ')} ${env.join(' ')} ${[...caps, ...o.program, ...l.argv.slice(1)].map(q).join(' ')}`);
  return `${lines.join('\n')}\n`;
}
