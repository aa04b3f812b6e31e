// IPVS generic netlink requests: one per op of a plan, the dumps, info, timeouts, zero and flush,
// and their encoding as one netlink message. pure: values in, bytes out; attributes come from
// attrs.ts, the message header from src/netlink/framing.ts.
import type { IpvsOp, IpvsTimeouts, VirtualServer } from '../model/ipvs.js';
import { formatOp, virtualServerKey } from '../model/ipvs.js';
import { Cmd, CmdAttr, IPVS_GENL_VERSION } from './constants.js';
import { NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST } from '../netlink/constants.js';
import { destAttrSize, encodeDest, encodeService, serviceAttrSize, writeDestAttr, writeServiceAttr } from './attrs.js';
import { GENL_HDRLEN, NLMSG_HDRLEN } from '../netlink/constants.js';
import { NlaWriter, encodeGenlMessage, nla, nlaNested, u32 } from '../netlink/framing.js';
import type { OutgoingWriter } from '../netlink/socket.js';

/** A request ready to be numbered and sent: its bytes are produced by `encodeRequest`. */
export interface IpvsRequest {
  /** Its one-line form, used in errors. */
  what: string;
  cmd: number;
  dump: boolean;
  attrs: Buffer[];
}

/** A plan op's request: its one-line form is made only when read (an error names it). */
class OpRequest implements IpvsRequest {
  private text: string | undefined;
  readonly dump = false;
  constructor(private readonly op: IpvsOp, readonly cmd: number, readonly attrs: Buffer[]) {}
  get what(): string {
    return (this.text ??= formatOp(this.op));
  }
}

/**
 * The request for one op of a plan. Throws IpvsError on arguments that cannot be encoded. Its
 * `what` (formatOp) is computed when first read. `keys`, shared by the ops of one batch, holds the
 * identity-only SERVICE attribute per virtual server object, so the destinations of one virtual
 * server encode it once (a plan's ops share their VirtualServer object).
 */
export function opRequest(op: IpvsOp, keys?: Map<VirtualServer, Buffer>): IpvsRequest {
  const what = () => formatOp(op);
  switch (op.kind) {
    case 'add-service':
      return new OpRequest(op, Cmd.NEW_SERVICE, [encodeService(what, op.vs, true)]);
    case 'update-service':
      return new OpRequest(op, Cmd.SET_SERVICE, [encodeService(what, op.vs, true)]);
    case 'delete-service':
      return new OpRequest(op, Cmd.DEL_SERVICE, [encodeService(what, op.vs, false)]);
  }
  let key = keys?.get(op.vs);
  if (!key) {
    key = encodeService(what, op.vs, false);
    keys?.set(op.vs, key);
  }
  switch (op.kind) {
    case 'add-dest':
      return new OpRequest(op, Cmd.NEW_DEST, [key, encodeDest(what, op.rs, true)]);
    case 'update-dest':
      return new OpRequest(op, Cmd.SET_DEST, [key, encodeDest(what, op.rs, true)]);
    case 'delete-dest':
      return new OpRequest(op, Cmd.DEL_DEST, [key, encodeDest(what, op.rs, false)]);
  }
}

const OP_CMD: Record<IpvsOp['kind'], number> = {
  'add-service': Cmd.NEW_SERVICE, 'update-service': Cmd.SET_SERVICE, 'delete-service': Cmd.DEL_SERVICE,
  'add-dest': Cmd.NEW_DEST, 'update-dest': Cmd.SET_DEST, 'delete-dest': Cmd.DEL_DEST,
};

/**
 * One op's message as the socket takes it: sized now, written straight into the datagram that
 * carries it (no buffer, attribute array or request object per op: at 400 000 ops those were most
 * of the client's time, in the garbage collector), where its bytes are zero. The same bytes as
 * encodeRequest(opRequest(op)). Writing throws IpvsError only for an address checkOp refuses first.
 */
