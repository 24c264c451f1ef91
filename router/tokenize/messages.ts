// Validation and normalization of chat messages before rendering. Templates
// read plain string content, so multi-part text content is joined the way
// vLLM does for string-content templates (parts joined with "\n"; an image
// part becomes IMAGE_PLACEHOLDER, the text its run of tokens stands in), null
// content becomes "", and tool-call arguments given as JSON text are parsed
// into objects (as vLLM does before rendering, so `tojson` re-serializes them).
import type { ChatMessage, ChatOptions } from './types.js';

/** A message as templates see it: only the fields templates read, content always a string. */
export interface TemplateMessage {
  role: string;
  content: string;
  name?: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
  reasoning_content?: string;
}

export interface TemplateInput {
  messages: TemplateMessage[];
  /** null when absent, as transformers passes `tools=None`. */
  tools: unknown[] | null;
  addGenerationPrompt: boolean;
}

/** What an image part renders as in a string-content template. */
export const IMAGE_PLACEHOLDER = '<image>';

/**
 * The URL of an `image_url` part (`{"image_url": {"url": ...}}`, or the URL
 * as a string); throws naming the field when there is none.
 */
export function imageUrlOf(part: object, at: string): string {
  const image = (part as { image_url?: unknown }).image_url;
  const url = typeof image === 'string' ? image : typeof image === 'object' && image !== null ? (image as { url?: unknown }).url : undefined;
  if (typeof url !== 'string' || url.length === 0) throw new TypeError(`${at}.image_url.url must be a non-empty string`);
  return url;
}

function joinTextParts(parts: unknown[], at: string): string {
  const texts: string[] = [];
  parts.forEach((part, j) => {
    if (typeof part !== 'object' || part === null) throw new TypeError(`${at}.content[${j}] must be an object`);
    const { type, text } = part as ContentLike;
    if (type === 'image_url') {
      imageUrlOf(part, `${at}.content[${j}]`);
      texts.push(IMAGE_PLACEHOLDER);
      return;
    }
    if (type !== 'text') throw new TypeError(`${at}.content[${j}].type must be "text" or "image_url" (got ${JSON.stringify(type)}): only text and images can be routed`);
    if (typeof text !== 'string') throw new TypeError(`${at}.content[${j}].text must be a string`);
    texts.push(text);
  });
  return texts.join('\n');
}

interface ContentLike {
  type?: unknown;
  text?: unknown;
}

function parseArguments(call: unknown, at: string): unknown {
  if (typeof call !== 'object' || call === null) throw new TypeError(`${at} must be an object`);
  const fn = (call as { function?: unknown }).function;
  if (typeof fn !== 'object' || fn === null) return call;
  const args = (fn as { arguments?: unknown }).arguments;
  if (typeof args !== 'string') return call;
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    return call; // not JSON: the template renders the text as given
  }
  return { ...call, function: { ...fn, arguments: parsed } };
}

function optionalString(value: unknown, at: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new TypeError(`${at} must be a string`);
  return value;
}

export function normalizeMessage(message: unknown, index: number): TemplateMessage {
  const at = `messages[${index}]`;
  if (typeof message !== 'object' || message === null || Array.isArray(message)) throw new TypeError(`${at} must be an object`);
  const m = message as Partial<ChatMessage> & Record<string, unknown>;
  if (typeof m.role !== 'string' || m.role.length === 0) throw new TypeError(`${at}.role must be a non-empty string`);
  let content: string;
  if (typeof m.content === 'string') content = m.content;
  else if (m.content === null || m.content === undefined) content = '';
  else if (Array.isArray(m.content)) content = joinTextParts(m.content, at);
  else throw new TypeError(`${at}.content must be a string, an array of text and image parts, or null`);
  const out: TemplateMessage = { role: m.role, content };
  const name = optionalString(m.name, `${at}.name`);
  if (name !== undefined) out.name = name;
  const toolCallId = optionalString(m.tool_call_id, `${at}.tool_call_id`);
  if (toolCallId !== undefined) out.tool_call_id = toolCallId;
  const reasoning = optionalString(m.reasoning_content, `${at}.reasoning_content`);
  if (reasoning !== undefined) out.reasoning_content = reasoning;
  if (m.tool_calls !== undefined && m.tool_calls !== null) {
    if (!Array.isArray(m.tool_calls)) throw new TypeError(`${at}.tool_calls must be an array`);
    out.tool_calls = m.tool_calls.map((call, j) => parseArguments(call, `${at}.tool_calls[${j}]`));
  }
  return out;
}

/**
 * Whether nothing in a value can change: it and everything in it are frozen
 * (as the request body parser leaves the messages it shares between a
 * conversation's turns).
 */
function settled(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true;
  if (!Object.isFrozen(value)) return false;
  for (const item of Object.values(value)) if (!settled(item)) return false;
  return true;
}

/**
 * Normalized settled messages, by identity: a conversation's earlier
 * messages come back turn after turn as the same frozen objects, and each
 * keeps one frozen TemplateMessage, so what is cached by it stays valid.
 */
const normalized = new WeakMap<object, TemplateMessage>();

function normalizeOnce(message: unknown, index: number): TemplateMessage {
  if (typeof message !== 'object' || message === null) return normalizeMessage(message, index);
  const known = normalized.get(message);
  if (known !== undefined) return known;
  const out = normalizeMessage(message, index);
  if (settled(message)) normalized.set(message, frozen(out));
  return out;
}

/** Freezes a value and everything in it (tool calls whose arguments were parsed are new objects). */
function frozen<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const item of Object.values(value)) frozen(item);
  return value;
}

export function normalizeChat(messages: unknown, options: ChatOptions | undefined): TemplateInput {
  if (!Array.isArray(messages)) throw new TypeError('messages must be an array of chat messages');
  const tools = options?.tools;
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) throw new TypeError('tools must be an array');
  const addGenerationPrompt = options?.addGenerationPrompt ?? true;
  if (typeof addGenerationPrompt !== 'boolean') throw new TypeError('addGenerationPrompt must be a boolean');
  return {
    messages: messages.map(normalizeOnce),
    tools: tools && tools.length > 0 ? tools : null,
    addGenerationPrompt,
  };
}

/**
 * Identifies everything a template can read from one message besides its
 * content: with the content, the cache key of the message's rendered text.
 */
export function messageTag(m: TemplateMessage): string {
  const extras = m.tool_calls === undefined && m.name === undefined && m.tool_call_id === undefined && m.reasoning_content === undefined
    ? ''
    : JSON.stringify([m.name ?? null, m.tool_call_id ?? null, m.reasoning_content ?? null, m.tool_calls ?? null]);
  return `${m.role}\u0000${extras}`;
}
