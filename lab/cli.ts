#!/usr/bin/env node
// `npm run lab -- <command>` (node dist/lab/cli.js): the entry point of the lab's commands
// (commands.ts); the process exits with the guest command's exit code.
import { EXIT_VM_FAILURE } from './vm.js';
import { labMain } from './commands.js';

labMain(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (e: unknown) => {
    process.stderr.write(`lab: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
    process.exitCode = EXIT_VM_FAILURE;
  },
);
