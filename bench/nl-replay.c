/*
 * The kernel floor of `npm run bench` (bench/replay.ts): replays recorded netlink messages with as
 * little userspace work as there can be, and times only that. Built on the host by bench/run.ts
 * (gcc -O2) and run in the lab guest, which sees the host's / and the project over 9p.
 *
 *   nl-replay PROTOCOL FILE [PER_DATAGRAM]
 *
 * FILE holds the messages exactly as the operator sent them (nlmsghdr first, each padded to 4
 * bytes, their flags as sent). They are read into memory before the clock starts; then
 * PER_DATAGRAM messages (default 1024) go in one sendmsg(), which the kernel processes in order
 * inside the call, queueing an NLMSG_ERROR for each message that asks for an ACK (NLM_F_ACK) or
 * fails; those are read with recvmmsg() (many per call) before the next datagram, since the kernel
 * drops a reply that finds the receive buffer full (ENOBUFS). Prints one JSON line: messages,
 * datagrams, ACKs, ms, recv calls, errors (and the first errno). Exit 0 unless the socket failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/netlink.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define VLEN 256
#define SLOT 8192

static char slots[VLEN][SLOT];

static double now_ms(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int die(const char *what) {
	fprintf(stderr, "nl-replay: %s: %s\n", what, strerror(errno));
	return 1;
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: nl-replay PROTOCOL FILE [PER_DATAGRAM]\n");
		return 2;
	}
	int proto = atoi(argv[1]);
	long per = argc > 3 ? atol(argv[3]) : 1024;
	if (per < 1) per = 1;

	FILE *f = fopen(argv[2], "rb");
	if (!f) return die(argv[2]);
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc(size > 0 ? size : 1);
	if (!buf || fread(buf, 1, size, f) != (size_t)size) return die("read");
	fclose(f);

	/* Message offsets, checked once: a torn file is an error, not a replay. */
	long n = 0, cap = 1024;
	long *off = malloc(sizeof(long) * (cap + 1));
	for (long p = 0; p < size;) {
		if (p + (long)sizeof(struct nlmsghdr) > size) { fprintf(stderr, "nl-replay: torn message at %ld\n", p); return 2; }
		uint32_t len = ((struct nlmsghdr *)(buf + p))->nlmsg_len;
		if (len < sizeof(struct nlmsghdr) || p + (long)len > size) { fprintf(stderr, "nl-replay: bad length %u at %ld\n", len, p); return 2; }
		if (n == cap) off = realloc(off, sizeof(long) * ((cap *= 2) + 1));
		off[n++] = p;
		p += NLMSG_ALIGN(len);
	}
	off[n] = size;

	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto);
	if (fd < 0) return die("socket");
	/* Root may exceed rmem_max/wmem_max: room for a whole datagram and all of its ACKs. */
	int big = 64 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big)) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big)) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };

	struct mmsghdr msgs[VLEN];
	struct iovec iov[VLEN];
	for (int i = 0; i < VLEN; i++) {
		iov[i].iov_base = slots[i];
		iov[i].iov_len = SLOT;
		memset(&msgs[i], 0, sizeof msgs[i]);
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}

	long datagrams = 0, recvCalls = 0, errors = 0, truncated = 0, acked = 0;
	int firstErrno = 0;
	double t0 = now_ms();
	for (long i = 0; i < n; i += per) {
		long k = n - i < per ? n - i : per;
		size_t bytes = off[i + k] - off[i];
		long want = 0; /* the ACKs this datagram asks for */
		for (long m = i; m < i + k; m++) if (((struct nlmsghdr *)(buf + off[m]))->nlmsg_flags & NLM_F_ACK) want++;
		acked += want;
		ssize_t s;
		do s = sendto(fd, buf + off[i], bytes, 0, (struct sockaddr *)&kernel, sizeof kernel); while (s < 0 && errno == EINTR);
		if (s < 0) return die("sendto");
		datagrams++;
		for (long acks = 0; acks < want;) {
			int r = recvmmsg(fd, msgs, VLEN, MSG_WAITFORONE, NULL);
			if (r < 0) {
				if (errno == EINTR) continue;
				return die("recvmmsg");
			}
			recvCalls++;
			for (int j = 0; j < r; j++) {
				if (msgs[j].msg_hdr.msg_flags & MSG_TRUNC) truncated++;
				int len = msgs[j].msg_len;
				for (struct nlmsghdr *h = (struct nlmsghdr *)slots[j]; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
					if (h->nlmsg_type != NLMSG_ERROR) continue; /* a reply's data (GET_INFO), then its ACK */
					struct nlmsgerr *e = NLMSG_DATA(h);
					if (!e->error) {
						acks++;
						continue;
					}
					/* A failure: the ACK of a message that asked for one, or the only answer of one that did not. */
					if (e->msg.nlmsg_flags & NLM_F_ACK) acks++;
					if (!errors) firstErrno = -e->error;
					errors++;
				}
			}
		}
	}
	double ms = now_ms() - t0;
	printf("{\"messages\":%ld,\"bytes\":%ld,\"perDatagram\":%ld,\"datagrams\":%ld,\"acks\":%ld,\"recvCalls\":%ld,\"ms\":%.3f,\"errors\":%ld,\"firstErrno\":%d,\"truncated\":%ld}\n",
		n, size, per, datagrams, acked, recvCalls, ms, errors, firstErrno, truncated);
	return 0;
}
