// Package cli is retrysafe's command line: the command table, the flags
// and environment every command shares (database, HMAC secret, providers,
// executor timings, logs, listen addresses), and the engine's commands
// (serve, worker, mcp, migrate, inspect, reconcile, resolve, amend, purge,
// key, normalize, tokens, operator).
//
// Two binaries run it. cmd/retrysafe links only this package's commands:
// it is what a deployment runs. cmd/retrysafe-lab also links package
// internal/labcli, whose commands (demo, sandbox, restart-test, soak)
// start the sandbox stand-ins and the process harness; it registers them
// into this package's table with Register. No package here imports the
// lab (internal/importrule checks it).
//
// Help never prints a value taken from the environment (printDefaults):
// defaults from the environment include DATABASE_URL's password, the HMAC
// secret and the API tokens.
//
// # Imports
//
// cli imports the engine and its edges (derive, tools and tools/*,
// intent, executor, agent, webhook, server/*, migrations, internal/tokens,
// internal/dbconf, internal/pgembed, internal/riverschema,
// internal/failpoint) and nothing of the lab.
package cli
