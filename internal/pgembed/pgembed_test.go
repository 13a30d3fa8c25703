package pgembed_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/pgembed"
)

// Starting a real private cluster is the only honest test of this package.
func TestStartQueryStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgembed.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		c.Stop()
		t.Fatal(err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("SELECT 1 = %d, %v", one, err)
	}
	conn.Close(ctx)
	if err := c.Restart(ctx); err != nil {
		t.Error(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s still exists after Stop", c.Dir)
	}
}

func TestMissingBinaries(t *testing.T) {
	t.Setenv("PG_BINDIR", t.TempDir())
	if _, err := pgembed.FindBinDir(); err == nil {
		t.Fatal("FindBinDir accepted a directory with no initdb")
	}
}
