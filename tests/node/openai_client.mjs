// strata's server driven by the official OpenAI Node client: completions (also with echo) and
// chat completions, streamed and not, stop strings, logprobs, models.retrieve, the API key,
// fields SDKs add, logit_bias and penalties, tools, and errors as the client's typed
// exceptions. Run by tests/openai_client_test.cpp against `strata serve` on loopback:
//
//   node tests/node/openai_client.mjs BASE_URL EXPECTED.json
//
// EXPECTED.json: {"model", "api_key", "max_tokens", "prompt", "completion", "message", "chat"}, where
// "completion" and "chat" are the greedy texts `strata generate --prompt` / `--chat` gave.
// Exits non-zero at the first failed assertion.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const [baseURL, expectedFile] = process.argv.slice(2);
if (!baseURL || !expectedFile) {
  console.error('usage: node openai_client.mjs BASE_URL EXPECTED.json');
  process.exit(2);
}
const expected = JSON.parse(readFileSync(expectedFile, 'utf8'));
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: expected.api_key, maxRetries: 0, timeout: 60_000 });
let checks = 0;
const check = (what, fn) => { fn(); ++checks; };

// Greedy and to the full length, as `strata generate` ran (ignore_eos is SGLang's extension).
const greedy = { model: expected.model, max_tokens: expected.max_tokens, temperature: 0, ignore_eos: true };
const messages = [{ role: 'user', content: expected.message }];

// A stop string from the middle of `text` (not U+FFFD, which random weights produce a lot).
function pickStop(text) {
  const chars = [...text];
  for (let k = Math.floor(chars.length / 2); k < chars.length; ++k)
    if (chars[k] !== '\uFFFD' && chars[k].trim() !== '') return chars[k];
  return null;
}

const models = await client.models.list();
check('models', () => assert.ok(models.data.some((m) => m.id === expected.model), JSON.stringify(models.data)));

