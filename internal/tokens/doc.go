// Package tokens measures what repeated model calls cost: an estimate from
// business inputs (conversations per month, tokens per call, prices, ticket,
// repeat rate) and a measurement from the model_calls ledger.
//
// A duplicated Pix charge can be refunded; a duplicated model call cannot.
// All money arithmetic uses exact decimals (github.com/govalues/decimal):
// float drift never reaches a figure that someone will put in a budget.
//
// Measurement prices what a Ledger sums. The ledger's SQL belongs to the
// table's owner: agent.Ledger aggregates model_calls over a covering index
// on created_at, so a month of millions of ledger rows is read without
// touching the heap. A call is a duplicate when its (tenant, message, step)
// was already answered by an earlier real call inside the measured window;
// calls the journal avoided are the ledger's replayed rows, priced at what
// they would have cost.
//
// This package imports govalues/decimal and no database driver (the Ledger
// is passed in); it is internal machinery of the `retrysafe tokens`
// command and the console's spend chart.
package tokens
