#!/usr/bin/env node
/**
 * Entry of the `broker` command line (`bin` of package.json; `npm run -s broker -- …` in a checkout,
 * after `npm run build`). Runs the command line and exits with its code once stdout is flushed.
 */
import { runCli } from './program.js';

const code = await runCli(process.argv.slice(2));
process.stdout.write('', () => process.exit(code));
