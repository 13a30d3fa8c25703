package labcli

import (
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/sandbox/fault"
)

// standinFlags are the flags the in-memory HTTP stand-ins (API Pix,
// model, WhatsApp) share: where to listen, the log, and for those that
// inject faults --fault and --fault-rate.
type standinFlags struct {
	lf        cli.ListenFlags
	lg        cli.LogFlags
	faultSpec *string

	// Set by parse.
	fault fault.Spec
	log   *slog.Logger
}

// register registers the flags, the address from addrEnv or addr; with
// rate, --fault (for every request with method and no X-Sandbox-Fault
// header) and --fault-rate into rate too.
func (f *standinFlags) register(fs *flag.FlagSet, e *cli.Env, addrEnv, addr, method string, rate *float64) {
	f.lf.Register(fs, e, addrEnv, addr, 10*time.Second)
	f.lg.Register(fs, e)
	if rate != nil {
		f.faultSpec = fs.String("fault", "", "faults for every "+method+" without an X-Sandbox-Fault header, e.g. fail-after or delay=200ms,drop-after")
		fs.Float64Var(rate, "fault-rate", 1, "probability (0..1) that --fault applies to a request")
	}
}

// parse parses args (no positional ones) and reads the faults and the
// logger.
func (f *standinFlags) parse(e *cli.Env, fs *flag.FlagSet, args []string) error {
	if err := cli.ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	if f.faultSpec != nil {
		var err error
		if f.fault, err = fault.Parse(*f.faultSpec); err != nil {
			return fmt.Errorf("--fault: %w", err)
		}
	}
	log, err := f.lg.Logger(e.Stderr)
	if err != nil {
		return err
	}
	f.log = log
	return nil
}
