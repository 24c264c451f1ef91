// Ports where every connection is refused, for workers and event sources that
// must never answer. A port taken with listen(0) and closed again is not one:
// the kernel may hand it to a listener in another test file running at the
// same time, which then answers in the dead worker's place. The suite's
// listeners all take ephemeral ports (32768 and up), and nothing here listens
// below 1024, so a connection to one of these is refused.
const FIRST_REFUSED_PORT = 1;
const REFUSED_PORTS = 16;

/** The i-th port (0 <= i < 16) that refuses connections on 127.0.0.1. */
export function refusedPort(i = 0): number {
  if (!Number.isInteger(i) || i < 0 || i >= REFUSED_PORTS) throw new RangeError(`refusedPort(${i}): 0 to ${REFUSED_PORTS - 1}`);
  return FIRST_REFUSED_PORT + i;
}
