package mcpserver

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/server/internal/edge"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/tools"
)

// Keys of the tools/call request's _meta that the host sets (reverse DNS,
// as the MCP specification asks of _meta prefixes). The model never sees
// _meta: it only produces the arguments.
const (
	// MetaIntentRef carries the intent reference: the unit of intent in
	// the host's system (an invoice id), a string.
	MetaIntentRef = "io.retrysafe/intent_ref"
	// MetaSourceRef optionally carries the transport id that led to the
	// call (a message id), stored for audit with the first freeze.
	MetaSourceRef = "io.retrysafe/source_ref"
)

// HeaderIntentRef is the HTTP request header that binds an intent
// reference to every call made over one streamable HTTP connection, for
// hosts that can set headers on their MCP client but not _meta on a call.
const HeaderIntentRef = "Retrysafe-Intent-Ref"

// The defaults of Config's zero fields. The mcp command's flags take
// their defaults from here, so that a default is written once.
const (
	DefaultExecuteTimeout   = 30 * time.Second
	DefaultProgressInterval = time.Second
)

// Config configures a Server. Zero fields take the documented defaults;
// New validates the result.
type Config struct {
	// Executor runs the tools: the one the sidecar would use. Required.
	Executor *executor.Executor
	// Tools is the registry behind Executor; every tool in it is served.
	// Required.
	Tools *tools.Registry
	// Metrics is where the calls answered without an outcome (invalid,
	// refused, error) are counted, as the sidecar counts them; the
	// executor's Observer counts the rest. Default: the executor's
	// Observer when it is a *metrics.Metrics (metrics.Of), else a fresh
	// metrics.New().
	Metrics *metrics.Metrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// ExecuteTimeout bounds one execution, independent of the client's
	// connection (see the package documentation). Default 30s.
	ExecuteTimeout time.Duration
	// ProgressInterval is how often a call whose request carries a
	// progress token reports that it is still waiting. Default 1s.
	ProgressInterval time.Duration
	// ModelRefTools names tools (action names, "pix.charge") for which
	// the model may supply the intent reference as an intent_ref argument
	// when the host supplies none. Their results say the guarantee is
	// weaker. Default none: a call without a host reference is refused.
	ModelRefTools []string
	// Annotations overrides a tool's annotations by action name. Tools not
	// named get DefaultAnnotations.
	Annotations map[string]*mcp.ToolAnnotations
	// Version is reported to clients as the server implementation's
	// version. Default "dev".
	Version string
}

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("mcpserver: invalid config")

// Validate fills defaults into a copy of c and checks it.
func (c Config) Validate() (Config, error) {
	if c.Executor == nil {
		return c, fmt.Errorf("%w: Executor is required", ErrConfig)
	}
	if c.Tools == nil || len(c.Tools.Names()) == 0 {
		return c, fmt.Errorf("%w: Tools is required and must hold a tool", ErrConfig)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.Of(c.Executor)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ExecuteTimeout == 0 {
		c.ExecuteTimeout = DefaultExecuteTimeout
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.ExecuteTimeout < 0 || c.ProgressInterval < 0 {
		return c, fmt.Errorf("%w: negative duration", ErrConfig)
	}
	for _, n := range c.ModelRefTools {
		if _, ok := c.Tools.Tool(n); !ok {
			return c, fmt.Errorf("%w: ModelRefTools names %q, which is not a registered tool (have %s)", ErrConfig, n, strings.Join(c.Tools.Names(), ", "))
		}
	}
	for n := range c.Annotations {
		if _, ok := c.Tools.Tool(n); !ok {
			return c, fmt.Errorf("%w: Annotations names %q, which is not a registered tool", ErrConfig, n)
		}
	}
	return c, nil
}

// ValidateTenant checks a tenant name as the sidecar does: at most 100
// bytes of UTF-8 without white space or control characters (it becomes a
// metric label and a log field).
func ValidateTenant(t string) error {
	if !edge.ValidTenant(t) {
		return fmt.Errorf("%w: tenant %q: want 1 to %d bytes of UTF-8, no white space or control characters", ErrConfig, t, edge.MaxTenantLen)
	}
	return nil
}

// DefaultAnnotations are the hints of a tool that acts on the outside
// world once per intent: not read-only, possibly destructive (money moves,
// a message cannot be unsent), idempotent because retrysafe makes the same
// intent act once whatever the number of calls, open world (a provider).
func DefaultAnnotations() *mcp.ToolAnnotations {
	yes := true
	return &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &yes}
}
