package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/server/console"
	"github.com/retrysafe/retrysafe/server/mcpserver"
	"github.com/retrysafe/retrysafe/server/sidecar"
	"github.com/retrysafe/retrysafe/webhook"
	"github.com/retrysafe/retrysafe/whatsapp"
)

// Command is one subcommand. Each lives in its own file and registers itself
// from init, so that commands can be added without touching this file.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, env *Env, args []string) error
}

var commands = map[string]*Command{}

// labCommands are the commands of cmd/retrysafe-lab (package labcli): the
// engine's binary names them when asked, instead of "unknown command".
var labCommands = map[string]bool{"demo": true, "sandbox": true, "restart-test": true, "soak": true}

func Register(c *Command) {
	if _, dup := commands[c.Name]; dup {
		panic("duplicate command " + c.Name)
	}
	commands[c.Name] = c
}

// Env is what a command may touch of the outside world; tests substitute it.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// Exit codes, the same for every command of both binaries (see the package
// documentation).
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// ErrUsage marks an error already explained on stderr (a usage message,
// the command's own line): exit 2.
var ErrUsage = errors.New("usage")

// UsageError is a wrong command line or setting, found before the command
// started its work: exit 2, with the message. Run again unchanged, the
// command would meet it again; a supervisor should not restart on it.
type UsageError struct{ Err error }

func (u *UsageError) Error() string { return u.Err.Error() }
func (u *UsageError) Unwrap() error { return u.Err }

// usageErr marks err, when not nil, as a UsageError.
func usageErr(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{Err: err}
}

// configErrors are the engine's "invalid Config" sentinels: a setting that
// reaches a package's Config and is refused there is as wrong as one the
// command checks itself (--group-commit -3, --rescue-after below
// --job-timeout).
var configErrors = []error{executor.ErrConfig, agent.ErrConfig, webhook.ErrConfig, sidecar.ErrConfig,
	mcpserver.ErrConfig, console.ErrConfig, whatsapp.ErrConfig}

// isUsage reports whether err is a wrong command line or setting: exit 2.
func isUsage(err error) bool {
	var u *UsageError
	if errors.As(err, &u) {
		return true
	}
	for _, c := range configErrors {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

// Main runs the process's command line and exits with its code. Both
// binaries call it: cmd/retrysafe (the engine's commands) and
// cmd/retrysafe-lab (the same, with the lab's registered beside them).
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	e := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	code := Run(ctx, e, os.Args[1:])
	stop()
	os.Exit(code)
}

// Run runs the command line args with e as the outside world and returns
// the exit code: ExitOK, ExitFailure (printed) or ExitUsage.
func Run(ctx context.Context, e *Env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return exitCode(e, c.Run(ctx, e, []string{"--help"}))
			}
		}
		if len(args) == 0 { // a mistake: the usage goes where errors go
			printUsage(e.Stderr)
			return ExitUsage
		}
		printUsage(e.Stdout)
		return ExitOK
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		fmt.Fprintln(e.Stdout, versionText())
		return ExitOK
	}
	c, ok := commands[args[0]]
	if !ok && labCommands[args[0]] {
		fmt.Fprintf(e.Stderr, "retrysafe: %q is in the lab binary, which links the sandboxes and test harness the engine leaves out:\n  go run ./cmd/retrysafe-lab %s\n", args[0], strings.Join(args, " "))
		return ExitUsage
	}
	if !ok {
		fmt.Fprintf(e.Stderr, "retrysafe: unknown command %q\n\n", args[0])
		printUsage(e.Stderr)
		return ExitUsage
	}
	return exitCode(e, c.Run(ctx, e, args[1:]))
}

func exitCode(e *Env, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrSilentFailure):
		return ExitFailure
	}
	// One line per error: a start-up names every wrong setting at once.
	for line := range strings.Lines(err.Error()) {
		fmt.Fprintf(e.Stderr, "retrysafe: %s", line)
	}
	fmt.Fprintln(e.Stderr)
	if isUsage(err) {
		return ExitUsage
	}
	return ExitFailure
}

