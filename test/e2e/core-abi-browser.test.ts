// The wasm core embeds in runtimes other than Node: headless Chromium loads
// build/kvcore.wasm with nothing but WebAssembly.instantiate and drives the raw
// exports (docs/core-abi.md), without the TypeScript bindings.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const wasm = readFileSync(fileURLToPath(import.meta.resolve('#wasm/kvcore.wasm')));

// Runs inside the page: plain JavaScript, no bindings.
const pageScript = `
window.runCore = async () => {
  const bytes = await (await fetch('/kvcore.wasm')).arrayBuffer();
  const { instance } = await WebAssembly.instantiate(bytes, { env: { abort() { throw new Error('core abort'); } } });
  const ex = instance.exports;
  const out = { abi: ex.abiVersion() };

  // Token-block hashing: tokens [1,2,3,4] as u32 LE, block size 4, seed 1337.
  const tokens = ex.hashReserveInput(16);
  new Uint32Array(ex.memory.buffer, tokens, 4).set([1, 2, 3, 4]);
  out.blocks = ex.hashBlocks(4, 4, 1337n);
  out.local = new BigUint64Array(ex.memory.buffer, ex.hashLocalPtr(), 1)[0].toString();

  // Prefix index: slot 0 stores blocks (ext 11, 12 / local 100, 200) from the
  // root; slot 1 stores block (ext 21 / local 100). Buffer: parent, ext[], local[].
  ex.indexConfigure(120000, 1 << 20, 838860);
  const store = (slot, ext, local) => {
    const p = ex.indexInput(1 + 2 * ext.length);
    const v = new BigUint64Array(ex.memory.buffer, p, 1 + 2 * ext.length);
    v[0] = 0n;
    ext.forEach((e, i) => { v[1 + i] = e; v[1 + ext.length + i] = local[i]; });
    return ex.indexStored(slot, 0, ext.length);
  };
  out.stored = [store(0, [11n, 12n], [100n, 200n]), store(1, [21n], [100n])];
  const q = ex.indexInput(3);
  new BigUint64Array(ex.memory.buffer, q, 3).set([100n, 200n, 300n]);
  ex.indexFind(q, 3, 0);
  const n = ex.indexExpand();
  const slots = new Uint32Array(ex.memory.buffer, ex.indexOutSlots(), n);
  const depths = new Uint32Array(ex.memory.buffer, ex.indexOutDepths(), n);
  out.matches = Array.from(slots, (s, i) => [s, depths[i]]).sort((a, b) => a[0] - b[0]);
  return out;
};`;

let server: Server;
let browser: Browser;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/kvcore.wasm') {
      res.writeHead(200, { 'content-type': 'application/wasm' });
      res.end(wasm);
    } else {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><html><body><script>${pageScript}</script></body></html>`);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
});

describe('the wasm core in headless Chromium, through its raw exports', () => {
  it('answers the hashing known answer and a findMatches case', async () => {
    const page = await browser.newPage();
    await page.goto(base);
    const out = await page.evaluate(() => (window as unknown as { runCore(): Promise<Record<string, unknown>> }).runCore());
    expect(out.abi).toBe(2);
    expect(out.blocks).toBe(1);
    expect(out.local).toBe('14643705804678351452');
    expect(out.matches).toEqual([
      [0, 2],
      [1, 1],
    ]);
  });
});
