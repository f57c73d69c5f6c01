/**
 * Whether an object can be garbage-collected, for tests of what a timer or a cache keeps alive: a full
 * collection on demand, as `--expose-gc` gives it, without the flag on the test runner.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * Collect until `ref`'s target is gone (a WeakRef's target outlives the job that read it last); whether
 * it is.
 * @example
 * expect(await collected(new WeakRef(body))).toBe(true);
 */
export async function collected(ref: WeakRef<object>): Promise<boolean> {
  for (let i = 0; i < 5 && ref.deref() !== undefined; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  return ref.deref() === undefined;
}
