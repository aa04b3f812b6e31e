// The operator's configuration as the rest of the code reads it: the IPVSProxyConfig CRD's spec
// after validation (schema.ts, load.ts), with kube-proxy's defaults. pure: types and constants.

/**
 * Operator configuration; names follow the future CRD's fields (kube-proxy's where they exist).
 * Durations are in seconds.
 */
export interface ProxyConfig {
  /** Scheduler plugin for Services without the annotation (kube-proxy: ipvs.scheduler). */
  defaultScheduler: string;
  syncPeriod: number;
  minSyncPeriod: number;
  /** fwmark bit for masquerading (the iptables path). */
  masqueradeBit: number;
  masqueradeAll: boolean;
  clusterCIDRs: string[];
  /** CIDRs selecting which node addresses serve NodePorts; empty: every address of the Node. */
  nodePortAddresses: string[];
  /** Virtual servers in these CIDRs are never touched (kube-proxy: ipvs.excludeCIDRs). */
  excludeCIDRs: string[];
  strictARP: boolean;
  /** IPVS timeouts; 0 leaves the kernel's value. */
  tcpTimeout: number;
  tcpFinTimeout: number;
  udpTimeout: number;
  /** How long a removed TCP real server drains at weight 0 before it is deleted anyway. */
  gracefulTerminationSeconds: number;
  /** Handle only Services labelled service.kubernetes.io/service-proxy-name=<this>; unset: only unlabelled ones. */
  serviceProxyName?: string;
  /** Dummy interface the VIPs are bound to; not kube-proxy's kube-ipvs0, so both can run side by side. */
  interfaceName: string;
  /**
   * Where the node-level proxy health server listens (kube-proxy's healthzBindAddress: /healthz,
   * /livez), HOST:PORT or [IPv6]:PORT; "" disables it.
   */
  healthzBindAddress: string;
}

/** kube-proxy's defaults where it has one (graceful termination: its 15 minutes). */
export const defaultProxyConfig: Readonly<ProxyConfig> = Object.freeze({
  defaultScheduler: 'rr',
  syncPeriod: 30,
  minSyncPeriod: 1,
  masqueradeBit: 14,
  masqueradeAll: false,
  clusterCIDRs: [],
  nodePortAddresses: [],
  excludeCIDRs: [],
  strictARP: false,
  tcpTimeout: 0,
  tcpFinTimeout: 0,
  udpTimeout: 0,
  gracefulTerminationSeconds: 900,
  interfaceName: 'ipvs-op0',
  healthzBindAddress: '0.0.0.0:10256',
});
