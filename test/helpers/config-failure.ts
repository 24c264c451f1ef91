// The message of the ConfigError a config document is refused with; a test
// fails if the document is accepted or refused with another kind of error.
import { expect } from 'vitest';
import { ConfigError } from '../../server/config/fields.js';
import { configFromDocument } from '../../server/config/load.js';

export function configFailure(document: unknown): string {
  try {
    configFromDocument(document, {});
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('the config was accepted');
}
