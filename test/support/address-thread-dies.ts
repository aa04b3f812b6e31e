// A stand-in for the address job (src/rtnl/address-thread.ts) that cannot run: imported on the
// helper thread, it ends that thread as it loads, exit code 2 (test/kernel/rtnl.test.ts: the
// batches of such a thread, and the ones after).
process.exit(2);
