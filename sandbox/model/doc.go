// Package model is the sandbox language model: an OpenAI-compatible chat
// completions server that plays a billing assistant, with the
// non-determinism of a real model made deliberate, seedable and countable.
// It exists so that retrysafe's agent can be tested for its central claim:
// a redelivered conversation, answered differently by the model the second
// time, still charges once.
//
//	POST /v1/chat/completions   openai.ChatCompletionRequest → openai.ChatCompletionResponse
//	                            (stream: true gives server-sent chunks, usage with include_usage)
//	GET  /v1/models, /v1/models/{id}
//	GET  /v1/_stats             {"calls","prompt_tokens","completion_tokens",...} (Stats)
//	GET  /healthz
//
// The real github.com/sashabaranov/go-openai client works against it with
// config.BaseURL = server + "/v1".
//
// # What it answers
//
// The last user message (and the ones before it since the last tool
// result) is read with regular expressions (Extract): an amount ("R$
// 1.800,00", "180 reais", "180.50"), a Pix key (CPF, CNPJ, e-mail, phone,
// random key; the one after the word "chave" wins), an invoice ("NF-123",
// "fatura 2024-05"). The customer id comes from the system prompt
// ("customer_id: C-42", "cliente: C-42"), else the request's metadata
// customer_id or user field. With all four facts and a Pix function among
// the request's tools (pix_charge, or any function whose name contains
// "pix"), it calls that function with {"customer_id","amount","pix_key"
// [,"pix_key_type"]}, using the parameter names the function's schema
// declares (pix.cobranca's Portuguese ones too). A fact missing: it asks for
// it in text. A tool result after the last user message: a short final
// reply ("Pagamento de R$ 180,00 da fatura NF-123 confirmado."), phrased
// for success, failure ("failed", "error") or pending ("review").
// tool_choice "none", "required" and a named function are honoured.
//
// # Non-determinism
//
// Every answer draws from its own generator, seeded by Config.Seed, the
// request bytes and how many times those exact bytes were seen. The same
// conversation sent again (a redelivery) therefore gets another answer,
// while a test with a fixed seed replays exactly, however concurrent
// conversations interleave (only identical requests racing each other may
// swap answers). Each answer varies:
//
//   - the amount's spelling (AmountSpellings): "R$ 180,00", "180.00",
//     "180,00", "R$180,00", 180 as a JSON number, ...
//   - the Pix key's spelling (KeySpellings): CPF with and without
//     punctuation, phones as +55 11 98765-4321, (11) 98765-4321,
//     11987654321, ...; e-mail and random keys in other letter cases; the
//     key type stated or left out, and spelled cpf/CPF, phone/telefone/...
//   - the JSON layout: compact, spaced or indented, keys reordered;
//     occasional trailing white space in the customer id;
//   - the tool call and completion ids, the reply's wording, the usage.
//
// Every spelling it offers normalizes, through derive's pix.charge rules,
// to the same payload (tested, and fuzzed over whatever Extract returns):
// the type is left out only where derive can infer it from the spelling.
// What does change the payload is a fault, each with its rate in Config:
// WrongAmountRate (a misreading: the invoice number taken for the amount,
// a slipped decimal point, ten reais off), MalformedRate (truncated JSON,
// single quotes, a trailing comma, a Markdown fence, unquoted keys),
// UnknownToolRate (a function the request did not offer), FailRate (429
// with Retry-After or 500, in the API's error shape, no tokens used). The
// draws happen in a fixed order, so changing one rate does not reshuffle
// the rest of a seeded run. The X-Sandbox-Model-Fault header forces a
// fault on one request; X-Sandbox-Fault injects transport faults as in
// every sandbox service (sandbox/fault).
//
// The response is the chat completion object as the API reference shows
// it, not go-openai's rendering of it: "content": null on a message that
// calls tools or refuses, "refusal": null otherwise, "logprobs": null,
// usage detail objects (prompt_tokens_details, completion_tokens_details)
// rather than null. ParallelRate (or the parallel fault) makes a
// tool-calling answer call the function twice in one message, laid out
// differently, unless the request says parallel_tool_calls: false. Forced
// faults also give a refusal (message.refusal, finish_reason stop), an
// answer cut off (finish_reason length, text or arguments halved) and a
// filtered one (content_filter). A 429 carries Retry-After (whole seconds)
// and retry-after-ms from Config.RetryAfter; RateLimitNext(n) makes the
// next n requests 429.
//
// Usage is plausible rather than exact: prompt tokens are the request's
// bytes / 4, completion tokens 20 to 60. Stats counts what was billed: an
// answer counts once produced, even if a fault dropped it on the way, which
// is exactly what a ledger kept by the caller cannot see.
//
// # Imports
//
// go-openai (its request and response types), sandbox/fault,
// sandbox/internal/standin (the JSON answer and health check the
// stand-ins share) and the standard library. The parser is self-contained rather than built on
// derive: it stands for the model, whose reading of the text must not share
// code with the normalization it is meant to test. Tests use derive and
// tools to check that normalization. Nothing from server/ or agent/.
package model
