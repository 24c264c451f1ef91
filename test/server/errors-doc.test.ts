// docs/errors.md lists every code of the catalogue with its status and type, and nothing else.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERRORS } from '../../router/errors.js';

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

describe('docs/errors.md', () => {
  it('lists every error code with the status and type of the catalogue', () => {
    const rows = [...doc.matchAll(/^\| `(KVR_ERR_[A-Z_]+)` \| (\d{3}) \| ([a-z_]+) \|/gm)].map((m) => [m[1], Number(m[2]), m[3]]);
    const catalogue = Object.entries(ERRORS).map(([code, spec]) => [code, spec.status, spec.type]);
    expect(rows.sort()).toEqual(catalogue.sort());
  });
});
