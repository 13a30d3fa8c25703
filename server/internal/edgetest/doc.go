// Package edgetest builds what the sidecar's and the MCP server's tests put
// behind the edge: a schema of its own, a fake PSP, pix.charge, the intent
// store, and an executor whose Observer is a fresh metrics.Metrics, as
// internal/cli wires them.
//
// # Imports
//
// edgetest imports executor, intent, server/metrics, tools and the lab's
// pgtest, testutil and toolstest. Only tests import it.
package edgetest
