/**
 * CPU time of processes from `/proc` (Linux only; 10 ms resolution), for benchmarks that count what a
 * server such as `redis-server` spent on their rows.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** CPU seconds (user + system) of every process whose command name starts with one of `names`. */
export function processCpu(names: string[]): number {
  let seconds = 0;
  for (const cpu of processCpuByPid(names).values()) seconds += cpu;
  return seconds;
}

// utime + stime (fields 14 and 15 of a `stat` line, counted after the command name, which may hold spaces),
// in seconds: USER_HZ is 100 on Linux.
function statCpu(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds (user + system) of one thread of process `pid` (its main thread: `thread` = `pid`). */
export function threadCpu(pid: number, thread: number): number {
  return statCpu(readFileSync(`/proc/${pid}/task/${thread}/stat`, 'utf8'));
}

/** CPU seconds (user + system) of every thread process `pid` has now. */
export function allThreadsCpu(pid: number): number {
  let seconds = 0;
  for (const thread of readdirSync(`/proc/${pid}/task`)) {
    try {
      seconds += threadCpu(pid, Number(thread));
    } catch {
      // The thread ended while we read.
    }
  }
  return seconds;
}

/** CPU seconds (user + system) of this process. */
export function ownCpu(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

/**
 * CPU seconds (user + system) of each process whose command name starts with one of `names`, by pid: for
 * servers that start and end processes while they are measured (PostgreSQL's backends and autovacuum
 * workers), whose total would drop when one exits. See {@link cpuSince}.
 */
export function processCpuByPid(names: string[]): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (!names.some((n) => name.startsWith(n))) continue;
      byPid.set(Number(pid), statCpu(stat));
    } catch {
      // The process ended while we read.
    }
  }
  return byPid;
}

/**
 * CPU seconds spent between two {@link processCpuByPid} readings by the processes alive at the second one
 * (a process that started in between counts from zero; one that ended in between is not counted).
 */
export function cpuSince(before: Map<number, number>, after: Map<number, number>): number {
  let seconds = 0;
  for (const [pid, cpu] of after) seconds += cpu - (before.get(pid) ?? 0);
  return seconds;
}
