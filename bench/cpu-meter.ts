/**
 * CPU accounting for the benchmarks: per process and per thread from Linux /proc (utime + stime), the
 * bench process itself, and what the rest of the machine used meanwhile.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime in clock ticks per thread id of a process (Linux /proc); empty elsewhere or after exit. */
function threadTicks(pid: number): Map<number, number> {
  const ticks = new Map<number, number>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return ticks;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
      ticks.set(Number(tid), Number(fields[11]) + Number(fields[12]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return ticks;
}

/** Busy and steal ticks of the whole machine (first line of /proc/stat); zeros elsewhere. */
function machineTicks(): { busy: number; steal: number } {
  try {
    const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
    return { busy: user + nice + system + irq + softirq, steal };
  } catch {
    return { busy: 0, steal: 0 };
  }
}

/** CPU use over an interval, in % of one core (the machine's total is 100 × cores). */
export interface CpuUse {
  /** Per label: for a process measured `split`, `<label> main thread` and `<label> other threads`. */
  readonly byLabel: Readonly<Record<string, number>>;
  /** Length of the measured interval in seconds (CPU seconds of a label = its % / 100 × this). */
  readonly seconds: number;
}

/** Measures CPU of processes (by pid) and of this process (the load generator) over an interval. */
export class CpuMeter {
  private startTicks = new Map<string, Map<number, number>>();
  private startSelf: NodeJS.CpuUsage = process.cpuUsage();
  private startedAt = 0;
  private startMachine = machineTicks();

  /**
   * @param processes label → pid; `split: true` separates the main thread (tid = pid) from the other
   *   threads (for a Node process: worker threads, GC and libuv helpers)
   */
  constructor(private readonly processes: readonly { label: string; pid: number; split?: boolean }[]) {}

  start(): void {
    this.startedAt = performance.now();
    this.startSelf = process.cpuUsage();
    this.startMachine = machineTicks();
    this.startTicks = new Map(this.processes.map((p) => [p.label, threadTicks(p.pid)]));
  }

  stop(): CpuUse {
    const seconds = (performance.now() - this.startedAt) / 1000;
    const percent = (ticks: number) => (ticks / CLOCK_TICKS / seconds) * 100;
    const byLabel: Record<string, number> = {};
    for (const p of this.processes) {
      const before = this.startTicks.get(p.label) ?? new Map<number, number>();
      let main = 0;
      let others = 0;
      for (const [tid, now] of threadTicks(p.pid)) {
        const used = now - (before.get(tid) ?? 0);
        if (tid === p.pid) main += used;
        else others += used;
      }
      if (p.split) {
        byLabel[`${p.label} main thread`] = percent(main);
        byLabel[`${p.label} other threads`] = percent(others);
      } else byLabel[p.label] = percent(main + others);
    }
    const self = process.cpuUsage(this.startSelf);
    byLabel['load generator (bench process)'] = ((self.user + self.system) / 1e6 / seconds) * 100;
    // Whatever else ran on the machine meanwhile (should be ~0: a busy neighbour skews every figure).
    const machine = machineTicks();
    const measured = Object.values(byLabel).reduce((sum, v) => sum + v, 0);
    byLabel['other processes'] = Math.max(0, percent(machine.busy - this.startMachine.busy) - measured);
    if (machine.steal > this.startMachine.steal) byLabel['stolen by the hypervisor'] = percent(machine.steal - this.startMachine.steal);
    return { byLabel, seconds };
  }
}

