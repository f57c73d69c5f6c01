/**
 * The outbox API plus an error guard, re-exported for the PostgreSQL tests.
 * @module
 */
import { isInvalidOptionsError } from '../../../src/core/errors.js';

export * from '../../../src/outbox/index.js';

/** True for an `InvalidOptionsError` (used with `rejects.toSatisfy`). */
export const isInvalidOptionsErrorLike = (error: unknown): boolean => isInvalidOptionsError(error);
