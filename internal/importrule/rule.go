package importrule

import (
	"path"
	"strings"
)

// Module is the module path the rule is about.
const Module = "github.com/retrysafe/retrysafe"

// layers places each package (a path relative to Module, or a prefix
// ending in "/*" for every package under it) in its layer. The most
// specific entry wins.
var layers = map[string]int{
	"derive":              0,
	"derive/*":            0,
	"migrations":          0,
	"internal/failpoint":  0,
	"internal/pgembed":    0,
	"internal/strictjson": 0,
	"internal/pairs":      0,
	"internal/importrule": 0,
	"internal/problem":    0,
	"internal/backoff":    0,
	"internal/lostconn":   0,
	"internal/freeport":   0,
	"internal/confcheck":  0,
	"sandbox":             0, // doc.go only

	"tools":                1,
	"tools/*":              1,
	"dbpool":               1,
	"internal/riverretry":  1,
	"internal/riverschema": 1,
	"internal/tokens":      1,
	"idempotency":          1,

	"internal/ledger": 2,
	"intent":          2,

	"executor":   3,
	"executor/*": 3,

	"internal/outbox": 3, // the outbox relay the agent and the webhook share

	"agent":     4,
	"webhook":   4,
	"webhook/*": 4,
	"whatsapp":  4,
	"server/*":  4,

	"server/internal/edge": 4, // what the sidecar and the MCP server share

	"sandbox/*":                5,
	"internal/lab/harness":     5,
	"internal/lab/restarttest": 5,
	"agent/agenttest":          5,
	"tools/toolstest":          5,
	"internal/pgtest":          5,
	"internal/testutil":        5,
	"internal/problemdocs":     5,
	"internal/pixspec":         5,

	"executor/executortest":    5, // the executor's test API
	"server/internal/edgetest": 5, // the engine behind the edges' tests

	"internal/outbox/outboxtest": 5,

	"internal/cli": 6,

	"internal/lab/labcli": 7,

	"cmd/*": 8,
}

// LabLayer is the layer of test and demo machinery. internal/lab/labcli
// (layer 7), the lab's commands, imports it too; cmd/retrysafe does not
// (Production).
const LabLayer = 5

// Allowed lists imports inside one layer, importer → imported, each with
// why it is not a layering problem.
var Allowed = map[[2]string]string{
	{"sandbox/psp", "sandbox/internal/standin"}:      "stand-ins' request logs share the status recorder",
	{"sandbox/apipix", "sandbox/internal/standin"}:   "stand-ins' request logs share the status recorder",
	{"sandbox/model", "sandbox/internal/standin"}:    "stand-ins answer JSON and their health check alike",
	{"sandbox/cloudapi", "sandbox/internal/standin"}: "stand-ins answer JSON and their health check alike",

	{"server/mcpserver", "server/metrics"}:               "the MCP server counts the calls it answers without an outcome (invalid, error)",
	{"server/sidecar", "server/metrics"}:                 "the sidecar serves the metrics and counts the requests it answers without an outcome",
	{"whatsapp", "agent"}:                                "the WhatsApp webhook enqueues the agent's inbox jobs",
	{"tools/apipix", "tools"}:                            "a provider client implements the Tool interface",
	{"tools/stripe", "tools"}:                            "a provider client implements the Tool interface",
	{"sandbox/psp", "sandbox/fault"}:                     "stand-ins share the fault injector",
	{"sandbox/cloudapi", "sandbox/fault"}:                "stand-ins share the fault injector",
	{"sandbox/model", "sandbox/fault"}:                   "stand-ins share the fault injector",
	{"sandbox/apipix", "sandbox/fault"}:                  "stand-ins share the fault injector",
	{"internal/lab/restarttest", "internal/lab/harness"}: "the restart test drives the process harness",
	{"internal/lab/harness", "agent/agenttest"}:          "the harness starts the sandbox model the agent tests use",

	{"server/sidecar", "server/internal/edge"}:        "the sidecar answers a tool call with the pieces it shares with the MCP server",
	{"server/mcpserver", "server/internal/edge"}:      "the MCP server answers a tool call with the pieces it shares with the sidecar",
	{"server/internal/edgetest", "internal/pgtest"}:   "the edges' test engine runs on a schema of its own",
	{"server/internal/edgetest", "tools/toolstest"}:   "the edges' test engine calls the fake PSP",
	{"server/internal/edgetest", "internal/testutil"}: "the edges' test engine keeps its logs in a locked buffer",

	{"internal/lostconn", "internal/backoff"}: "a write sent again pauses as every retry does",
	{"internal/pgembed", "internal/freeport"}: "a cluster's port is drawn below the ephemeral range, as the lab's server's is",

	{"internal/outbox", "executor"}:                     "the outbox relay runs frozen keys through the executor",
	{"internal/outbox/outboxtest", "internal/testutil"}: "it runs a job's work as a crashable queue worker (testutil.RunCrashable)",
	{"webhook", "agent"}:                                "the default notifier finds the customer's conversation by its open invoice (agent.ConversationByInvoice)",
	{"server/console", "agent"}:                         "the console shows the agent's turns and model calls behind an action, and its spend",
	{"server/console", "webhook"}:                       "the console shows the payment webhook's effects and receipts behind an action",

	{"intent", "internal/ledger"}:                         "the intent store keeps its rows in the ledger, which holds their SQL",
	{"internal/lab/harness", "executor/executortest"}:     "the harness reads the ledger's rows through the executor's test API",
	{"internal/lab/restarttest", "executor/executortest"}: "the restart test's report reads the ledger's rows through the executor's test API",
}

// ImportedOnlyBy lists packages that only the named packages may import,
// in their code or their tests (a package's own tests always may): the
// ledger's SQL has two owners above it, intent and executor, and the
// executor's test API stands in for them in other packages' tests.
var ImportedOnlyBy = map[string][]string{
	"internal/ledger": {"intent", "executor", "executor/executortest"},
}

// AllowedInTests lists test imports of a higher layer, importer →
// imported, each with its reason: an integration test that drives a
// package through the layer above it.
var AllowedInTests = map[[2]string]string{
	{"tools/stripe", "executor"}: "drives stripe.payment through a real executor on stripe-mock: its error classes against the executor's retries",
	{"tools/stripe", "intent"}:   "the executor of that test needs the intent store",
}

// Pending lists imports that break the rule today, each with the issue
// whose change removes it. The test fails when one is no longer there.
var Pending = map[[2]string]string{}

// Production lists the commands that must link no lab package (beyond the
// pending exceptions).
var Production = []string{"cmd/retrysafe"}

// LayerOf returns rel's layer and whether the table places it.
func LayerOf(rel string) (int, bool) {
	if l, ok := layers[rel]; ok {
		return l, true
	}
	for p := rel; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if l, ok := layers[p+"/*"]; ok && p != rel {
			return l, true
		}
	}
	return 0, false
}

// Rel returns p relative to Module, and whether p is in the module.
func Rel(p string) (string, bool) {
	if p == Module {
		return "", true
	}
	rel, ok := strings.CutPrefix(p, Module+"/")
	return rel, ok
}
