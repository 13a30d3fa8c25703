package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// An existing go-openai agent plugs retrysafe in between the model's tool
// call and the provider: register the tool, hand the model its function
// definitions, and execute each tool call under the system's intent_ref.
// A redelivery of the same message (below, with the amount spelled
// differently) replays the first charge instead of charging again.
func Example() {
	ctx := context.Background()
	db := examplePool()            // in production: dbpool.Open(ctx, databaseURL, schema, 0)
	psp := toolstest.NewProvider() // stands in for the PSP's API
	defer psp.Close()
	completion := exampleCompletion() // in production: client.CreateChatCompletion(ctx, req)

	// --- the user code: about twenty lines ---
	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: psp.URL, Token: "sk_test"})
	if err != nil {
		log.Fatal(err)
	}
	reg, _ := tools.NewRegistry(pix)
	deriver, _ := reg.Deriver([]byte("an HMAC secret of at least 32 bytes!"))
	intents, _ := intent.New(intent.Config{Deriver: deriver})
	ex, err := executor.New(executor.Config{DB: db, Intents: intents, Tools: reg})
	if err != nil {
		log.Fatal(err)
	}
	_ = reg.OpenAITools() // goes into openai.ChatCompletionRequest.Tools

	for _, tc := range completion.Choices[0].Message.ToolCalls {
		call, err := reg.ParseToolCall(tc)
		if err != nil {
			log.Fatal(err)
		}
		out, err := ex.Execute(ctx, executor.Call{
			Tenant: "acme", Ref: "invoice-2024-0042", // from your system, never from the model
			Action: call.Action, Fields: call.Fields, SourceRef: "wamid.HBgLNTUxMTk",
		}, nil)
		if err != nil {
			log.Fatal(err)
		}
		var charge struct {
			ID          string `json:"id"`
			AmountCents int    `json:"amount_cents"`
		}
		_ = json.Unmarshal(out.Response, &charge)
		fmt.Println(out.Status, charge.ID, charge.AmountCents, "replayed:", out.Replayed)
	}
	// --- end of user code ---

	fmt.Println("charges at the PSP:", psp.Count(""))
	// Output:
	// completed ch_000001 18000 replayed: false
	// completed ch_000001 18000 replayed: true
	// charges at the PSP: 1
}

// exampleCompletion is what the model answered: the same tool call twice
// (a redelivered message), with the amount and CPF spelled differently.
func exampleCompletion() openai.ChatCompletionResponse {
	return openai.ChatCompletionResponse{Choices: []openai.ChatCompletionChoice{{
		Message: openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{
			{ID: "call_1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{
				Name: "pix_charge", Arguments: `{"customer_id":"cus_881","amount":"180,00","pix_key":"529.982.247-25"}`,
			}},
			{ID: "call_2", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{
				Name: "pix_charge", Arguments: `{"customer_id":"cus_881","amount":180,"pix_key":"52998224725","pix_key_type":"cpf"}`,
			}},
		}},
	}}}
}

// examplePool opens a pool on a fresh migrated schema of the test database.
func examplePool() *pgxpool.Pool {
	pool, _ := pgtest.Schema(testutil.ExampleTB{}, nil) // the package database is dropped at exit
	return pool
}
