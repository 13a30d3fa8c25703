package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/retrysafe/retrysafe/server/internal/edge"
	"github.com/retrysafe/retrysafe/tools"
)

// Server serves the registry's tools over MCP. Safe for concurrent use.
type Server struct {
	cfg   Config
	tools []*served
}

// served is one registry tool as MCP presents it.
type served struct {
	action   string // the registry's name, "pix.charge"
	tool     *mcp.Tool
	modelRef bool // the model may supply the intent_ref
}

// New validates cfg and prepares the tool list.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg}
	for _, name := range cfg.Tools.Names() {
		t, ok := cfg.Tools.Tool(name)
		if !ok {
			continue
		}
		sv := &served{action: name, modelRef: slices.Contains(cfg.ModelRefTools, name)}
		params := t.Parameters()
		desc := t.Description()
		if sv.modelRef {
			if params, err = withModelRef(params); err != nil {
				return nil, fmt.Errorf("%w: tool %s: parameters: %w", ErrConfig, name, err)
			}
		}
		ann := cfg.Annotations[name]
		if ann == nil {
			ann = DefaultAnnotations()
		}
		sv.tool = &mcp.Tool{
			// MCP allows dots in names, but the model APIs behind most
			// hosts (OpenAI, Anthropic) take only [a-zA-Z0-9_-]: the
			// function name every other edge of retrysafe uses.
			Name:         tools.FunctionName(name),
			Title:        name,
			Description:  desc,
			InputSchema:  params,
			OutputSchema: json.RawMessage(outputSchema),
			Annotations:  ann,
		}
		s.tools = append(s.tools, sv)
	}
	return s, nil
}

// Config returns the validated configuration (defaults filled in).
func (s *Server) Config() Config { return s.cfg }

// tenantFunc names the tenant of a request, or fails.
type tenantFunc func(*mcp.CallToolRequest) (string, error)

var errNoTenant = errors.New("mcpserver: request carries no authenticated tenant")

// build returns an MCP server whose calls run for the tenant tenantOf names.
func (s *Server) build(tenantOf tenantFunc) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "retrysafe", Title: "retrysafe", Version: s.cfg.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		// No logging capability: logs go to the operator, not the client.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	for _, sv := range s.tools {
		srv.AddTool(sv.tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tenant, err := tenantOf(req)
			if err != nil {
				return nil, err // a protocol error: no tool answer for nobody
			}
			return s.call(ctx, tenant, sv, req), nil
		})
	}
	return srv
}

const instructions = `Tools served by retrysafe act on the outside world (charges, messages) at most once per intent: calling a tool again for the same intent returns the first outcome (replayed: true) and never acts twice. When a result says in_flight, call again with the same arguments after retry_after_ms. When it says review, do not call again: a person will settle it.`

// ForTenant returns an MCP server whose every call runs for tenant, for a
// transport that is the tenant's alone (stdio: the process's
// configuration names it).
func (s *Server) ForTenant(tenant string) (*mcp.Server, error) {
	if err := ValidateTenant(tenant); err != nil {
		return nil, err
	}
	return s.build(func(*mcp.CallToolRequest) (string, error) { return tenant, nil }), nil
}

// Serve runs the tools for tenant over t (an mcp.StdioTransport, or
// mcp.IOTransport) until the client goes away or ctx ends. Either way it
// returns once the calls in progress have finished and been recorded (the
// SDK's session waits for its handlers, and each call runs detached from
// the request, bounded by Config.ExecuteTimeout): a host that closes the
// pipe or stops the process mid-charge does not leave the charge
// unrecorded.
func (s *Server) Serve(ctx context.Context, tenant string, t mcp.Transport) error {
	srv, err := s.ForTenant(tenant)
	if err != nil {
		return err
	}
	return srv.Run(ctx, t)
}

// Credential maps one API token to its tenant, in the format of the
// sidecar's RETRYSAFE_API_TOKENS.
type Credential struct {
	Tenant string
	Token  string
}

// HTTPHandler returns the streamable HTTP endpoint. Every request needs
// "Authorization: Bearer <token>", and the token names the tenant; the
// handler is stateless (no Mcp-Session-Id), so every request is
// authenticated on its own and any process behind a load balancer can
// answer it.
func (s *Server) HTTPHandler(creds []Credential) (http.Handler, error) {
	if len(creds) == 0 {
		return nil, fmt.Errorf("%w: no API tokens configured", ErrConfig)
	}
	var a authenticator
	seen := map[string]bool{}
	for _, c := range creds {
		if err := ValidateTenant(c.Tenant); err != nil {
			return nil, err
		}
		if c.Token == "" || seen[c.Token] {
			return nil, fmt.Errorf("%w: tenant %q: empty API token, or one given to two tenants", ErrConfig, c.Tenant)
		}
		seen[c.Token] = true
		a.Add(c.Tenant, c.Token)
	}
	srv := s.build(func(req *mcp.CallToolRequest) (string, error) {
		if req.Extra == nil || req.Extra.TokenInfo == nil || req.Extra.TokenInfo.UserID == "" {
			return "", errNoTenant
		}
		return req.Extra.TokenInfo.UserID, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless: true,
		Logger:    s.cfg.Logger,
	})
	return auth.RequireBearerToken(a.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h), nil
}

// authenticator maps bearer tokens to tenants in constant time, as the
// sidecar's does (edge.Authenticator).
type authenticator struct{ edge.Authenticator }

func (a *authenticator) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	tenant, ok := a.Tenant(token)
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: tenant}, nil
}

// withModelRef adds the optional intent_ref argument to a tool's
// parameters.
func withModelRef(params json.RawMessage) (json.RawMessage, error) {
	var schema map[string]any
	if err := json.Unmarshal(params, &schema); err != nil {
		return nil, err
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	props[tools.RefField] = map[string]any{
		"type":        "string",
		"description": "The reference of the unit of intent this call belongs to (the invoice or order id from the conversation). Use the same reference every time you act on the same intent, and a new one only for a new intent.",
	}
	schema["properties"] = props
	return json.Marshal(schema)
}

// CallParams is a tools/call of the tool serving action, as a Go host
// sends it: args are the model's arguments, and ref, the intent reference,
// rides in _meta (MetaIntentRef), where the model never sees it. An empty
// ref sends none (the server then refuses the call, unless the model may
// name the intent for that tool).
func CallParams(action, ref string, args map[string]any) *mcp.CallToolParams {
	p := &mcp.CallToolParams{Name: tools.FunctionName(action), Arguments: args}
	if ref != "" {
		p.Meta = mcp.Meta{MetaIntentRef: ref}
	}
	return p
}
