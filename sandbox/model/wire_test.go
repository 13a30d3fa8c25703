package model_test

import (
	"encoding/json"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/sandbox/model"
)

// TestResponseShapeAsDocumented: the chat completion object as the API
// reference shows it: a tool-calling message has "content": null (present,
// not left out), "refusal": null, usage detail objects (never null);
// parallel tool calls are two entries of one message; a refusal is
// message.refusal with content null. go-openai, the real client, reads
// them all.
func TestResponseShapeAsDocumented(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{Seed: 9})
	url := f.url + "/v1/chat/completions"
	req := f.request("pagar NF-1 R$ 180,00 chave 529.982.247-25")

	_, body := post(t, url, req, map[string]string{model.FaultHeader: "parallel"})
	var raw struct {
		Choices []struct {
			Message      map[string]json.RawMessage `json:"message"`
			FinishReason string                     `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(body, &raw); err != nil || len(raw.Choices) != 1 {
		t.Fatalf("%v: %s", err, body)
	}
	m := raw.Choices[0].Message
	if string(m["content"]) != "null" || string(m["refusal"]) != "null" {
		t.Errorf("tool-call message: content %s, refusal %s; want null and null", m["content"], m["refusal"])
	}
	var calls []openai.ToolCall
	if err := json.Unmarshal(m["tool_calls"], &calls); err != nil || len(calls) != 2 || calls[0].ID == calls[1].ID {
		t.Errorf("want two parallel tool calls with their own ids: %s", m["tool_calls"])
	}
	for _, k := range []string{"prompt_tokens_details", "completion_tokens_details"} {
		var obj map[string]int
		if v := raw.Usage[k]; len(v) == 0 || string(v) == "null" || json.Unmarshal(v, &obj) != nil {
			t.Errorf("usage.%s = %s, want an object", k, v)
		}
	}

	// The real client.
	resp, err := f.client.CreateChatCompletion(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.PromptTokensDetails == nil || resp.Usage.CompletionTokensDetails == nil {
		t.Errorf("go-openai read null usage details")
	}
	for _, tc := range calls {
		if _, err := f.derive(t, tc); err != nil {
			t.Errorf("parallel call %s does not normalize: %v", tc.ID, err)
		}
	}

	_, body = post(t, url, req, map[string]string{model.FaultHeader: "refusal"})
	var cr openai.ChatCompletionResponse
	if err := json.Unmarshal(body, &cr); err != nil {
		t.Fatal(err)
	}
	if c := cr.Choices[0]; c.Message.Refusal == "" || c.Message.Content != "" || c.FinishReason != openai.FinishReasonStop {
		t.Errorf("refusal read as %+v", c)
	}
	for fault, want := range map[string]openai.FinishReason{"length": openai.FinishReasonLength, "content-filter": openai.FinishReasonContentFilter} {
		_, body = post(t, url, req, map[string]string{model.FaultHeader: fault})
		if err := json.Unmarshal(body, &cr); err != nil || cr.Choices[0].FinishReason != want {
			t.Errorf("%s: %v %s", fault, err, body)
		}
	}
	// parallel_tool_calls: false is honoured.
	req.ParallelToolCalls = false
	_, body = post(t, url, req, map[string]string{model.FaultHeader: "parallel"})
	if err := json.Unmarshal(body, &cr); err != nil || len(cr.Choices[0].Message.ToolCalls) != 1 {
		t.Errorf("parallel_tool_calls false: %v %s", err, body)
	}
}
