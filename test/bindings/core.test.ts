import { describe, expect, it } from 'vitest';
import { CORE_ABI_VERSION, Core } from '../../bindings/core.js';

describe('Core', () => {
  it('loads the wasm module and checks its ABI version', () => {
    const core = new Core();
    expect(core.exports.abiVersion()).toBe(CORE_ABI_VERSION);
    expect(core.memoryBytes).toBeGreaterThan(0);
  });

  it('gives each Core its own memory', () => {
    const a = new Core();
    const b = new Core();
    const at = a.memoryBytes - 4;
    const before = [...b.u8(at, 4)];
    a.u8(at, 4).set(before.map((x) => x ^ 0xff));
    expect([...b.u8(at, 4)]).toEqual(before);
    expect([...a.u8(at, 4)]).toEqual(before.map((x) => x ^ 0xff));
  });

  it('bumps the generation when memory grows and old views detach', () => {
    const core = new Core();
    const before = core.generation;
    const view = core.u8(0, 16);
    core.exports.memory.grow(1);
    expect(view.byteLength).toBe(0);
    expect(core.generation).toBe(before + 1);
  });

  it('lets a kernel be claimed once per Core', () => {
    const core = new Core();
    core.claim('index');
    expect(() => core.claim('index')).toThrow(/already holds/);
  });
});
