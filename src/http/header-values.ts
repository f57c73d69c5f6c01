/**
 * A stored response's headers as a framework sets them: one call per name, with every value of a name
 * that repeats (two `Link` lines) together. Setting them one pair at a time would keep only a repeated
 * name's last value (`setHeader`), or append the stored value to one a hook had already set (Fastify's
 * `reply.header` on `Cache-Control`, sent twice on a replay).
 * @module
 */

/**
 * Call `set` once per header name of `headers`, in the order of the name's first pair, with its value, or
 * its values in order when the name repeats.
 */
export function eachHeaderName(
  headers: ReadonlyArray<readonly [string, string]>,
  set: (name: string, value: string | string[]) => void,
): void {
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i]!;
    if (seenBefore(headers, name, i)) continue; // set with its first value
    let values: string[] | undefined;
    for (let j = i + 1; j < headers.length; j++) {
      const [other, more] = headers[j]!;
      if (other !== name) continue;
      values ??= [value];
      values.push(more);
    }
    set(name, values ?? value);
  }
}

// Whether `name` is among the pairs before index `i`.
function seenBefore(headers: ReadonlyArray<readonly [string, string]>, name: string, i: number) {
  for (let j = 0; j < i; j++) if (headers[j]![0] === name) return true;
  return false;
}
