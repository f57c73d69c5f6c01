import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { output } from '../../../src/cli/output.js';

/** A stream whose writes are recorded; `fail(code)` emits the error a real one would. */
function fakeStream() {
  const emitter = new EventEmitter();
  const written: string[] = [];
  return {
    written,
    on: emitter.on.bind(emitter),
    write(text: string) {
      written.push(text);
      return true;
    },
    fail(code: string) {
      emitter.emit('error', Object.assign(new Error(`write ${code}`), { code }));
    },
  };
}

describe('output', () => {
  it('stops writing, without failing, once the reader has gone (EPIPE)', () => {
    // Arrange
    const stream = fakeStream();
    const out = output(stream as never);
    out.write('first\n');

    // Act: an unhandled 'error' event would throw here, as it crashed the CLI.
    stream.fail('EPIPE');
    out.write('second\n');

    // Assert
    expect(stream.written).toEqual(['first\n']);
    expect(out.failure).toBeUndefined();
  });

  it('keeps any other write error for the command to report', () => {
    // Arrange
    const stream = fakeStream();
    const out = output(stream as never);

    // Act
    stream.fail('ENOSPC');
    out.write('lost\n');

    // Assert
    expect(stream.written).toEqual([]);
    expect(out.failure).toMatchObject({ code: 'ENOSPC' });
  });
});
