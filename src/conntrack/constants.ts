// Numbers of nfnetlink and its conntrack subsystem, ctnetlink, as in the uapi headers
// <linux/netfilter/nfnetlink.h> and <linux/netfilter/nfnetlink_conntrack.h> of Linux 6.1 (the lab
// VM's kernel; these values have not changed since ctnetlink's attribute layout of 2.6.x). Names
// follow the headers. pure.

/** The netlink protocol of netfilter's subsystems (linux/netlink.h), and struct nfgenmsg's size. */
export { NETLINK_NETFILTER, NFGENMSG_LEN } from '../netlink/constants.js';

/** nfnetlink: the subsystem id goes in the high byte of nlmsg_type, the message in the low byte. */
export const NFNL_SUBSYS_CTNETLINK = 1;
export const NFNETLINK_V0 = 0;

/** ctnetlink messages (enum cntl_msg_types). */
export const IPCTNL_MSG_CT_NEW = 0;
export const IPCTNL_MSG_CT_GET = 1;
export const IPCTNL_MSG_CT_DELETE = 2;

/** Top-level attributes of a conntrack entry (enum ctattr_type). */
export const CTA_TUPLE_ORIG = 1;
export const CTA_TUPLE_REPLY = 2;
export const CTA_STATUS = 3;
export const CTA_TIMEOUT = 7;
export const CTA_MARK = 8;
export const CTA_ID = 12;
export const CTA_ZONE = 18;
/** A dump's kernel-side filter (Linux >= 5.8, ctnetlink_alloc_filter); older kernels ignore it. */
export const CTA_FILTER = 25;

/** Inside CTA_FILTER (enum ctattr_filter): u32 bit sets, host byte order (nla_get_u32). */
export const CTA_FILTER_ORIG_FLAGS = 1;
export const CTA_FILTER_REPLY_FLAGS = 2;
/**
 * The filter flag "match the original tuple's protocol number": net/netfilter/nf_internals.h
 * (not in uapi, but ABI: libnetfilter_conntrack sends the same bit for `conntrack -L -p udp`).
 */
export const CTA_FILTER_F_CTA_PROTO_NUM = 1 << 3;

/** Inside a tuple (enum ctattr_tuple). */
export const CTA_TUPLE_IP = 1;
export const CTA_TUPLE_PROTO = 2;

/** Inside CTA_TUPLE_IP (enum ctattr_ip). */
export const CTA_IP_V4_SRC = 1;
export const CTA_IP_V4_DST = 2;
export const CTA_IP_V6_SRC = 3;
export const CTA_IP_V6_DST = 4;

/** Inside CTA_TUPLE_PROTO (enum ctattr_l4proto). */
export const CTA_PROTO_NUM = 1;
export const CTA_PROTO_SRC_PORT = 2;
export const CTA_PROTO_DST_PORT = 3;

/** Address families as nfgenmsg carries them (linux/socket.h). */
export const AF_INET = 2;
export const AF_INET6 = 10;

/** IP protocol numbers (netinet/in.h). */
export const IPPROTO_TCP = 6;
export const IPPROTO_UDP = 17;
export const IPPROTO_SCTP = 132;
