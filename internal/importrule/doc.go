// Package importrule states retrysafe's import rule once and enforces it:
// its test runs `go list` over the module and fails on any import of one of
// the module's packages that the rule does not allow. It has no code of its
// own; the rule is the table in rule.go.
//
// # The rule
//
// Packages sit in layers, and a package imports only packages of lower
// layers (plus the standard library and its third-party dependencies):
//
//	0 leaves      derive, migrations, internal/failpoint, internal/pgembed,
//	              internal/strictjson, internal/problem, internal/backoff,
//	              internal/lostconn, internal/freeport
//	1 adapters    tools and tools/* (provider clients), dbpool,
//	              internal/riverretry, internal/riverschema, internal/tokens,
//	              idempotency
//	2 ledger      internal/ledger (the SQL of intents, intent_revisions and
//	              actions), intent
//	3 engine      executor
//	4 edges       agent, webhook (inbound payments), whatsapp (inbound
//	              WhatsApp), server/* (sidecar, metrics, mcpserver, console,
//	              internal/edge: what the sidecar and mcpserver share)
//	5 lab         sandbox/* (stand-ins of providers, their fault injector),
//	              internal/lab/harness, internal/lab/restarttest,
//	              agent/agenttest, executor/executortest, tools/toolstest,
//	              internal/pgtest, internal/testutil, internal/problemdocs,
//	              internal/pixspec, server/internal/edgetest (test machinery)
//	6 commands    internal/cli (the engine's commands and the shared flags)
//	7 lab cmds    internal/lab/labcli (demo, sandbox, restart-test, soak)
//	8 binaries    cmd/retrysafe (the engine's commands only) and
//	              cmd/retrysafe-lab (with the lab's)
//
// Tests may also import lab packages and packages of their own layer (an
// external test drives its package through a neighbour), never a higher
// layer, except the integration tests named in AllowedInTests. A few
// imports inside one layer are allowed by name, each with its reason
// (Allowed in rule.go). Lab packages (layer 5) are test and demo
// machinery: no package below layer 5 imports them outside its tests, and a
// package the table does not place fails the test, so that every new
// package is placed deliberately.
//
// A package may also be reserved to named importers (ImportedOnlyBy in
// rule.go): only intent and executor, the ledger's owners, and the
// executor's test API import internal/ledger, so that every other package
// reaches those tables through their Go API.
//
// The production commands (Production in rule.go) link no lab package at
// all, directly or through another package.
//
// Known exceptions, each to be removed by the change that fixes it, are
// listed in Pending with the issue that tracks them; the test fails when an
// exception is no longer needed, so the list cannot go stale.
//
// # Tables and their SQL
//
// Each table of the schema has one owning package (Owners in tables.go),
// which alone holds SQL naming it, unexported; every other package calls
// the owner's Go API. TestSQLOwnership reads every string literal of the
// module's code, tests included, that reads as SQL and fails on a table
// named outside its owner, and on an exported constant or variable of
// non-test code holding SQL. Tests use the owner's API or test API
// (executor/executortest for the ledger); the tests of the ledger's faces
// (intent, executor, executortest, internal/ledger) may check the
// ledger's tables directly, and this package's own sample SQL is exempt.
// River's tables are reached through River's API, but for tests and the
// crash test's reads of River's own state (SQLAllowed, each with its
// reason).
//
// # Sizes
//
// No non-test file runs over MaxFileLines lines, and no function of a
// package a production command links over MaxFuncLines (size.go);
// TestSizes checks both.
//
// SQLPending and SizePending list today's exceptions, each removed by the
// change that fixes it; like Pending, a stale entry fails the test.
//
// # Imports
//
// The test imports only the standard library (and runs the go command).
package importrule
