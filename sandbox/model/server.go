package model

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/sandbox/fault"
	"github.com/retrysafe/retrysafe/sandbox/internal/standin"
)

// FaultHeader forces model faults on one request, whatever the rates: a
// comma separated list of wrong-amount, malformed, unknown-tool,
// parallel (the tool call twice), refusal (message.refusal), length (an
// answer cut off, finish_reason "length"), content-filter, rate-limit
// (429) and server-error (500). Transport faults (delay,
// fail-before, drop-after, ...) use fault.Header as in every sandbox
// service.
const FaultHeader = "X-Sandbox-Model-Fault"

// maxBody bounds a request body; a conversation larger than this is a bug
// in the caller, and the real API refuses it too.
const maxBody = 4 << 20

// maxSeen bounds the per-request occurrence counters (see rngFor).
const maxSeen = 1 << 20

// Stats counts what the server billed. A call counts once its answer was
// produced, even if the client never read it (a fault dropped the
// connection, the client timed out): that is what a provider charges for,
// and what a ledger kept by the caller can miss.
type Stats struct {
	Calls            int64 `json:"calls"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	ToolCalls        int64 `json:"tool_calls"`   // answers that call a tool
	Replies          int64 `json:"replies"`      // answers that are text
	WrongAmount      int64 `json:"wrong_amount"` // tool calls with a wrong amount
	Malformed        int64 `json:"malformed"`    // tool calls with broken JSON
	UnknownTool      int64 `json:"unknown_tool"` // tool calls naming an unknown function
	Parallel         int64 `json:"parallel"`     // answers calling a tool more than once
	Refusals         int64 `json:"refusals"`     // answers that refuse (message.refusal)
	Failed           int64 `json:"failed"`       // 429/500 answers (not billed)
}

// Server is the OpenAI-compatible chat completions stand-in. It is an
// http.Handler and safe for concurrent use.
type Server struct {
	cfg     Config
	seed    uint64
	log     *slog.Logger
	handler http.Handler

	mu        sync.Mutex
	seen      map[uint64]uint64
	stats     Stats
	limitNext int // requests still to answer 429 (RateLimitNext)
}

// RateLimitNext makes the next n chat requests answer 429 with
// Config.RetryAfter, whatever the rates.
func (s *Server) RateLimitNext(n int) {
	s.mu.Lock()
	s.limitNext += n
	s.mu.Unlock()
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, seen: map[uint64]uint64{}}
	if cfg.Seed != 0 {
		s.seed = uint64(cfg.Seed)
	} else {
		var b [8]byte
		rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
		s.seed = binary.LittleEndian.Uint64(b[:]) >> 1
		if s.seed == 0 {
			s.seed = 1
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /chat/completions", s.chat)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /v1/models/{id}", s.model)
	mux.HandleFunc("GET /v1/_stats", s.statsHandler)
	mux.HandleFunc("GET /healthz", standin.Healthz)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, "invalid_request_error", "unknown_url",
			fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path))
	})
	s.handler = fault.Injector{}.Wrap(mux)
	return s, nil
}

// Seed is the seed in use (the configured one, or the one drawn for 0).
func (s *Server) Seed() int64 { return int64(s.seed) }

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// rngFor seeds one answer from the seed, the request bytes and how many
// times those bytes were seen before. Identical requests (a redelivery
// replaying a conversation) therefore get different answers, as from a
// real model, while a test replays exactly however other conversations
// interleave: a shared generator would make every answer depend on the
// arrival order of all requests.
func (s *Server) rngFor(body []byte) *mrand.Rand {
	h := fnv.New64a()
	h.Write(body)
	sum := h.Sum64()
	s.mu.Lock()
	if len(s.seen) >= maxSeen {
		s.seen = map[uint64]uint64{}
	}
	n := s.seen[sum]
	s.seen[sum] = n + 1
	s.mu.Unlock()
	return mrand.New(mrand.NewPCG(s.seed, sum^(n*0x9e3779b97f4a7c15)))
}

type forced struct {
	wrongAmount, malformed, unknownTool, rateLimit, serverError bool
	parallel, refusal, length, contentFilter                    bool
}

func parseForced(h string) (forced, error) {
	var f forced
	for _, p := range strings.Split(h, ",") {
		switch strings.TrimSpace(p) {
		case "", "none":
		case "wrong-amount":
			f.wrongAmount = true
		case "malformed":
			f.malformed = true
		case "unknown-tool":
			f.unknownTool = true
		case "rate-limit", "429":
			f.rateLimit = true
		case "server-error", "500":
			f.serverError = true
		case "parallel":
			f.parallel = true
		case "refusal":
			f.refusal = true
		case "length":
			f.length = true
		case "content-filter":
			f.contentFilter = true
		default:
			return f, fmt.Errorf("%s: unknown fault %q (want wrong-amount, malformed, unknown-tool, parallel, refusal, length, content-filter, rate-limit or server-error)", FaultHeader, p)
		}
	}
	return f, nil
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && tok == s.cfg.APIKey
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, req, fo, ok := readChat(w, r, s.authorized(r))
	if !ok {
		return
	}
	rng := s.rngFor(body)
	// Draws happen in a fixed order whatever the rates, so that turning
	// one fault on does not reshuffle every other answer of a seed.
	failDraw, statusDraw, latencyDraw := rng.Float64(), rng.IntN(2), rng.Float64()
	latency := s.cfg.Latency/2 + time.Duration(latencyDraw*float64(s.cfg.Latency))
	s.mu.Lock()
	if s.limitNext > 0 {
		s.limitNext--
		fo.rateLimit = true
	}
	s.mu.Unlock()
	if fo.rateLimit || fo.serverError || failDraw < s.cfg.FailRate {
		s.refuse(w, fo, statusDraw)
		return
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}

	resp, delta := s.complete(rng, req, fo, len(body))
	s.count(resp, delta)
	w.Header().Set("X-Request-Id", "req_"+randID(rng, 24))
	if req.Stream {
		s.stream(w, rng, req, resp)
		return
	}
	standin.WriteJSON(w, http.StatusOK, wire(resp))
}

// readChat reads and checks a chat completion request, answering the
// API's error when it cannot be served; ok is false then.
func readChat(w http.ResponseWriter, r *http.Request, authorized bool) (body []byte, req *openai.ChatCompletionRequest, fo forced, ok bool) {
	if !authorized {
		writeAPIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return nil, nil, fo, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeAPIError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", "Request body too large.")
			return nil, nil, fo, false
		}
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", nil, "Could not read the request body.")
		return nil, nil, fo, false
	}
	req = &openai.ChatCompletionRequest{}
	if err := json.Unmarshal(body, req); err != nil {
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", nil,
			"We could not parse the JSON body of your request: "+err.Error())
		return nil, nil, fo, false
	}
	if len(req.Messages) == 0 {
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", nil, "'messages' must contain at least one message.")
		return nil, nil, fo, false
	}
	fo, err = parseForced(r.Header.Get(FaultHeader))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", nil, err.Error())
		return nil, nil, fo, false
	}
	return body, req, fo, true
}

// refuse answers a failed call: 429 with Retry-After, or 500.
func (s *Server) refuse(w http.ResponseWriter, fo forced, statusDraw int) {
	s.mu.Lock()
	s.stats.Failed++
	s.mu.Unlock()
	if fo.rateLimit || (!fo.serverError && statusDraw == 0) {
		ra := s.cfg.RetryAfter
		secs := int64((ra + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		w.Header().Set("retry-after-ms", strconv.FormatInt(ra.Milliseconds(), 10))
		writeAPIError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded",
			fmt.Sprintf("Rate limit reached for requests. Please try again in %s.", ra))
		return
	}
	writeAPIError(w, http.StatusInternalServerError, "server_error", nil,
		"The server had an error while processing your request. Sorry about that!")
}

// complete makes the completion's choices (at most 8) and its usage, and
// counts what they are.
func (s *Server) complete(rng *mrand.Rand, req *openai.ChatCompletionRequest, fo forced, bodyLen int) (openai.ChatCompletionResponse, Stats) {
	n := max(req.N, 1)
	resp := openai.ChatCompletionResponse{
		ID:                "chatcmpl-" + randID(rng, 29),
		Object:            "chat.completion",
		Created:           time.Now().Unix(),
		Model:             req.Model,
		SystemFingerprint: "fp_sandbox",
	}
	if resp.Model == "" {
		resp.Model = s.cfg.Model
	}
	var delta Stats
	for i := range min(n, 8) {
		a := s.answer(rng, req, fo)
		resp.Choices = append(resp.Choices, openai.ChatCompletionChoice{Index: i, Message: a.msg, FinishReason: a.finish})
		resp.Usage.CompletionTokens += a.tokens
		switch {
		case a.msg.ToolCalls != nil:
			delta.ToolCalls++
		case a.msg.Refusal == "":
			delta.Replies++
		}
		delta.WrongAmount += b2i(a.wrongAmount)
		delta.Malformed += b2i(a.malformed)
		delta.UnknownTool += b2i(a.unknownTool)
		delta.Parallel += b2i(a.parallel)
		delta.Refusals += b2i(a.msg.Refusal != "")
	}
	resp.Usage.PromptTokens = max(1, bodyLen/4)
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	// Objects, never null, as the API sends them.
	resp.Usage.PromptTokensDetails = &openai.PromptTokensDetails{}
	resp.Usage.CompletionTokensDetails = &openai.CompletionTokensDetails{}
	return resp, delta
}

// count adds an answered call to the stats.
func (s *Server) count(resp openai.ChatCompletionResponse, delta Stats) {
	s.mu.Lock()
	s.stats.Calls++
	s.stats.PromptTokens += int64(resp.Usage.PromptTokens)
	s.stats.CompletionTokens += int64(resp.Usage.CompletionTokens)
	s.stats.TotalTokens += int64(resp.Usage.TotalTokens)
	s.stats.ToolCalls += delta.ToolCalls
	s.stats.Replies += delta.Replies
	s.stats.WrongAmount += delta.WrongAmount
	s.stats.Malformed += delta.Malformed
	s.stats.UnknownTool += delta.UnknownTool
	s.stats.Parallel += delta.Parallel
	s.stats.Refusals += delta.Refusals
	s.mu.Unlock()
	s.log.Debug("model: answered", "tool_calls", delta.ToolCalls, "wrong_amount", delta.WrongAmount,
		"malformed", delta.Malformed, "unknown_tool", delta.UnknownTool, "prompt_tokens", resp.Usage.PromptTokens)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// stream writes resp as server-sent events, the way the API streams: a
// role chunk, content or tool-call argument fragments, a finish chunk, the
// usage chunk when asked for, then [DONE].
func (s *Server) stream(w http.ResponseWriter, rng *mrand.Rand, req *openai.ChatCompletionRequest, resp openai.ChatCompletionResponse) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(choices []openai.ChatCompletionStreamChoice, usage *openai.Usage) {
		chunk := openai.ChatCompletionStreamResponse{
			ID: resp.ID, Object: "chat.completion.chunk", Created: resp.Created, Model: resp.Model,
			SystemFingerprint: resp.SystemFingerprint, Choices: choices, Usage: usage,
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	for _, c := range resp.Choices {
		one := func(d openai.ChatCompletionStreamChoiceDelta, fin openai.FinishReason) {
			send([]openai.ChatCompletionStreamChoice{{Index: c.Index, Delta: d, FinishReason: fin}}, nil)
		}
		one(openai.ChatCompletionStreamChoiceDelta{Role: openai.ChatMessageRoleAssistant}, "")
		if len(c.Message.ToolCalls) > 0 {
			for i, tc := range c.Message.ToolCalls {
				idx := i
				one(openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{{
					Index: &idx, ID: tc.ID, Type: tc.Type, Function: openai.FunctionCall{Name: tc.Function.Name},
				}}}, "")
				for _, part := range fragments(rng, tc.Function.Arguments) {
					one(openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{{
						Index: &idx, Function: openai.FunctionCall{Arguments: part},
					}}}, "")
				}
			}
		} else {
			for _, part := range fragments(rng, c.Message.Content) {
				one(openai.ChatCompletionStreamChoiceDelta{Content: part}, "")
			}
		}
		one(openai.ChatCompletionStreamChoiceDelta{}, c.FinishReason)
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := resp.Usage
		send([]openai.ChatCompletionStreamChoice{}, &u)
	}
	io.WriteString(w, "data: [DONE]\n\n") //nolint:errcheck // the client may be gone
	if flusher != nil {
		flusher.Flush()
	}
}

// fragments cuts s into pieces of 4 to 16 bytes, as tokens arrive.
func fragments(rng *mrand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(len(s), 4+rng.IntN(13))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func (s *Server) modelObject(id string) openai.Model {
	return openai.Model{ID: id, Object: "model", CreatedAt: 1700000000, OwnedBy: "retrysafe-sandbox", Root: id}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeAPIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	standin.WriteJSON(w, http.StatusOK, struct {
		Object string         `json:"object"`
		Data   []openai.Model `json:"data"`
	}{"list", []openai.Model{s.modelObject(s.cfg.Model)}})
}

// model answers for any id: the stand-in plays whichever model the caller
// configured.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeAPIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	standin.WriteJSON(w, http.StatusOK, s.modelObject(r.PathValue("id")))
}

func (s *Server) statsHandler(w http.ResponseWriter, _ *http.Request) {
	standin.WriteJSON(w, http.StatusOK, s.Stats())
}

// writeAPIError answers in the API's error shape, which go-openai turns
// into an *openai.APIError carrying the status code.
func writeAPIError(w http.ResponseWriter, status int, typ string, code any, msg string) {
	standin.WriteJSON(w, status, openai.ErrorResponse{Error: &openai.APIError{Type: typ, Code: code, Message: msg}})
}

const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func randID(rng *mrand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = idChars[rng.IntN(len(idChars))]
	}
	return string(b)
}
