package model

import (
	openai "github.com/sashabaranov/go-openai"
)

// The chat completion object as the API documents it
// (platform.openai.com/docs/api-reference/chat/object). go-openai's own
// response type leaves out what it cannot hold: "content": null on a
// message that calls tools or refuses, "refusal": null, "logprobs": null,
// "annotations": []. A client must cope with those, so the stand-in sends
// them.
type wireResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []wireChoice `json:"choices"`
	Usage             wireUsage    `json:"usage"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type wireChoice struct {
	Index        int         `json:"index"`
	Message      wireMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type wireMessage struct {
	Role        string            `json:"role"`
	Content     *string           `json:"content"`
	Refusal     *string           `json:"refusal"`
	ToolCalls   []openai.ToolCall `json:"tool_calls,omitempty"`
	Annotations []struct{}        `json:"annotations"`
}

type wireUsage struct {
	PromptTokens            int                            `json:"prompt_tokens"`
	CompletionTokens        int                            `json:"completion_tokens"`
	TotalTokens             int                            `json:"total_tokens"`
	PromptTokensDetails     openai.PromptTokensDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails openai.CompletionTokensDetails `json:"completion_tokens_details"`
}

func wire(r openai.ChatCompletionResponse) wireResponse {
	out := wireResponse{ID: r.ID, Object: r.Object, Created: r.Created, Model: r.Model, ServiceTier: "default",
		SystemFingerprint: r.SystemFingerprint, Choices: []wireChoice{}}
	u := r.Usage
	out.Usage = wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if u.PromptTokensDetails != nil {
		out.Usage.PromptTokensDetails = *u.PromptTokensDetails
	}
	if u.CompletionTokensDetails != nil {
		out.Usage.CompletionTokensDetails = *u.CompletionTokensDetails
	}
	for _, c := range r.Choices {
		m := wireMessage{Role: c.Message.Role, ToolCalls: c.Message.ToolCalls, Annotations: []struct{}{}}
		if c.Message.Content != "" || (len(c.Message.ToolCalls) == 0 && c.Message.Refusal == "" && c.FinishReason != openai.FinishReasonContentFilter) {
			content := c.Message.Content
			m.Content = &content
		}
		if c.Message.Refusal != "" {
			ref := c.Message.Refusal
			m.Refusal = &ref
		}
		out.Choices = append(out.Choices, wireChoice{Index: c.Index, Message: m, FinishReason: string(c.FinishReason)})
	}
	return out
}
