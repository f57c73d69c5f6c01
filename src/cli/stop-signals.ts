/**
 * Stopping a long command cleanly: the first SIGINT (Ctrl-C) or SIGTERM (a cron wrapper's `timeout`, a
 * container stop) asks it to stop after the step in flight, so that it can say what it did; a second one
 * ends the process at once, as if nothing listened.
 * @module
 */
import { constants } from 'node:os';

/** The signals that ask a command to stop. */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

/** A request to stop, once a signal came. */
export interface StopListener {
  /** The signal received, if one was. */
  readonly received: NodeJS.Signals | undefined;
  /** Stop listening: signals kill the process again. */
  dispose(): void;
}

/** Listen for the first SIGINT or SIGTERM until `dispose()`. */
export function listenForStop(): StopListener {
  let received: NodeJS.Signals | undefined;
  const dispose = () => {
    for (const signal of STOP_SIGNALS) process.removeListener(signal, onSignal);
  };
  function onSignal(signal: NodeJS.Signals): void {
    received = signal;
    // The next signal finds no listener: Node's default, ending the process, applies.
    dispose();
  }
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  return {
    get received() {
      return received;
    },
    dispose,
  };
}

/** The exit code shells give a command that `signal` stopped: 128 + its number (SIGINT 130, SIGTERM 143). */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + constants.signals[signal];
}
