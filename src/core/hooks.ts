/**
 * Observation points of the engine. Metrics, logs and traces sit on these; a hook that throws is ignored so
 * observability can never change an outcome.
 * @module
 */

/** What every hook receives. Only the hashed storage key is given, never the raw client key. */
export interface HookEvent {
  /** The engine's namespace. */
  namespace: string;
  /** The storage key (SHA-256 hex of namespace, scope and key). */
  storageKey: string;
}

/** Callbacks for each engine event; all optional. */
export interface IdempotencyHooks {
  /** `fn` ran and its outcome was stored. */
  onExecuted?(event: HookEvent & { token: number; attempt: number; durationMs: number }): void;
  /** A stored outcome was replayed. `fromCache` is true when no store round trip was needed. */
  onReplayed?(event: HookEvent & { fromCache: boolean }): void;
  /** Another attempt holds the key (`in_progress`). */
  onConflict?(event: HookEvent & { retryAfterMs: number }): void;
  /** The key was reused with a different fingerprint. */
  onMismatch?(event: HookEvent): void;
  /** An expired claim was taken over (`attempt` > 1). */
  onTakeover?(event: HookEvent & { token: number; attempt: number }): void;
  /** This worker lost its lease; its completion was (or will be) fenced out. */
  onLeaseLost?(event: HookEvent & { token: number }): void;
  /** A store call failed. `operation` names the store method. */
  onStoreError?(event: HookEvent & { operation: string; error: unknown }): void;
  /** The store failed and the call ran unprotected because `failOpen` was set. */
  onFailOpen?(event: HookEvent & { error: unknown }): void;
}

/** Call a hook, swallowing anything it throws. */
export function emit<K extends keyof IdempotencyHooks>(
  hooks: IdempotencyHooks,
  name: K,
  event: Parameters<NonNullable<IdempotencyHooks[K]>>[0],
): void {
  const hook = hooks[name] as ((e: typeof event) => void) | undefined;
  if (hook === undefined) return;
  try {
    hook(event);
  } catch {
    // Observability must never change an outcome.
  }
}
