// Config checks for fleet shapes: the KV-event sockets a data-parallel
// engine binds (port + rank, for the publisher and the replay socket) may not
// collide, and LoRA adapter names each mean one thing.
import { describe, expect, it } from 'vitest';
import { configFromDocument } from '../../server/config/load.js';
import { configFailure as failure } from '../helpers/config-failure.js';
import { validateWorker } from '../../server/config/schema.js';

const zmq = (port: number, replay?: number, host = '10.0.0.5') => ({
  endpoint: `tcp://${host}:${port}`,
  ...(replay === undefined ? {} : { replay_endpoint: `tcp://${host}:${replay}` }),
});


describe('KV-event port collisions', () => {
  it("refuses a data-parallel worker whose rank 1 publisher would take rank 0's replay port", () => {
    const message = failure({ workers: [{ id: 'gpu-b', url: 'http://10.0.0.6:8000', model: 'm', data_parallel_size: 2, kv_events: zmq(5557, 5558, '10.0.0.6') }] });
    expect(message).toBe(
      'workers[0].kv_events.replay_endpoint: tcp://10.0.0.6:5558 is also workers[0].kv_events.endpoint (rank 1: port + 1): engines bind one socket per data-parallel rank on port + rank, ' +
        'so two of them cannot share it; leave at least data_parallel_size ports between the endpoint and the replay endpoint (e.g. 5557 and 5657)',
    );
  });

  it('accepts ranks whose ports stay apart, and the same ports on other hosts', () => {
    const config = configFromDocument(
      {
        workers: [
          { id: 'a', url: 'http://10.0.0.5:8000', model: 'm', data_parallel_size: 8, kv_events: zmq(5557, 5657) },
          { id: 'b', url: 'http://10.0.0.6:8000', model: 'm', data_parallel_size: 8, kv_events: zmq(5557, 5657, '10.0.0.6') },
          { id: 'c', url: 'http://10.0.0.5:8001', model: 'm', kv_events: zmq(5565) },
        ],
      },
      {},
    );
    expect(config.workers.map((w) => w.dataParallelSize)).toEqual([8, 8, 1]);
  });

  it("refuses two workers on one host whose ranks' ports overlap, naming the later one", () => {
    const message = failure({
      workers: [
        { id: 'a', url: 'http://10.0.0.5:8000', model: 'm', data_parallel_size: 4, kv_events: zmq(5557) },
        { id: 'b', url: 'http://10.0.0.5:8001', model: 'm', kv_events: zmq(5560) },
      ],
    });
    expect(message).toMatch(/^workers\[1\]\.kv_events\.endpoint: tcp:\/\/10\.0\.0\.5:5560 is also workers\[0\]\.kv_events\.endpoint \(rank 3: port \+ 3\): /);
  });

  it('checks a worker added through the admin API against its own ranks', () => {
    expect(() => validateWorker({ id: 'x', url: 'http://10.0.0.5:8000', model: 'm', data_parallel_size: 3, kv_events: zmq(7000, 7002) }, [])).toThrow(
      /^worker\.kv_events\.replay_endpoint: tcp:\/\/10\.0\.0\.5:7002 is also worker\.kv_events\.endpoint \(rank 2: port \+ 2\)/,
    );
  });
});

describe('LoRA adapters', () => {
  const model = (over: Record<string, unknown> = {}) => ({ name: 'Qwen/Qwen3-8B', adapters: ['sql-lora', 'chat-lora'], ...over });
  const worker = (over: Record<string, unknown> = {}) => ({ id: 'w0', url: 'http://10.0.0.5:8000', ...over });

  it("gives a worker all of its model's adapters unless it lists its own", () => {
    const config = configFromDocument({ models: [model()], workers: [worker(), worker({ id: 'w1', adapters: ['chat-lora'], load_adapters: true })] }, {});
    expect(config.models[0]!.adapters).toEqual(['sql-lora', 'chat-lora']);
    expect(config.workers.map((w) => [w.adapters, w.loadAdapters])).toEqual([
      [['sql-lora', 'chat-lora'], false],
      [['chat-lora'], true],
    ]);
  });

  it('refuses an adapter named like a model or like another model\'s adapter, and a worker adapter its model lacks', () => {
    expect(failure({ models: [model({ adapters: ['Qwen/Qwen3-8B'] })], workers: [worker()] })).toBe(
      'models[0].adapters[0]: "Qwen/Qwen3-8B" is already a model: a request\'s model must name one thing',
    );
    expect(failure({ models: [model(), { name: 'llama', adapters: ['sql-lora'] }], workers: [worker({ model: 'llama' })] })).toBe(
      'models[1].adapters[0]: "sql-lora" is already an adapter of model "Qwen/Qwen3-8B": a request\'s model must name one thing',
    );
    expect(failure({ models: [model()], workers: [worker({ adapters: ['math-lora'] })] })).toBe(
      'workers[0].adapters[0]: "math-lora" is not an adapter of the worker\'s model (its adapters: sql-lora, chat-lora)',
    );
    expect(failure({ models: [model({ adapters: ['two words'] })], workers: [worker()] })).toBe('models[0].adapters[0]: must be an adapter name without spaces, got "two words"');
  });
});