// versionText is the module version and, for a binary built from a
// checkout, the commit it was built from.
func versionText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "retrysafe (unknown version)"
	}
	v := bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	out := "retrysafe " + v
	if rev != "" {
		out += " (commit " + rev[:min(12, len(rev))] + modified + ")"
	}
	return out + " " + bi.GoVersion
}

// ErrSilentFailure ends a command with exit 1 after it has reported its own
// failure (for example `key`, which writes errors per line).
var ErrSilentFailure = errors.New("failed")

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "retrysafe: run LLM agent tools that move money and send messages, once,")
	fmt.Fprintln(w, "under retries, redeliveries and crashes.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: retrysafe <command> [flags]   (retrysafe <command> --help for its flags;")
	fmt.Fprintln(w, "       retrysafe --version)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Exit codes, the same for every command:")
	fmt.Fprintln(w, "  0  done")
	fmt.Fprintln(w, "  1  failed while working (the database, a provider, a refusal, a check")
	fmt.Fprintln(w, "     that found a problem); the message says what")
	fmt.Fprintln(w, "  2  not started: the command line or a setting is wrong or missing (an")
	fmt.Fprintln(w, "     unknown flag, a bad value, RETRYSAFE_HMAC_KEY unset, ...); the message")
	fmt.Fprintln(w, "     names every setting at fault, and running again unchanged fails again")
}

// NewFlagSet builds a flag set whose --help prints a description first and
// whose errors return instead of exiting.
func NewFlagSet(e *Env, name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: retrysafe %s\n\n%s\n\nFlags:\n", synopsis, description)
		printDefaults(out, fs, e.Getenv)
	}
	return fs
}

// envName finds the variable a flag's usage says it reads: "(env NAME".
var envName = regexp.MustCompile(`\benv ([A-Z][A-Z0-9_]*)`)

// printDefaults is flag.PrintDefaults, except that a default taken from
// the environment is never printed: the flag says it is set from its
// variable instead. Defaults from the environment include DATABASE_URL's
// password, the HMAC secret and API tokens, and help output ends up in
// terminals, CI logs and bug reports.
func printDefaults(w io.Writer, fs *flag.FlagSet, getenv func(string) string) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  -" + f.Name
		if name != "" {
			line += " " + name
		}
		if len(line) <= 4 { // a one-letter flag without a value: usage on the same line
			line += "\t"
		} else {
			line += "\n    \t"
		}
		line += strings.ReplaceAll(usage, "\n", "\n    \t")
		fromEnv := ""
		for _, m := range envName.FindAllStringSubmatch(usage, -1) {
			if v := getenv(m[1]); v != "" && v == f.DefValue {
				fromEnv = m[1]
				break
			}
		}
		switch {
		case fromEnv != "":
			line += " (set from " + fromEnv + ")"
		case !isZeroDefault(f):
			line += " (default " + defaultText(name, f.DefValue) + ")"
		}
		fmt.Fprintln(w, line)
	})
}

// defaultText is a flag's default as help shows it: strings quoted, as
// flag.PrintDefaults does, and durations as the flag takes them ("6h", not
// Go's "6h0m0s").
func defaultText(typeName, def string) string {
	switch typeName {
	case "string":
		return strconv.Quote(def)
	case "duration":
		if d, err := time.ParseDuration(def); err == nil {
			return durationText(d)
		}
	}
	return def
}

// isZeroDefault reports whether f's default is its type's zero value, which
// flag.PrintDefaults leaves out.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "0s", "false", "[]":
		return true
	}
	return false
}

// ParseFlags parses args; a parse error (already printed) becomes errUsage,
// and --help prints to stdout and returns flag.ErrHelp.
func ParseFlags(e *Env, fs *flag.FlagSet, args []string) error {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(e.Stdout)
			fs.Usage()
			return flag.ErrHelp
		}
		if a == "--" {
			break
		}
	}
	if err := fs.Parse(args); err != nil {
		return ErrUsage
	}
	return nil
}

// ParseNoArgs is parseFlags for the commands that take flags only: a
// stray argument is a usage error naming it.
func ParseNoArgs(e *Env, fs *flag.FlagSet, args []string) error {
	if err := ParseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.Stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return ErrUsage
	}
	return nil
}
