// Command retrysafe is the retrysafe runtime: it migrates the database,
// derives keys, serves the sidecar, the MCP server, the webhooks and the
// operator console, works the agent's queue and settles what needs a
// person. `retrysafe help` lists the commands.
//
// It links none of the lab: the demo, the sandbox stand-ins and the restart
// test are in cmd/retrysafe-lab.
package main

import "github.com/retrysafe/retrysafe/internal/cli"

func main() { cli.Main() }
