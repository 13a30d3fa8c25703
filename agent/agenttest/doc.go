// Package agenttest provides in-process stand-ins for tests of the agent:
// an OpenAI-compatible chat model that is deliberately non-deterministic
// (each call formats the amount and the CPF differently and words its reply
// differently, as a real model does) and reports token usage, plus builders
// of signed WhatsApp webhook payloads.
//
// It is for tests; it imports go-openai (for the wire types) and the
// standard library.
package agenttest
