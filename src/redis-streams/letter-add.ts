/**
 * The `XADD` that adds a letter to the dead-letter stream, bounded when `deadLetterMaxLen` is set
 * (`MAXLEN ~ n`): every path that writes one (the dead-letter script's fallback, the letters of entries
 * deleted while pending) trims the stream as the script does, so that no path lets it grow past the bound.
 * @module
 */
import type { ResolvedStreamsOptions } from './consumer-options.js';
import type { CommandArgument } from './redis-client.js';

/** The `XADD` of a letter of `fields` to the dead-letter stream of `options`. */
export function letterAdd(
  options: Pick<ResolvedStreamsOptions, 'deadLetterStream' | 'deadLetterMaxLen'>,
  fields: readonly CommandArgument[],
): CommandArgument[] {
  const { deadLetterStream, deadLetterMaxLen } = options;
  // Approximate (`~`): Redis drops whole nodes of the oldest letters, cheap at every write; an exact
  // bound would cut into a node at each one.
  const bound = deadLetterMaxLen === undefined ? [] : ['MAXLEN', '~', String(deadLetterMaxLen)];
  return ['XADD', deadLetterStream, ...bound, '*', ...fields];
}

/** The dead-letter script's bound argument (scripts/dead-letter-2.lua): `''` for none. */
export function letterBound(options: Pick<ResolvedStreamsOptions, 'deadLetterMaxLen'>): string {
  return options.deadLetterMaxLen === undefined ? '' : String(options.deadLetterMaxLen);
}
