// A stand-in for src/rtnl/address-thread.ts that cannot run: it ends as it starts, exit code 2
// (test/kernel/rtnl.test.ts: the batches of such a thread, and the ones after).
process.exit(2);
