// Numbers of netlink itself (linux/netlink.h) and of the generic netlink controller
// (linux/genetlink.h), shared by IPVS (genl) and rtnetlink. Names follow the headers. pure.

/** Netlink message types (linux/netlink.h). */
export const NLMSG_ERROR = 2;
export const NLMSG_DONE = 3;
export const NLMSG_OVERRUN = 4;

/** Netlink message flags. */
export const NLM_F_REQUEST = 0x1;
export const NLM_F_MULTI = 0x2;
export const NLM_F_ACK = 0x4;
export const NLM_F_DUMP_INTR = 0x10;
export const NLM_F_DUMP = 0x300;
export const NLM_F_EXCL = 0x200;
export const NLM_F_CREATE = 0x400;

/** Netlink attribute type bits. */
export const NLA_F_NESTED = 0x8000;
export const NLA_F_NET_BYTEORDER = 0x4000;
export const NLA_TYPE_MASK = ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER) & 0xffff;

/** Generic netlink controller (linux/genetlink.h). */
export const GENL_ID_CTRL = 0x10;
export const CTRL_CMD_GETFAMILY = 3;
export const CTRL_ATTR_FAMILY_ID = 1;
export const CTRL_ATTR_FAMILY_NAME = 2;
export const CTRL_ATTR_VERSION = 3;

export const NLMSG_HDRLEN = 16;
export const GENL_HDRLEN = 4;
export const NLA_HDRLEN = 4;

/** The netlink protocol of netfilter's subsystems (ctnetlink, ipset), and nfnetlink's header: struct nfgenmsg. */
export const NETLINK_NETFILTER = 12;
export const NFGENMSG_LEN = 4;
