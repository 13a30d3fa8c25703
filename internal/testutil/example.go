package testutil

import (
	"fmt"
	"testing"
)

// ExampleTB lets an Example, which has no testing.TB, call a helper that
// wants one (pgtest.Schema): Fatal and Fatalf panic, Helper and Logf do
// nothing, and Cleanup drops its function, so use it only where what the
// helper would clean up goes away anyway (pgtest's package database is
// dropped when the test binary exits). Any other method panics.
type ExampleTB struct{ testing.TB }

func (ExampleTB) Helper()                        {}
func (ExampleTB) Cleanup(func())                 {}
func (ExampleTB) Fatal(args ...any)              { panic(fmt.Sprint(args...)) }
func (ExampleTB) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
func (ExampleTB) Logf(string, ...any)            {}
