/**
 * CPU time of processes from `/proc` (Linux only; 10 ms resolution), for benchmarks that count what a
 * server such as `redis-server` spent on their rows.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** CPU seconds (user + system) of every process whose command name starts with one of `names`. */
export function processCpu(names: string[]): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (!names.some((n) => name.startsWith(n))) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
    } catch {
      // The process ended while we read.
    }
  }
  return ticks / 100; // USER_HZ is 100 on Linux
}

/** CPU seconds (user + system) of this process. */
export function ownCpu(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}
