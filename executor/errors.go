package executor

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Which errors a caller may retry.

// refused marks a database refusal of the call's own data (SQLSTATE class
// 22: a NUL, invalid UTF-8, a value out of range; class 54: a value too
// large for an index entry) as ErrRefused: nothing
// of the call committed, and the same call would be refused again.
// intent.Storable keeps such values from reaching the database; this is
// the backstop, so that no caller is told to retry what cannot succeed.
func refused(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "54")) {
		// The code only: the server's message may quote the value.
		return fmt.Errorf("%w (SQLSTATE %s)", ErrRefused, pgErr.Code)
	}
	return err
}

func isRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrInFlight), errors.Is(err, ErrLeaseLost):
		return true
	case errors.Is(err, ErrNeedsReview), errors.Is(err, ErrFailed):
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
