// Run as a child process by zmq-listener.test.ts: exercises a listener and a
// publisher (a replay done, another left in flight), closes them, and must then
// exit on its own. A leaked socket, timer or pending receive keeps it alive.

import { Router } from 'zeromq';
import { ZmqKvListener } from '../../server/kv-events/zmq-listener.js';
import { ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { ANY_PORT, Recorder, batchOf, syncProbes, waitFor } from './zmq-helpers.js';

const pub = new ZmqKvPublisher({ endpoint: ANY_PORT, replayEndpoint: ANY_PORT });
await pub.start();
const silent = new Router({ linger: 0 });
await silent.bind(ANY_PORT);

const rec = new Recorder();
const listener = new ZmqKvListener({ endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint!, worker: { id: 'w' }, ...rec });
const stuck = new Recorder();
const stuckListener = new ZmqKvListener({
  endpoint: pub.endpoint,
  replayEndpoint: silent.lastEndpoint!,
  replayTimeoutMs: 60_000,
  replayOnJoin: false,
  worker: { id: 'w' },
  ...stuck,
});
listener.start();
stuckListener.start();
await syncProbes(() => pub.publish(batchOf()), rec);
await syncProbes(() => pub.publish(batchOf()), stuck);

await pub.publish(batchOf(), { live: false });
const after = await pub.publish(batchOf());
await waitFor(() => rec.lastSeq() === after, 'the replayed gap');
await waitFor(() => stuckListener.stats().workers[0]!.replayRequests === 1, 'the stuck replay');

await listener.close();
await stuckListener.close();
await pub.close();
silent.close();
console.log('closed cleanly');
