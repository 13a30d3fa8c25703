// Command retrysafe-lab is retrysafe with its lab: every command of
// cmd/retrysafe, plus the demo, the sandbox stand-ins (a PSP speaking API
// Pix or the earlier invented API, an OpenAI-compatible model, a WhatsApp
// Cloud API), the restart test and the soak. The demo and the restart test
// start the engine's commands as processes of this same binary.
//
//	go run ./cmd/retrysafe-lab demo
package main

import (
	"github.com/retrysafe/retrysafe/internal/cli"
	_ "github.com/retrysafe/retrysafe/internal/lab/labcli" // registers the lab's commands
)

func main() { cli.Main() }
