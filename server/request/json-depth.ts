// How deep a request's JSON may nest. A body's values are later walked by
// recursive code (JSON.stringify and the template engine while a chat prompt
// is rendered, tool-call arguments given as JSON text included), whose stack a
// value nested thousands deep would exhaust. Checking the depth here, without
// recursion, keeps any body the JSON parser accepts a 200 or a 400 that names
// the field.
import { RouterError } from '../../router/errors.js';

/** Objects and arrays inside one another, the body itself counted as level 1. */
export const MAX_JSON_DEPTH = 64;

/** Path segments a 400 names; deeper paths end in "…". */
const SHOWN_SEGMENTS = 6;

interface Frame {
  value: object;
  depth: number;
  parent: Frame | null;
  key: string | number;
}

function pathOf(frame: Frame): string {
  const keys: (string | number)[] = [];
  for (let f: Frame | null = frame; f && f.parent; f = f.parent) keys.push(f.key);
  keys.reverse();
  const shown = keys.slice(0, SHOWN_SEGMENTS).map((k, i) => (typeof k === 'number' ? `[${k}]` : i === 0 ? k : `.${k}`));
  return shown.join('') + (keys.length > SHOWN_SEGMENTS ? '…' : '');
}

function tooDeep(param: string, maxDepth: number): RouterError {
  return new RouterError('KVR_ERR_INVALID_REQUEST', `${param}: nests objects and arrays deeper than ${maxDepth} levels`, { param });
}

/** Throws a 400 naming the first field where the parsed body nests deeper than maxDepth. */
export function checkJsonDepth(body: object, maxDepth = MAX_JSON_DEPTH): void {
  const stack: Frame[] = [{ value: body, depth: 1, parent: null, key: '' }];
  for (let frame = stack.pop(); frame; frame = stack.pop()) {
    if (frame.depth > maxDepth) throw tooDeep(pathOf(frame), maxDepth);
    const { value, depth } = frame;
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) {
        const item: unknown = value[i];
        if (typeof item === 'object' && item !== null) stack.push({ value: item, depth: depth + 1, parent: frame, key: i });
      }
    } else {
      for (const key of Object.keys(value)) {
        const item: unknown = (value as Record<string, unknown>)[key];
        if (typeof item === 'object' && item !== null) stack.push({ value: item, depth: depth + 1, parent: frame, key });
      }
    }
  }
}

/** The deepest bracket nesting of JSON text (brackets inside strings do not count); it need not be valid JSON. */
export function jsonTextDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > deepest) deepest = depth;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return deepest;
}

/**
 * Tool-call arguments sent as JSON text are parsed before the chat template
 * renders them, so their nesting counts as the field's own: the text's depth
 * plus the depth of the field that holds it.
 */
export function checkToolArgumentsDepth(body: Record<string, unknown>, maxDepth = MAX_JSON_DEPTH): void {
  const messages = body.messages;
  if (!Array.isArray(messages)) return;
  // body (1) > messages (2) > message (3) > tool_calls (4) > call (5) > function (6) > arguments
  const base = 6;
  for (const [i, message] of messages.entries()) {
    const calls = (message as { tool_calls?: unknown } | null)?.tool_calls;
    if (!Array.isArray(calls)) continue;
    for (const [j, call] of calls.entries()) {
      const args = (call as { function?: { arguments?: unknown } } | null)?.function?.arguments;
      if (typeof args === 'string' && base + jsonTextDepth(args) > maxDepth) throw tooDeep(`messages[${i}].tool_calls[${j}].function.arguments`, maxDepth);
    }
  }
}
