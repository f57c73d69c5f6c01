/**
 * Loading a store's driver (an optional peer dependency) at run time, only when the command line names
 * that store, so the CLI never needs the drivers of the stores it is not pointed at.
 * @module
 */

/** The driver is not installed (as opposed to installed and failing to load). */
export class MissingPeerError extends Error {
  constructor(
    readonly packageName: string,
    options?: ErrorOptions,
  ) {
    super(`the '${packageName}' package is not installed`, options);
    this.name = 'MissingPeerError';
  }
}

/**
 * Import `name`: its default export when it has one (a CommonJS module's `module.exports`), else its
 * namespace.
 * @throws MissingPeerError when it is not installed; any other error as it is.
 */
export async function importPeer<T>(name: string): Promise<T> {
  let mod: { default?: T } & T;
  try {
    mod = (await import(name)) as { default?: T } & T;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new MissingPeerError(name, { cause: error });
    }
    throw error;
  }
  return (mod.default ?? mod) as T;
}

/** Import `name`, or fail with the install command (`purpose` names the store that needs it). */
export async function peer<T>(name: string, purpose: string): Promise<T> {
  try {
    return await importPeer<T>(name);
  } catch (error) {
    // Not a usage error: the command line was right, the machine lacks the driver (exit 1).
    throw new Error(`${purpose} needs the '${name}' package: npm install ${name}`, {
      cause: error,
    });
  }
}
