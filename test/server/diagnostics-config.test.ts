// The diagnostics section of the config: defaults, and bad values named.
import { describe, expect, it } from 'vitest';
import { configFromDocument } from '../../server/config/load.js';

const workers = [{ id: 'w0', url: 'http://127.0.0.1:9', model: 'm' }];

describe('diagnostics:', () => {
  it('defaults to 30 s of silence and a tenth of the prompt', () => {
    expect(configFromDocument({ workers }).diagnostics).toEqual({ silentAfterMs: 30_000, cachedTokensTolerance: 0.1 });
  });

  it('takes both fields', () => {
    expect(configFromDocument({ workers, diagnostics: { silent_after_ms: 500, cached_tokens_tolerance: 0.25 } }).diagnostics).toEqual({ silentAfterMs: 500, cachedTokensTolerance: 0.25 });
  });

  it.each([
    [{ silent_after_ms: 50 }, 'diagnostics.silent_after_ms'],
    [{ silent_after_ms: 1.5 }, 'diagnostics.silent_after_ms'],
    [{ cached_tokens_tolerance: 2 }, 'diagnostics.cached_tokens_tolerance'],
    [{ silence: 1 }, 'diagnostics.silence'],
  ])('refuses %j naming %s', (diagnostics, field) => {
    expect(() => configFromDocument({ workers, diagnostics })).toThrow(field);
  });
});
