package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retrysafe/retrysafe/server/console"
	"github.com/retrysafe/retrysafe/tools"
)

func init() {
	Register(&Command{Name: "operator", Summary: "manage the operators who sign in to the console (/console)", Run: runOperator})
}

func runOperator(ctx context.Context, e *Env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "add":
			return runOperatorAdd(ctx, e, args[1:])
		case "list":
			return runOperatorList(ctx, e, args[1:])
		case "disable":
			return runOperatorDisable(ctx, e, args[1:])
		}
	}
	w := e.Stderr
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help") {
		w = e.Stdout
	}
	fmt.Fprint(w, `Usage: retrysafe operator <add|list|disable> [flags]

Operators are the people who sign in to the console that 'serve' mounts at
/console. Each has its own token (not a tenant's API token) and sees only the
tenants it is given.

  add       create an operator (or --rotate its token) and print the token once
  list      list operators and their tenants
  disable   stop an operator from signing in and end its sessions

retrysafe operator <subcommand> --help for its flags.
`)
	if w == e.Stdout {
		return nil
	}
	return ErrUsage
}

func runOperatorAdd(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "operator add", "operator add --name NAME --tenants T1,T2 [--rotate]",
		`Creates an operator scoped to the given tenants and prints its token on
stdout, once: only a hash is stored. Give it to the operator, who signs in
with it at /console. --rotate gives an existing operator a new token and
these tenants (its sessions end; a disabled operator is enabled again).`)
	var db DBFlags
	db.Register(fs, e)
	name := fs.String("name", "", "the operator's name, recorded with every settlement (required)")
	tenants := fs.String("tenants", "", "comma separated tenants the operator may see and settle (required)")
	rotate := fs.Bool("rotate", false, "replace an existing operator's token and tenants")
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	if *name == "" || strings.TrimSpace(*tenants) == "" {
		fmt.Fprintln(e.Stderr, "operator add: --name and --tenants are required")
		return ErrUsage
	}
	d, err := db.openExisting(ctx, e, "operator add")
	if err != nil {
		return err
	}
	defer d.Close()
	token, err := console.AddOperator(ctx, d.Pool, *name, strings.Split(*tenants, ","), *rotate)
	switch {
	case errors.Is(err, console.ErrOperatorExists):
		return fmt.Errorf("operator %q already exists (--rotate gives it a new token)", *name)
	case errors.Is(err, console.ErrNoOperator):
		return fmt.Errorf("no operator %q to rotate", *name)
	case errors.Is(err, console.ErrBadOperatorName), errors.Is(err, console.ErrNoTenants):
		fmt.Fprintln(e.Stderr, "operator add: "+err.Error())
		return ErrUsage
	case err != nil:
		return err
	}
	fmt.Fprintln(e.Stdout, token)
	return nil
}

func runOperatorList(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "operator list", "operator list", `Lists operators, their tenants and whether they are disabled. Tokens are never shown.`)
	var db DBFlags
	db.Register(fs, e)
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	d, err := db.openExisting(ctx, e, "operator list")
	if err != nil {
		return err
	}
	defer d.Close()
	ops, err := console.ListOperators(ctx, d.Pool)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTENANTS\tCREATED\tDISABLED")
	for _, o := range ops {
		dis := ""
		if o.DisabledAt != nil {
			dis = o.DisabledAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.Name, strings.Join(o.Tenants, ","), o.CreatedAt.UTC().Format(time.RFC3339), dis)
	}
	return tw.Flush()
}

func runOperatorDisable(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "operator disable", "operator disable --name NAME", `Stops the operator from signing in and ends its sessions at once.`)
	var db DBFlags
	db.Register(fs, e)
	name := fs.String("name", "", "the operator (required)")
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	if *name == "" {
		fmt.Fprintln(e.Stderr, "operator disable: --name is required")
		return ErrUsage
	}
	d, err := db.openExisting(ctx, e, "operator disable")
	if err != nil {
		return err
	}
	defer d.Close()
	if err := console.DisableOperator(ctx, d.Pool, *name); errors.Is(err, console.ErrNoOperator) {
		return fmt.Errorf("no operator %q", *name)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "operator %s disabled\n", *name)
	return nil
}

// consoleFlags configure the console that serve mounts at /console.
type consoleFlags struct {
	enabled    bool
	ttl        time.Duration
	requestLog string
	prices     string
	currency   string
}

func (c *consoleFlags) register(fs *flag.FlagSet, e *Env) {
	fs.BoolVar(&c.enabled, "console", e.Getenv("RETRYSAFE_CONSOLE") != "off", "serve the operator console at /console (env RETRYSAFE_CONSOLE=off turns it off); operators come from 'retrysafe operator add'")
	fs.DurationVar(&c.ttl, "console-session", console.DefaultSessionTTL, "how long an operator's sign-in lasts")
	fs.StringVar(&c.requestLog, "console-request-log", e.Getenv("RETRYSAFE_CONSOLE_REQUEST_LOG"),
		"URL of the PSP's request log in the sandbox PSP's shape (e.g. http://127.0.0.1:8081/_sandbox/requests; env RETRYSAFE_CONSOLE_REQUEST_LOG): the console then shows the requests that carried a key")
	fs.StringVar(&c.prices, "console-prices", e.Getenv("RETRYSAFE_CONSOLE_PRICES"),
		`JSON file of model prices for the console's spend chart, as 'tokens measure --prices' reads it ({"MODEL":{"input_per_1k":"0.015","output_per_1k":"0.075"}}); models without one are priced at those defaults, and the page says so (env RETRYSAFE_CONSOLE_PRICES)`)
	fs.StringVar(&c.currency, "console-currency", console.DefaultCurrency, "currency of --console-prices")
}

// mountConsole puts the console in front of api at /console/ when enabled.
func mountConsole(api http.Handler, c *consoleFlags, d *database, reg *tools.Registry, log *slog.Logger) (http.Handler, error) {
	if !c.enabled {
		return api, nil
	}
	cfg := console.Config{DB: d.Pool, Tools: reg, Logger: log, SessionTTL: c.ttl}
	if c.requestLog != "" {
		u, err := url.Parse(c.requestLog)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageErr(fmt.Errorf("--console-request-log %q: want an http(s) URL", c.requestLog))
		}
		cfg.Requests = &console.HTTPRequestLog{URL: c.requestLog}
	}
	if c.prices != "" {
		raw, err := os.ReadFile(c.prices)
		if err != nil {
			return nil, usageErr(fmt.Errorf("--console-prices: %w", err))
		}
		if err := json.Unmarshal(raw, &cfg.Prices); err != nil {
			return nil, usageErr(fmt.Errorf("--console-prices %s: %w", c.prices, err))
		}
	}
	cfg.Currency = c.currency
	h, err := console.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.Handle(console.Prefix+"/", h)
	mux.Handle("GET "+console.Prefix, http.RedirectHandler(console.Prefix+"/", http.StatusMovedPermanently))
	log.Info("serve: operator console mounted", "path", console.Prefix+"/")
	return mux, nil
}
