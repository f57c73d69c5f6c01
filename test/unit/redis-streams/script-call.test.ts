/**
 * How the Redis Streams consumer sends its scripts (script-call.ts), against a fake client: `EVALSHA`, the
 * source only after `NOSCRIPT` (an empty script cache) or where `EVALSHA` itself is refused, and every other
 * error (a refused `EVAL`, an error inside the script) passed on as is, for the consumer to judge.
 */
import { describe, expect, it } from 'vitest';
import { loadScript } from '../../../src/redis/script-runner.js';
import type { RedisStreamsClient } from '../../../src/redis-streams/index.js';
import { scriptCaller } from '../../../src/redis-streams/script-call.js';

const script = loadScript({ source: 'return ARGV[1]', numberOfKeys: 1 });

/** A client answering each command with `answer(args)`, recording what was sent. */
function fakeClient(answer: (args: string[]) => unknown) {
  const sent: string[][] = [];
  const client: RedisStreamsClient = {
    sendCommand: async (args) => {
      const text = args.map(String);
      sent.push(text);
      return answer(text);
    },
  };
  return { client, sent };
}

describe('Redis Streams consumer: script calls', () => {
  it('sends EVALSHA with the SHA1, not the source, when the script is cached', async () => {
    // Arrange
    const { client, sent } = fakeClient(() => 'ok');
    // Act
    const reply = await scriptCaller(client)(script, ['k'], ['a']);
    // Assert
    expect(reply).toBe('ok');
    expect(sent).toEqual([['EVALSHA', script.sha, '1', 'k', 'a']]);
  });

  it('sends the source with EVAL after NOSCRIPT, and EVALSHA again on the next call', async () => {
    // Arrange: an empty cache once (a restart, a failover, SCRIPT FLUSH).
    let flushed = true;
    const { client, sent } = fakeClient((args) => {
      if (args[0] === 'EVALSHA' && flushed) {
        flushed = false;
        throw new Error('NOSCRIPT No matching script. Please use EVAL.');
      }
      return 'ok';
    });
    const call = scriptCaller(client);
    // Act
    await call(script, ['k'], ['a']);
    await call(script, ['k'], ['b']);
    // Assert
    expect(sent).toEqual([
      ['EVALSHA', script.sha, '1', 'k', 'a'],
      ['EVAL', script.source, '1', 'k', 'a'],
      ['EVALSHA', script.sha, '1', 'k', 'b'],
    ]);
  });

  it.each([
    ["NOPERM User w has no permissions to run the 'evalsha' command"],
    ["ERR unknown command 'EVALSHA', with args beginning with: "],
    ['ERR unknown command `EVALSHA`, with args beginning with: `0123`, '],
  ])('goes to EVAL, and stays there, where EVALSHA is refused: %s', async (refusal) => {
    // Arrange
    const { client, sent } = fakeClient((args) => {
      if (args[0] === 'EVALSHA') throw new Error(refusal);
      return 'ok';
    });
    const call = scriptCaller(client);
    // Act
    await call(script, ['k'], ['a']);
    await call(script, ['k'], ['b']);
    // Assert: one round trip per call once refused.
    expect(sent.map((args) => args[0])).toEqual(['EVALSHA', 'EVAL', 'EVAL']);
  });

  it("passes on EVAL's refusal and an error inside the script, unchanged", async () => {
    // Arrange
    const refused = fakeClient((args) => {
      throw new Error(
        `NOPERM User w has no permissions to run the '${args[0]?.toLowerCase()}' command`,
      );
    });
    const failing = fakeClient(() => {
      throw new Error('WRONGTYPE Operation against a key holding the wrong kind of value');
    });
    // Act & Assert: the consumer's isScriptRefused judges the first; the second is the call's failure.
    await expect(scriptCaller(refused.client)(script, ['k'], [])).rejects.toThrow("'eval' command");
    await expect(scriptCaller(failing.client)(script, ['k'], [])).rejects.toThrow('WRONGTYPE');
    expect(failing.sent.map((args) => args[0])).toEqual(['EVALSHA']);
  });
});
