package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// ListenFlags are --addr and --shutdown-timeout of the commands that serve
// HTTP: serve and the sandbox services.
type ListenFlags struct {
	addr     string
	shutdown time.Duration
}

// Register adds --addr, which defaults to the environment variable addrEnv
// or else to def, and --shutdown-timeout.
func (l *ListenFlags) Register(fs *flag.FlagSet, e *Env, addrEnv, def string, shutdown time.Duration) {
	l.addr = e.Getenv(addrEnv)
	if l.addr == "" {
		l.addr = def
	}
	fs.StringVar(&l.addr, "addr", l.addr, "listen address (env "+addrEnv+")")
	fs.DurationVar(&l.shutdown, "shutdown-timeout", shutdown, "how long SIGTERM waits for requests in progress")
}

// Check rejects an address that cannot be listened on, with the flag's
// value in the message (a UsageError), before the command starts anything
// slow.
func (l *ListenFlags) Check() error {
	if _, err := net.ResolveTCPAddr("tcp", l.addr); err != nil {
		return usageErr(fmt.Errorf("--addr %q: %w", l.addr, err))
	}
	return nil
}

// httpService is what serveHTTP runs.
type httpService struct {
	name    string // prefixes the log messages: "serve", "sandbox psp"
	banner  string // prefixes the ready line: "retrysafe", "retrysafe sandbox psp"
	handler http.Handler
	log     *slog.Logger
	// readTimeout, when set, also bounds the body: ReadHeaderTimeout
	// alone lets a slow body hold a connection open.
	readTimeout time.Duration
	readyAttrs  []any // describe the configuration in the ready log
	// shutdownAttrs and errKey keep each command's log lines as they
	// were: log queries and alerts match them.
	shutdownAttrs []any
	errKey        string
	// Background, when set, runs until the server has shut down: work
	// it does for a request (a webhook, a reconciliation) is not cut
	// while that request is still being answered.
	Background func(context.Context)
}

// SandboxHTTP is the httpService of `retrysafe sandbox <name>`.
func SandboxHTTP(name string, log *slog.Logger, h http.Handler, readyAttrs ...any) httpService {
	return httpService{
		name:       "sandbox " + name,
		banner:     "retrysafe sandbox " + name,
		handler:    h,
		log:        log,
		readyAttrs: readyAttrs,
		errKey:     "err",
	}
}

// Serve serves s on l.addr until ctx ends or serving fails. Once
// listening it prints "<banner>: listening on http://HOST:PORT" on stdout
// (scripts and tests wait for that line). Then it stops accepting, lets
// the requests in progress finish for up to l.shutdown (closing them after
// that) and only then stops s.background.
func (l *ListenFlags) Serve(ctx context.Context, e *Env, s httpService) error {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.readTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	// Not ctx: the signal that stops serving must not stop the background
	// work before the requests in progress have their answers.
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBg()
	var wg sync.WaitGroup
	if s.Background != nil {
		wg.Go(func() { s.Background(bgCtx) })
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	url := "http://" + ln.Addr().String()
	s.log.Info(s.name+": ready", append([]any{"addr", url}, s.readyAttrs...)...)
	fmt.Fprintf(e.Stdout, "%s: listening on %s\n", s.banner, url)

	var runErr error
	select {
	case <-ctx.Done():
		s.log.Info(s.name+": shutting down", s.shutdownAttrs...)
	case runErr = <-serveErr:
	}
	sctx, cancel := context.WithTimeout(context.Background(), l.shutdown)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Warn(s.name+": requests still running at the shutdown timeout", s.errKey, err)
		hs.Close() //nolint:errcheck
	}
	stopBg()
	wg.Wait()
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) {
		return runErr
	}
	s.log.Info(s.name + ": stopped")
	return nil
}
