import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // No I/O, but some are CPU-bound (fuzzing, 50,000 keys): on 2 cores shared with the servers and
          // the integration files (load 10), they took over Vitest's default 5 s.
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/conformance/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          // End-to-end chaos runs of examples/payments (real processes, SIGKILLed and restarted), and the
          // examples run as real processes against the local servers (test/e2e/examples).
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
