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
