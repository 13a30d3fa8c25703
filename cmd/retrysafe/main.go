// Command retrysafe is the one binary of the retrysafe runtime: it migrates
// the database, derives keys, runs the sidecar server, the worker, the
// sandbox services and the operator tools. `retrysafe help` lists them.
package main

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
	"strings"
	"syscall"
)

// command is one subcommand. Each lives in its own file and registers itself
// from init, so that commands can be added without touching this file.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate command " + c.name)
	}
	commands[c.name] = c
}

// env is what a command may touch of the outside world; tests substitute it.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// errUsage marks an error already explained by a usage message: exit 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	code := runMain(ctx, e, os.Args[1:])
	stop()
	os.Exit(code)
}

func runMain(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return exitCode(e, c.run(ctx, e, []string{"--help"}))
			}
		}
		usage(e.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		fmt.Fprintln(e.stdout, versionText())
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "retrysafe: unknown command %q\n\n", args[0])
		usage(e.stderr)
		return 2
	}
	return exitCode(e, c.run(ctx, e, args[1:]))
}

func exitCode(e *env, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errSilentFailure):
		return 1
	default:
		fmt.Fprintf(e.stderr, "retrysafe: %v\n", err)
		return 1
	}
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

// errSilentFailure ends a command with exit 1 after it has reported its own
// failure (for example `key`, which writes errors per line).
var errSilentFailure = errors.New("failed")

func usage(w io.Writer) {
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
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
}

// newFlagSet builds a flag set whose --help prints a description first and
// whose errors return instead of exiting.
func newFlagSet(e *env, name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: retrysafe %s\n\n%s\n\nFlags:\n", synopsis, description)
		printDefaults(out, fs, e.getenv)
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
			if name == "string" {
				line += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				line += fmt.Sprintf(" (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, line)
	})
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

// parseFlags parses args; a parse error (already printed) becomes errUsage,
// and --help prints to stdout and returns flag.ErrHelp.
func parseFlags(e *env, fs *flag.FlagSet, args []string) error {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return flag.ErrHelp
		}
		if a == "--" {
			break
		}
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	return nil
}

// parseNoArgs is parseFlags for the commands that take flags only: a
// stray argument is a usage error naming it.
func parseNoArgs(e *env, fs *flag.FlagSet, args []string) error {
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return errUsage
	}
	return nil
}
