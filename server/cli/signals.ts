// How a long-running command ends: on the first SIGINT or SIGTERM it runs its
// shutdown once (a second signal then takes the default action: exit at once).

/** Resolves when `shutdown`, started by the first SIGINT or SIGTERM, has finished. */
export function untilStopped(shutdown: (signal: NodeJS.Signals) => Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      void shutdown(signal).then(resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