// Completions, whole and streamed.
const completion = await client.completions.create({ ...greedy, prompt: expected.prompt });
check('completion text', () => assert.equal(completion.choices[0].text, expected.completion));
check('completion finish', () => assert.equal(completion.choices[0].finish_reason, 'length'));
check('completion usage', () => assert.equal(completion.usage.completion_tokens, expected.max_tokens));
const stream = await client.completions.create({
  ...greedy, prompt: expected.prompt, stream: true, stream_options: { include_usage: true },
});
let streamed = '';
let finish = null;
let usage = null;
for await (const chunk of stream) {
  for (const choice of chunk.choices) {
    streamed += choice.text;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  if (chunk.usage) usage = chunk.usage;
}
check('streamed completion', () => assert.equal(streamed, expected.completion));
check('streamed finish', () => assert.equal(finish, 'length'));
check('streamed usage', () => assert.equal(usage?.completion_tokens, expected.max_tokens));

// echo: the prompt opens the text, and its tokens the logprobs (the first one unscored).
const echoed = await client.completions.create({ ...greedy, prompt: expected.prompt, echo: true, logprobs: 1 });
check('echo text', () => assert.equal(echoed.choices[0].text, expected.prompt + expected.completion));
check('echo logprobs', () => {
  const lp = echoed.choices[0].logprobs;
  assert.ok(lp.tokens.length > expected.max_tokens, JSON.stringify(lp));
  assert.equal(lp.token_logprobs.length, lp.tokens.length);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  for (const v of lp.token_logprobs.slice(1)) assert.ok(typeof v === 'number' && v <= 0, String(v));
});

// Chat completions, whole and streamed.
const chat = await client.chat.completions.create({ ...greedy, messages, logprobs: true, top_logprobs: 2 });
check('chat role', () => assert.equal(chat.choices[0].message.role, 'assistant'));
check('chat text', () => assert.equal(chat.choices[0].message.content, expected.chat));
check('chat logprobs', () => {
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.length, expected.max_tokens);
  for (const t of content) {
    assert.equal(typeof t.token, 'string');
    assert.equal(t.top_logprobs.length, 2);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);  // greedy: the chosen one leads
  }
});
const chatStream = await client.chat.completions.create({ ...greedy, messages, stream: true });
let chatStreamed = '';
let role = null;
for await (const chunk of chatStream) {
  for (const choice of chunk.choices) {
    if (choice.delta.role) role = choice.delta.role;
    chatStreamed += choice.delta.content ?? '';
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
check('streamed chat role', () => assert.equal(role, 'assistant'));
check('streamed chat', () => assert.equal(chatStreamed, expected.chat));

// Stop strings cut the text before them, streamed or not.
const stop = pickStop(expected.completion);
check('stop string found', () => assert.ok(stop, `no stop string in ${JSON.stringify(expected.completion)}`));
const cut = expected.completion.slice(0, expected.completion.indexOf(stop));
const stopped = await client.completions.create({ ...greedy, prompt: expected.prompt, stop: [stop] });
check('stop text', () => assert.equal(stopped.choices[0].text, cut));
check('stop finish', () => assert.equal(stopped.choices[0].finish_reason, 'stop'));
const stoppedStream = await client.completions.create({ ...greedy, prompt: expected.prompt, stop: stop, stream: true });
let stoppedText = '';
for await (const chunk of stoppedStream) for (const choice of chunk.choices) stoppedText += choice.text;
check('streamed stop text', () => assert.equal(stoppedText, cut));

// models.retrieve, and the API key: another key is the client's AuthenticationError.
const model = await client.models.retrieve(expected.model);
check('models.retrieve', () => assert.equal(model.id, expected.model));
await assert.rejects(client.models.retrieve('no-such-model'), (e) => e instanceof OpenAI.NotFoundError);
++checks;
const stranger = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'not-the-key', maxRetries: 0 });
await assert.rejects(stranger.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
++checks;

// Fields SDKs and frameworks add change nothing.
const extra = await client.chat.completions.create({
  ...greedy, messages, parallel_tool_calls: false, store: false, metadata: { run: 'test' },
  user: 'someone', service_tier: 'auto', reasoning_effort: 'low',
});
check('ignored fields', () => assert.equal(extra.choices[0].message.content, expected.chat));

// logit_bias +100 on one token makes it every greedy choice; penalties are taken.
const biased = await client.completions.create({ ...greedy, prompt: expected.prompt, logit_bias: { 42: 100 } });
check('logit_bias', () => assert.deepEqual(biased.choices[0].token_ids, Array(expected.max_tokens).fill(42)));
const penalized = await client.chat.completions.create({
  ...greedy, messages, presence_penalty: 1.5, frequency_penalty: 1.0, seed: 7,
});
check('penalties', () => {
  assert.equal(penalized.usage.completion_tokens, expected.max_tokens);
  assert.equal(typeof penalized.choices[0].message.content, 'string');
});

// Tools (the server reads calls as --tool-call-parser hermes; the tiny model calls none, so
// the answer is its plain text), whole and streamed.
const tools = [{
  type: 'function',
  function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
}];
const tooled = await client.chat.completions.create({ ...greedy, messages, tools, tool_choice: 'auto' });
check('tools', () => {
  assert.equal(tooled.choices[0].message.content, expected.chat);
  assert.equal(tooled.choices[0].message.tool_calls, undefined);
  assert.equal(tooled.choices[0].finish_reason, 'length');
});
const tooledStream = await client.chat.completions.create({ ...greedy, messages, tools, stream: true });
let tooledText = '';
for await (const chunk of tooledStream) for (const choice of chunk.choices) tooledText += choice.delta.content ?? '';
check('streamed tools', () => assert.equal(tooledText, expected.chat));
// Forced calls (tool_choice named or required) are constrained by the grammar engine, so
// even the random tiny model answers a valid call: whole, and streamed as delta.tool_calls
// that the client's stream helper assembles.
const unitTool = {
  type: 'function',
  function: { name: 'set_unit', parameters: { type: 'object', properties: { unit: { enum: ['c', 'f'] } }, required: ['unit'] } },
};
const forcedBody = {
  model: expected.model, messages, tools: [tools[0], unitTool], max_tokens: 64, temperature: 0.8, seed: 3,
  tool_choice: { type: 'function', function: { name: 'set_unit' } },
};
const named = await client.chat.completions.create(forcedBody);
check('named tool call', () => {
  const calls = named.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].type, 'function');
  assert.equal(calls[0].function.name, 'set_unit');
  assert.ok(['c', 'f'].includes(JSON.parse(calls[0].function.arguments).unit), calls[0].function.arguments);
  assert.equal(named.choices[0].finish_reason, 'tool_calls');
});
const namedStream = client.chat.completions.stream({ ...forcedBody, stream: true });
const assembled = await namedStream.finalChatCompletion();
check('streamed named tool call', () => {
  const calls = assembled.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].function.name, 'set_unit');
  assert.ok(['c', 'f'].includes(JSON.parse(calls[0].function.arguments).unit));
  assert.equal(assembled.choices[0].finish_reason, 'tool_calls');
});
// A call the model writes itself (here through a literal regex, an extension field): streamed,
// it opens with its id and name, its arguments arrive in fragments, and the stream helper
// joins them to the arguments of the same answer not streamed.
const callText = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}}\n</tool_call>';
const writtenBody = {
  model: expected.model, messages, tools, max_tokens: 200, temperature: 0,
  regex: callText.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&'),
};
const written = await client.chat.completions.create(writtenBody);
const writtenStream = client.chat.completions.stream({ ...writtenBody, stream: true });
const callDeltas = [];
writtenStream.on('chunk', (chunk) => {
  for (const choice of chunk.choices) callDeltas.push(...(choice.delta.tool_calls ?? []));
});
const writtenAssembled = await writtenStream.finalChatCompletion();
check('streamed tool call arguments', () => {
  const whole = written.choices[0].message.tool_calls;
  assert.equal(whole.length, 1);
  assert.equal(whole[0].function.arguments, '{"city": "Oslo", "days": 3}');
  assert.ok(callDeltas.length > 2, JSON.stringify(callDeltas));
  assert.equal(callDeltas[0].function.name, 'get_weather');
  assert.equal(callDeltas[0].function.arguments, '');
  const calls = writtenAssembled.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].id, callDeltas[0].id);
  assert.equal(calls[0].function.name, 'get_weather');
  assert.equal(calls[0].function.arguments, whole[0].function.arguments);
  assert.equal(writtenAssembled.choices[0].finish_reason, 'tool_calls');
});
// parallel_tool_calls false: exactly one call (else the random model may list calls until
// max_tokens).
const required = await client.chat.completions.create({
  ...forcedBody, tools: [unitTool], tool_choice: 'required', parallel_tool_calls: false,
});
check('required tool call', () => {
  const calls = required.choices[0].message.tool_calls;
  assert.equal(calls?.length, 1, JSON.stringify(required.choices[0]));
  for (const c of calls) assert.equal(c.function.name, 'set_unit');
});
await assert.rejects(
  client.chat.completions.create({ ...forcedBody, tool_choice: { type: 'function', function: { name: 'nope' } } }),
  (e) => e instanceof OpenAI.BadRequestError && /does not offer/.test(e.message),
);
++checks;

// Errors arrive as the client's typed exceptions, with the server's message.
await assert.rejects(
  client.completions.create({ ...greedy, model: 'no-such-model', prompt: 'Hi' }),
  (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && /does not exist/.test(e.message),
);
++checks;
await assert.rejects(
  client.chat.completions.create({ ...greedy, max_tokens: 0, messages }),
  (e) => e instanceof OpenAI.BadRequestError && /at least 1/.test(e.message),
);
++checks;

const { version } = JSON.parse(readFileSync(new URL('./node_modules/openai/package.json', import.meta.url), 'utf8'));
console.log(`openai ${version} client against ${baseURL}: all ${checks} checks passed`);