export function opMessage(familyId: number, op: IpvsOp, seq: number, port: number): OutgoingWriter {
  const fullService = op.kind === 'add-service' || op.kind === 'update-service';
  const rs = op.kind === 'add-dest' || op.kind === 'update-dest' || op.kind === 'delete-dest' ? op.rs : undefined;
  const fullDest = op.kind !== 'delete-dest';
  const size = NLMSG_HDRLEN + GENL_HDRLEN + serviceAttrSize(op.vs, fullService) + (rs ? destAttrSize(rs, fullDest) : 0);
  return {
    seq, dump: false, size,
    write(buf: Buffer, at: number): void {
      const what = () => formatOp(op);
      const w = new NlaWriter(size, buf, at, true); // the datagram is zero there (OutgoingWriter)
      w.headers(size, familyId, NLM_F_REQUEST | NLM_F_ACK, seq, port, OP_CMD[op.kind], IPVS_GENL_VERSION);
      writeServiceAttr(w, what, op.vs, fullService);
      if (rs) writeDestAttr(w, what, rs, fullDest);
      w.done();
    },
  };
}

/** GET_SERVICE dump: an empty nested SERVICE attribute, as ipvsadm sends. */
export function listServicesRequest(): IpvsRequest {
  return { what: 'dump-services', cmd: Cmd.GET_SERVICE, dump: true, attrs: [nlaNested(CmdAttr.SERVICE, [])] };
}

/** GET_SERVICE of one virtual server's key (a lookup, not a dump: ESRCH when there is none). */
export function getServiceRequest(vs: VirtualServer): IpvsRequest {
  const what = `get-service ${virtualServerKey(vs)}`;
  return { what, cmd: Cmd.GET_SERVICE, dump: false, attrs: [encodeService(what, vs, false)] };
}

/** GET_DEST dump of one virtual server. */
export function listDestsRequest(vs: VirtualServer): IpvsRequest {
  const what = `dump-dests ${virtualServerKey(vs)}`;
  return { what, cmd: Cmd.GET_DEST, dump: true, attrs: [encodeService(what, vs, false)] };
}

/** GET_INFO. */
export function infoRequest(): IpvsRequest {
  return { what: 'get-info', cmd: Cmd.GET_INFO, dump: false, attrs: [] };
}

/** GET_CONFIG. */
export function getTimeoutsRequest(): IpvsRequest {
  return { what: 'get-config', cmd: Cmd.GET_CONFIG, dump: false, attrs: [] };
}

/** SET_CONFIG; a 0 timeout leaves the kernel's value unchanged. */
export function setTimeoutsRequest(t: IpvsTimeouts): IpvsRequest {
  return {
    what: `set-config tcp=${t.tcp} tcpfin=${t.tcpFin} udp=${t.udp}`,
    cmd: Cmd.SET_CONFIG,
    dump: false,
    attrs: [nla(CmdAttr.TIMEOUT_TCP, u32(t.tcp)), nla(CmdAttr.TIMEOUT_TCP_FIN, u32(t.tcpFin)),
      nla(CmdAttr.TIMEOUT_UDP, u32(t.udp))],
  };
}

/** ZERO of one virtual server's counters, or of all. */
export function zeroRequest(vs?: VirtualServer): IpvsRequest {
  const what = vs ? `zero ${virtualServerKey(vs)}` : 'zero';
  return { what, cmd: Cmd.ZERO, dump: false, attrs: vs ? [encodeService(what, vs, false)] : [] };
}

/** FLUSH: every virtual server of the network namespace. */
export function flushRequest(): IpvsRequest {
  return { what: 'flush', cmd: Cmd.FLUSH, dump: false, attrs: [] };
}

/** Encodes a request as one netlink message for the family id, with REQUEST|ACK (and DUMP). */
export function encodeRequest(familyId: number, req: IpvsRequest, seq: number, port: number): Buffer {
  return encodeGenlMessage(familyId, req.cmd, IPVS_GENL_VERSION,
    NLM_F_REQUEST | NLM_F_ACK | (req.dump ? NLM_F_DUMP : 0), seq, port, req.attrs);
}
