package pgembed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// StandbyOptions configure a standby.
type StandbyOptions struct {
	// Name is its application_name at the primary, the name
	// synchronous_standby_names lists; default "standby".
	Name string
	// Port to listen on; 0 picks a free one.
	Port int
	// Unsafe and Settings as in Options.
	Unsafe   bool
	Settings []string
}

// Standby makes a streaming standby of c: a base backup of the running
// server (pg_basebackup, WAL streamed along, a fast checkpoint), started in
// standby mode with primary_conninfo pointing at c. The primary decides
// whether it is synchronous (synchronous_standby_names naming
// o.Name); the standby itself starts with no synchronous standby of its
// own, so that once promoted it does not wait for one it does not have.
// initdb's pg_hba.conf lets local replication connections in (trust).
// The standby's server starts with c's environment (Options.Env).
func (c *Cluster) Standby(ctx context.Context, o StandbyOptions) (*Cluster, error) {
	if o.Name == "" {
		o.Name = "standby"
	}
	s, err := newCluster()
	if err != nil {
		return nil, err
	}
	s.env = c.env
	data := filepath.Join(s.Dir, "data")
	if out, err := s.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres",
		"-D", data, "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		os.RemoveAll(s.Dir)
		return nil, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	// Later lines of postgresql.auto.conf win over the primary's, which
	// the backup copied (its synchronous_standby_names among them).
	conf := fmt.Sprintf("\nprimary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'\nsynchronous_standby_names = ''\n", c.Port, o.Name)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(data, "standby.signal"), nil, 0o600)
	}
	if err == nil && s.cred != nil {
		for _, name := range []string{"postgresql.auto.conf", "standby.signal"} {
			if err = os.Chown(filepath.Join(data, name), int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				break
			}
		}
	}
	if err != nil {
		os.RemoveAll(s.Dir)
		return nil, fmt.Errorf("configure the standby: %w", err)
	}
	settings := durableSettings
	if o.Unsafe {
		settings = unsafeSettings
	}
	if err := s.launch(ctx, o.Port, append(slices.Clone(settings), o.Settings...)); err != nil {
		os.RemoveAll(s.Dir)
		return nil, err
	}
	return s, nil
}

// Promote ends a standby's recovery and makes it a primary, waiting until
// it accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	out, err := c.run(ctx, "pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-w", "-t", "60", "promote")
	if err != nil {
		return fmt.Errorf("pg_ctl promote: %w\n%s", err, out)
	}
	return nil
}
