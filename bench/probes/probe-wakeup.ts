// Probe (explaining a missed throughput target by the machine): what waking a sleeping thread costs on
// this machine. Every publish hands its batch to a validation thread that sleeps until a task comes
// (piscina: Atomics.wait / Atomics.notify), writes to Redis, which sleeps in epoll until the command
// comes, and answers a load generator that sleeps the same way; on a VM each such wake-up can cost far
// more than on bare metal. Three ping-pongs between the main thread and one worker thread, each
// ROUND_TRIPS times:
//   - spin: both sides spin on a shared Int32Array (no sleeping, no waking: the floor);
//   - atomics: each side sleeps in Atomics.wait and is woken by Atomics.notify (piscina's default hand-off);
//   - message: each side waits in its event loop for a MessagePort message (piscina `atomics: 'disabled'`).
// For each: wall microseconds per round trip and the process's CPU microseconds per round trip (both
// threads; from process.cpuUsage, user + system).
//
//   npm run build && node dist/bench/probes/probe-wakeup.js [round trips, default 20000]
import { MessageChannel, Worker, isMainThread, parentPort, workerData, type MessagePort } from 'node:worker_threads';

/** The worker's side of one ping-pong, named by `workerData.mode`. */
interface WorkerInput {
  readonly mode: 'spin' | 'atomics' | 'message';
  readonly shared: SharedArrayBuffer;
  readonly roundTrips: number;
  readonly port?: MessagePort;
}

/** Slot 0 holds the turn: odd = the worker's, even = the main thread's. */
function workerSide({ mode, shared, roundTrips, port }: WorkerInput): void {
  const turn = new Int32Array(shared);
  if (mode === 'message' && port !== undefined) {
    let left = roundTrips;
    port.on('message', () => {
      port.postMessage(0);
      if (--left === 0) port.close();
    });
    return;
  }
  for (let i = 0; i < roundTrips; i++) {
    const mine = 2 * i + 1;
    if (mode === 'spin') while (Atomics.load(turn, 0) !== mine);
    else while (Atomics.load(turn, 0) !== mine) Atomics.wait(turn, 0, mine - 1);
    Atomics.store(turn, 0, mine + 1);
    if (mode === 'atomics') Atomics.notify(turn, 0, 1);
  }
}

async function pingPong(mode: WorkerInput['mode'], roundTrips: number): Promise<void> {
  const shared = new SharedArrayBuffer(4);
  const turn = new Int32Array(shared);
  const channel = new MessageChannel();
  const input: WorkerInput = { mode, shared, roundTrips, ...(mode === 'message' ? { port: channel.port2 } : {}) };
  const worker = new Worker(new URL(import.meta.url), { workerData: input, transferList: mode === 'message' ? [channel.port2] : [] });
  await new Promise<void>((resolve) => worker.once('online', () => resolve()));
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  if (mode === 'message') {
    await new Promise<void>((resolve) => {
      let left = roundTrips;
      channel.port1.on('message', () => {
        if (--left === 0) resolve();
        else channel.port1.postMessage(0);
      });
      channel.port1.postMessage(0);
    });
    channel.port1.close();
  } else {
    for (let i = 0; i < roundTrips; i++) {
      Atomics.store(turn, 0, 2 * i + 1);
      if (mode === 'atomics') Atomics.notify(turn, 0, 1);
      const mine = 2 * i + 2;
      if (mode === 'spin') while (Atomics.load(turn, 0) !== mine);
      else while (Atomics.load(turn, 0) !== mine) Atomics.wait(turn, 0, mine - 1);
    }
  }
  const wallUs = (performance.now() - started) * 1000;
  const cpu = process.cpuUsage(cpuBefore);
  await worker.terminate();
  console.log(
    `${mode.padEnd(8)} ${(wallUs / roundTrips).toFixed(1).padStart(7)} µs wall per round trip, ${((cpu.user + cpu.system) / roundTrips).toFixed(1).padStart(7)} µs CPU per round trip (user ${(cpu.user / roundTrips).toFixed(1)}, system ${(cpu.system / roundTrips).toFixed(1)})`,
  );
}

if (isMainThread) {
  const roundTrips = Number(process.argv[2] ?? 20_000);
  if (!Number.isInteger(roundTrips) || roundTrips < 1) throw new Error('round trips must be a positive whole number');
  for (const mode of ['spin', 'atomics', 'message'] as const) await pingPong(mode, roundTrips);
} else {
  workerSide(workerData as WorkerInput);
  parentPort?.unref();
}
