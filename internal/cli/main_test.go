package cli

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// Some commands' tests need PostgreSQL: the package gets its own database.
func TestMain(m *testing.M) { pgtest.Main(m) }
