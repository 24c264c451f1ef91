// The chat template shipped for encodings that come without one (tiktoken
// encodings and byte routing): ChatML, the format many open models use.
// Its two markers become special tokens of the encoding, with ids above the
// vocabulary, so they split the prompt the way a model's own special tokens do.
//
// Layout:
//   [tools present] <|im_start|>system\n{first system message + "\n\n"}# Tools\n\n{one JSON line per tool}<|im_end|>\n
//   per message     <|im_start|>{role}\n{content}{"\n<tool_call>\n" + JSON + "\n</tool_call>" per call}<|im_end|>\n
//   generation      <|im_start|>assistant\n
// With tools, a leading system message is folded into the tools section.

import type { NativeTemplate } from './chat-renderer.js';
import type { TemplateMessage } from './messages.js';

export const IM_START = '<|im_start|>';
export const IM_END = '<|im_end|>';

export const CHATML_TEMPLATE = [
  '{%- if tools %}',
  "{{- '<|im_start|>system\\n' }}",
  "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}",
  "{{- '# Tools\\n\\nYou may call these functions (one JSON signature per line):\\n' }}",
  "{%- for tool in tools %}{{- tool | tojson }}{{- '\\n' }}{%- endfor %}",
  "{{- '<|im_end|>\\n' }}",
  '{%- endif %}',
  '{%- for message in messages %}',
  "{%- if not (tools and loop.first and message.role == 'system') %}",
  "{{- '<|im_start|>' + message.role + '\\n' + message.content }}",
  '{%- if message.tool_calls %}{%- for call in message.tool_calls %}',
  "{{- '\\n<tool_call>\\n' }}{{- (call.function if call.function is defined else call) | tojson }}{{- '\\n</tool_call>' }}",
  '{%- endfor %}{%- endif %}',
  "{{- '<|im_end|>\\n' }}",
  '{%- endif %}',
  '{%- endfor %}',
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
].join('\n');

/** JSON as the template's `tojson` filter writes it: ", " and ": " separators, undefined as null. */
function toJson(value: unknown): string {
  if (value === undefined || value === null) return 'null';
  if (Array.isArray(value)) return `[${value.map(toJson).join(', ')}]`;
  if (typeof value === 'object') return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${toJson(v)}`).join(', ')}}`;
  return JSON.stringify(value);
}

/**
 * CHATML_TEMPLATE rendered by plain string building: the same text as the
 * template under Jinja (a property test holds them equal), without Jinja's
 * per-render cost (~0.1-0.2 ms), which every new message pays on the request path.
 */
export function renderChatml(messages: readonly TemplateMessage[], tools: readonly unknown[] | null, addGenerationPrompt: boolean): string {
  const withTools = tools !== null && tools.length > 0;
  let out = '';
  if (withTools) {
    out += `${IM_START}system\n`;
    if (messages[0]?.role === 'system') out += `${messages[0].content}\n\n`;
    out += '# Tools\n\nYou may call these functions (one JSON signature per line):\n';
    for (const tool of tools) out += `${toJson(tool)}\n`;
    out += `${IM_END}\n`;
  }
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (withTools && i === 0 && m.role === 'system') continue;
    out += renderChatmlMessage(m);
  }
  if (addGenerationPrompt) out += `${IM_START}assistant\n`;
  return out;
}

/**
 * The text one message adds to a ChatML prompt. Every message but a leading
 * system message folded into the tools section writes exactly this, whatever
 * comes before it, so a later message's segment needs no render of the first.
 */
export function renderChatmlMessage(m: TemplateMessage): string {
  let out = `${IM_START}${m.role}\n${m.content}`;
  for (const call of m.tool_calls ?? []) {
    const fn = (call as { function?: unknown }).function;
    out += `\n<tool_call>\n${toJson(fn !== undefined ? fn : call)}\n</tool_call>`;
  }
  return `${out}${IM_END}\n`;
}

/** ChatML as a native template: the whole render, and each later message's segment on its own. */
export const CHATML_NATIVE: NativeTemplate = Object.assign((messages: TemplateMessage[], tools: unknown[] | null, addGenerationPrompt: boolean) => renderChatml(messages, tools, addGenerationPrompt), {
  segment: renderChatmlMessage,
});
