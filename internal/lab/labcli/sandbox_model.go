package labcli

import (
	"context"
	"time"

	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/sandbox/model"
)

// sandboxModelHelp is `retrysafe sandbox model --help`'s text.
const sandboxModelHelp = `Runs an OpenAI-compatible chat completions server that plays a billing
assistant, with a real model's non-determinism made deliberate:

  POST /v1/chat/completions   go-openai's request and response (streaming too)
  GET  /v1/models             the model list
  GET  /v1/_stats             {"calls","prompt_tokens","completion_tokens",...}

Point the go-openai client at it with BaseURL = "http://HOST:PORT/v1".

When the last user message asks to pay ("pagar a fatura NF-123, R$ 180,00,
chave Pix 529.982.247-25") and the request offers a Pix function
(pix_charge), it calls that function with customer_id (from the system
prompt: "customer_id: C-42"), amount, pix_key and pix_key_type. After a
tool result it answers with a short text for the customer. Missing facts:
it asks for them.

Each answer spells the same values differently ("R$ 180,00", "180.00", 180;
CPF with and without punctuation; phones in several notations; JSON
layout), all of which derive normalizes to one payload. Faults change the
payload or the call: --wrong-amount-rate (a misread amount),
--malformed-rate (broken JSON arguments), --unknown-tool-rate (a function
that was not offered), --fail-rate (429 or 500, no tokens). Per request:
header X-Sandbox-Model-Fault: wrong-amount,malformed,unknown-tool,
rate-limit,server-error; transport faults with X-Sandbox-Fault as in every
sandbox service.

--seed makes a run reproducible: the n-th identical request gets the same
answer however other conversations interleave; the same conversation sent
again (a redelivery) gets a different one, as from a real model. 0 draws
a seed (logged at start).
Usage is plausible (prompt = request bytes / 4, completion 20-60 tokens);
/v1/_stats counts every answer produced, including answers lost to a
dropped connection.

Prints one line, "retrysafe sandbox model: listening on http://HOST:PORT",
on stdout when ready (--addr with port 0 picks a free port). SIGTERM or
SIGINT: finish requests in progress, exit 0.`

// runSandboxModel is `retrysafe sandbox model`.
func runSandboxModel(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlagSet(e, "sandbox model", "sandbox model [--addr HOST:PORT] [--seed N] [flags]", sandboxModelHelp)
	var sf standinFlags
	sf.register(fs, e, "RETRYSAFE_MODEL_ADDR", "127.0.0.1:8092", "", nil)
	cfg := model.DefaultConfig()
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the answers' variations; 0 draws one")
	fs.Float64Var(&cfg.WrongAmountRate, "wrong-amount-rate", cfg.WrongAmountRate, "probability (0..1) that a tool call carries a wrong amount; 0 disables")
	fs.Float64Var(&cfg.MalformedRate, "malformed-rate", 0, "probability (0..1) that a tool call's arguments are not valid JSON")
	fs.Float64Var(&cfg.UnknownToolRate, "unknown-tool-rate", 0, "probability (0..1) that a tool call names a function that was not offered")
	fs.Float64Var(&cfg.FailRate, "fail-rate", 0, "probability (0..1) of answering 429 or 500 instead")
	fs.Float64Var(&cfg.ParallelRate, "parallel-rate", 0, "probability (0..1) that a tool-calling answer calls the function twice in one message (parallel tool calls)")
	fs.DurationVar(&cfg.RetryAfter, "retry-after", time.Second, "what a 429 says to wait (Retry-After and retry-after-ms)")
	fs.DurationVar(&cfg.Latency, "latency", 0, "time to answer, ±50% per call (e.g. 300ms)")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "model id reported when a request names none")
	fs.StringVar(&cfg.APIKey, "api-key", "", "accept only this bearer token (default: any)")
	if err := sf.parse(e, fs, args); err != nil {
		return err
	}
	cfg.Logger = sf.log
	srv, err := model.New(cfg)
	if err != nil {
		return err
	}
	if err := sf.lf.Check(); err != nil {
		return err
	}
	return sf.lf.Serve(ctx, e, cli.SandboxHTTP("model", sf.log, srv,
		"seed", srv.Seed(), "wrong_amount_rate", cfg.WrongAmountRate, "malformed_rate", cfg.MalformedRate,
		"unknown_tool_rate", cfg.UnknownToolRate, "fail_rate", cfg.FailRate, "parallel_rate", cfg.ParallelRate,
		"retry_after", cfg.RetryAfter, "latency", cfg.Latency))
}
