// Numbers of the IPVS generic netlink family, copied from include/uapi/linux/ip_vs.h (Linux 6.1;
// unchanged since 5.2 added the tunnel attributes); netlink's own are in src/netlink/constants.ts.
// Names follow the header so they can be grepped side by side. pure.

export const IPVS_GENL_NAME = 'IPVS';
export const IPVS_GENL_VERSION = 1;

/** IPVS_CMD_* */
export const Cmd = {
  NEW_SERVICE: 1,
  SET_SERVICE: 2,
  DEL_SERVICE: 3,
  GET_SERVICE: 4,
  NEW_DEST: 5,
  SET_DEST: 6,
  DEL_DEST: 7,
  GET_DEST: 8,
  NEW_DAEMON: 9,
  DEL_DAEMON: 10,
  GET_DAEMON: 11,
  SET_CONFIG: 12,
  GET_CONFIG: 13,
  SET_INFO: 14,
  GET_INFO: 15,
  ZERO: 16,
  FLUSH: 17,
} as const;

/** IPVS_CMD_ATTR_* (top level) */
export const CmdAttr = {
  SERVICE: 1,
  DEST: 2,
  DAEMON: 3,
  TIMEOUT_TCP: 4,
  TIMEOUT_TCP_FIN: 5,
  TIMEOUT_UDP: 6,
} as const;

/** IPVS_SVC_ATTR_* */
export const SvcAttr = {
  AF: 1,
  PROTOCOL: 2,
  ADDR: 3,
  PORT: 4,
  FWMARK: 5,
  SCHED_NAME: 6,
  FLAGS: 7,
  TIMEOUT: 8,
  NETMASK: 9,
  STATS: 10,
  PE_NAME: 11,
  STATS64: 12,
} as const;

/** IPVS_DEST_ATTR_* */
export const DestAttr = {
  ADDR: 1,
  PORT: 2,
  FWD_METHOD: 3,
  WEIGHT: 4,
  U_THRESH: 5,
  L_THRESH: 6,
  ACTIVE_CONNS: 7,
  INACT_CONNS: 8,
  PERSIST_CONNS: 9,
  STATS: 10,
  ADDR_FAMILY: 11,
  STATS64: 12,
  TUN_TYPE: 13,
  TUN_PORT: 14,
  TUN_FLAGS: 15,
} as const;

/** IPVS_STATS_ATTR_* */
export const StatsAttr = {
  CONNS: 1,
  INPKTS: 2,
  OUTPKTS: 3,
  INBYTES: 4,
  OUTBYTES: 5,
  CPS: 6,
  INPPS: 7,
  OUTPPS: 8,
  INBPS: 9,
  OUTBPS: 10,
  PAD: 11,
} as const;

/** IPVS_INFO_ATTR_* */
export const InfoAttr = {
  VERSION: 1,
  CONN_TAB_SIZE: 2,
} as const;

/** IP_VS_CONN_F_* forwarding methods are the low 3 bits: FORWARD_METHODS (model/ipvs.ts) by index. */
export const CONN_F_FWD_MASK = 0x7;

/** IP_VS_CONN_F_TUNNEL_TYPE_* */
export const TunType = { IPIP: 0, GUE: 1, GRE: 2 } as const;

/** IP_VS_SCHEDNAME_MAXLEN / IP_VS_PENAME_MAXLEN include the terminating NUL. */
export const SCHEDNAME_MAXLEN = 16;
export const PENAME_MAXLEN = 32;

export const AF_INET = 2;
export const AF_INET6 = 10;
export const IPPROTO_TCP = 6;
export const IPPROTO_UDP = 17;
export const IPPROTO_SCTP = 132;
