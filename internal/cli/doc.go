// Package cli is retrysafe's command line: the command table, the flags
// and environment every command shares (database, HMAC secret, providers,
// executor timings, logs, listen addresses), and the engine's commands
// (serve, worker, mcp, migrate, inspect, reconcile, resolve, amend, purge,
// key, normalize, tokens, operator).
//
// Two binaries run it. cmd/retrysafe links only this package's commands:
// it is what a deployment runs. cmd/retrysafe-lab also links package
// internal/lab/labcli, whose commands (demo, sandbox, restart-test, soak)
// start the sandbox stand-ins and the process harness; it registers them
// into this package's table with Register. No package here imports the
// lab (internal/importrule checks it).
//
// Help never prints a value taken from the environment (printDefaults):
// defaults from the environment include DATABASE_URL's password, the HMAC
// secret and the API tokens.
//
// # Defaults
//
// A flag that sets a field of an engine package's Config (executor.Config,
// agent.Config and RiverConfig, sidecar.Config, mcpserver.Config,
// console.Config, the purge parameters) takes its default from that
// package's exported constant (executor.DefaultLease, agent.DefaultClaimTTL,
// ...), which the package's own validation fills into a zero field: a
// default is written once, and --help shows the one that applies
// (TestFlagDefaultsArePackageDefaults compares them). Defaults of the
// command line itself (--addr, --max-conns, --log-format) live here.
//
// # Exit codes
//
// The same for every command of both binaries:
//
//	0  done (also --help and --version)
//	1  failed while working: the database, a provider, a refusal (an action
//	   not in review, an intent not found), a check that found a problem
//	   (key and normalize lines, the demo's and the restart test's verdicts)
//	2  not started: the command line or a setting is wrong or missing (an
//	   unknown command or flag, a value the command or an engine package's
//	   Config refuses, RETRYSAFE_HMAC_KEY unset, ...). The message names
//	   every setting at fault; run again unchanged, the command fails again,
//	   so a supervisor should not restart it (systemd:
//	   RestartPreventExitStatus=2).
//
// A command returns a UsageError (or ErrUsage, once it has explained
// itself) for 2, ErrSilentFailure for a 1 it has reported itself, any
// other error for 1; Run prints the message and maps it (exitCode).
// Errors wrapping an engine package's ErrConfig count as 2.
// TestExitCodes runs every command with an unknown flag and with a missing
// setting.
//
// # Imports
//
// cli imports the engine and its edges (derive, tools and tools/*,
// intent, executor, agent, webhook, server/*, migrations, internal/tokens,
// dbpool, internal/pgembed, internal/riverschema,
// internal/failpoint, internal/strictjson, internal/pairs) and nothing of
// the lab. River's tables are riverschema's to know: cli asks it whether
// they are there.
package cli
