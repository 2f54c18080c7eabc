// Builds dist/ with tsc (`npm run build`), or only when it is stale (`node scripts/build.mjs --if-stale`,
// run by `prestart` and `precluster`). Plain JavaScript: it runs before dist/ exists.
//
// Several `npm start` in one checkout must not race on the build, and a running node must
// never load a half-written file. So:
// - one build at a time per checkout: a lock file `.build.lock` created exclusively (`wx`) holding the
//   builder's pid; a lock whose pid is gone (a build killed midway) is stale and taken over; the others
//   wait for it, then look again whether dist/ is still stale (usually not: they do not build again);
// - tsc writes into `.build-tmp/`, and each file is then renamed into dist/ (a rename replaces a file
//   atomically), so dist/ only ever holds whole files; a failed tsc leaves dist/ as it was;
// - stale = some input (a file or directory under src, workers, bench, scripts, ui, a tsconfig, or
//   package-lock.json: the console's vendored libraries) is newer than dist/.build-stamp, whose mtime is
//   the time the last successful build started.
// - the console goes to dist/ui: ui/src compiled by tsc (ui/tsconfig.json) into ui/app,
//   ui/static copied as is, and the browser builds of its libraries copied from node_modules into
//   ui/vendor (the page's import map names them): nothing is fetched at run time. dist/ui is replaced
//   as a whole (two renames), so files removed from ui/ do not linger in it.
// - the API reference page's script (the dev dependency redoc's standalone bundle) goes to
//   dist/docs-assets, served at /docs (src/http/routes/api-docs.ts); none is fetched at run time.
import { spawnSync } from 'node:child_process';
import { closeSync, copyFileSync, cpSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const stamp = path.join(dist, '.build-stamp');
const lockFile = path.join(root, '.build.lock');
const staging = path.join(root, '.build-tmp');
const inputs = ['src', 'workers', 'bench', 'scripts', 'ui', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];
/** The console's libraries: the browser ES module builds copied into dist/ui/vendor, with their licenses. */
const vendored = [
  ['preact/dist/preact.module.js', 'preact.module.js'],
  ['preact/hooks/dist/hooks.module.js', 'preact-hooks.module.js'],
  ['preact/LICENSE', 'preact.LICENSE.txt'],
  ['htm/dist/htm.module.js', 'htm.module.js'],
  ['htm/LICENSE', 'htm.LICENSE.txt'],
  ['uplot/dist/uPlot.esm.js', 'uplot.esm.js'],
  ['uplot/dist/uPlot.min.css', 'uplot.min.css'],
  ['uplot/LICENSE', 'uplot.LICENSE.txt'],
];
/** The API reference page's script (Redoc's standalone bundle, served by the node itself) and license, copied into dist/docs-assets. */
const referenceDocs = [
  ['redoc/bundles/redoc.standalone.js', 'redoc.standalone.js'],
  ['redoc/LICENSE', 'redoc.LICENSE.txt'],
];

/** Newest mtime (ms) of `entry` and, for a directory, of everything below it (skipping bench/.tmp). */
function newestMtime(entry) {
  if (!existsSync(entry) || entry === path.join(root, 'bench', '.tmp')) return 0;
  const stat = statSync(entry);
  let newest = stat.mtimeMs;
  if (stat.isDirectory()) for (const name of readdirSync(entry)) newest = Math.max(newest, newestMtime(path.join(entry, name)));
  return newest;
}

/** True when dist/ lacks a stamp or an input changed after the stamped build started. */
function stale() {
  if (!existsSync(stamp)) return true;
  const built = statSync(stamp).mtimeMs;
  return inputs.some((input) => newestMtime(path.join(root, input)) > built);
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/** The lock holder's pid as written, '' while it is being written, undefined when there is no lock. */
function readLock() {
  try {
    return readFileSync(lockFile, 'utf8').trim();
  } catch (err) {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  }
}

function removeLock() {
  rmSync(lockFile, { force: true });
}

/** Takes the build lock, waiting while a live process holds it and taking over one whose process is gone. */
async function lock() {
  let told = false;
  for (;;) {
    try {
      const fd = openSync(lockFile, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
    }
    const holder = readLock();
    if (holder === undefined) continue; // released meanwhile
    if (holder === '' || alive(Number(holder))) {
      // Held (or being written by its new holder, for a moment): wait for its release.
      if (!told && holder !== '') process.stderr.write(`build: waiting for the build of process ${holder}\n`);
      told ||= holder !== '';
      await sleep(100);
      if (holder === '' && readLock() === '') removeLock(); // still empty: its writer died before writing
      continue;
    }
    // Stale: its builder is gone (killed midway). Remove it unless another waiter took it over meanwhile.
    if (readLock() === holder) removeLock();
  }
}

function unlock() {
  if (readLock() === String(process.pid)) removeLock();
}

/** Moves every file under `from` to the same place under `to`, each with one atomic rename. */
function install(from, to) {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) install(source, target);
    else renameSync(source, target);
  }
}

/**
 * Builds the console into `.build-tmp/ui`: ui/src compiled with tsc (ui/tsconfig.json) into `app/`,
 * ui/static copied, the vendored libraries copied into `vendor/`. @returns 0, or tsc's exit status
 */
function buildConsole(tsc) {
  const out = path.join(staging, 'ui');
  const result = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'ui', 'tsconfig.json'), '--outDir', path.join(out, 'app')], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) return result.status ?? 1;
  cpSync(path.join(root, 'ui', 'static'), out, { recursive: true });
  mkdirSync(path.join(out, 'vendor'), { recursive: true });
  // Direct dependencies: npm installs them at the top of node_modules.
  for (const [from, to] of vendored) copyFileSync(path.join(root, 'node_modules', from), path.join(out, 'vendor', to));
  return 0;
}

async function main() {
  const ifStale = process.argv.includes('--if-stale');
  if (ifStale && !stale()) return 0;
  const release = () => unlock();
  process.once('exit', release);
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143], ['SIGHUP', 129]]) process.once(signal, () => process.exit(code));
  await lock();
  if (ifStale && !stale()) return 0; // built by another start while this one waited
  const started = new Date();
  rmSync(staging, { recursive: true, force: true }); // what a killed build left
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const result = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', staging], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) {
    rmSync(staging, { recursive: true, force: true });
    process.stderr.write(`build: tsc failed (${result.signal ?? `exit ${String(result.status)}`}); dist/ is unchanged\n`);
    return result.status ?? 1;
  }
  const console = buildConsole(tsc);
  if (console !== 0) {
    rmSync(staging, { recursive: true, force: true });
    process.stderr.write('build: the console (ui/) did not build; dist/ is unchanged\n');
    return console;
  }
  mkdirSync(path.join(staging, 'docs-assets'), { recursive: true });
  for (const [from, to] of referenceDocs) copyFileSync(path.join(root, 'node_modules', from), path.join(staging, 'docs-assets', to));
  const ui = path.join(dist, 'ui');
  const oldUi = path.join(dist, '.ui-old');
  rmSync(oldUi, { recursive: true, force: true });
  if (existsSync(ui)) renameSync(ui, oldUi);
  mkdirSync(dist, { recursive: true });
  renameSync(path.join(staging, 'ui'), ui);
  rmSync(oldUi, { recursive: true, force: true });
  install(staging, dist);
  rmSync(staging, { recursive: true, force: true });
  writeFileSync(stamp, `${started.toISOString()}\n`);
  utimesSync(stamp, started, started);
  process.stderr.write(`build: built dist/ in ${((Date.now() - started.getTime()) / 1000).toFixed(1)} s\n`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`build: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
